"""Where users wait: whole runs and sweeps, next to the kernel, its floor, NumPy and JAX.

One run on one core prints, side by side (µs per optimizer step unless said):

- kernel      the optimizer kernel on pre-made batches (least squares d=100, B=256, K=8):
              ``kernel_for(GD, SQUARED, wide=False)`` with one iterate (``echo_chunk``
              in trees before the method table); also heavy ball, Adam and the
              first-step loss recorded, this tree only;
- floor       a read-only pass over the same batches K times;
- run()       the whole ``echosim.run(LeastSquares(dim=100), EchoedGD(lr=0.05),
              batch_size=256, echo=8, n_batches=T)``, this tree and 0.1 (``--v01 PATH``,
              a checkout of 0.1, run in its own process);
- numpy       the same whole run in plain NumPy (a Generator per run, data per batch);
- jax         the same whole run in JAX (jax.random inside jit, lax.scan), float64;
              skipped with a message if jax is not installed;
- many        the wide kernel with L learning rates (``echo_chunk_many`` before), per
              learning rate, against L calls of the one-iterate kernel (pre-made
              batches), on the sweep's logistic shape (d=10, B=2048) and on least
              squares (d=100, B=256);
- sweep       the 0.1 default sweep's grid (benchmarks/configs/default_sweep_0.1.toml,
              1,476 runs) end to end, whole process, on 1 and 2 workers, with a fresh
              Numba cache (compiling) and a warm one: 0.1's ``python -m echosim sweep``,
              this tree's and --base's (a fresh store, no lr-grid extension);
- memory      peak RSS of a 10⁶-batch run with log="auto" (least squares d=10, B=16).

Timings are medians (and IQR) of ``--repeats`` interleaved repeats of the process's
CPU time (one thread: BLAS, Numba and XLA are set to one thread) (each variant lives in its own worker process; the sweeps are timed once
each by wall clock, ``--sweep-repeats`` for more). The load average is printed at the
start and end: the machine is shared. Run: ``python benchmarks/bench_runs.py --v01
/path/to/0.1`` (``--quick`` skips the sweeps; ``--json PATH`` keeps the numbers; ``--smoke``:
T = 8, one repeat, the GD kernel, floor and whole-run rows, to check the script runs).

Before/after a change: ``--base PATH`` (a checkout of the earlier commit, e.g. from
``git archive``) runs every per-step row in that tree too, interleaved with this
tree's; ``--only TEXT`` keeps the per-step rows whose name contains TEXT (and skips
the sweeps and the memory row), e.g. ``--only logistic`` for the logistic kernel
rows and the ℓ'(z) row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

ROOT = str(harness.ROOT)
SWEEP_CONFIG = str(harness.CONFIGS / "default_sweep_0.1.toml")
L_MANY = 41


# --------------------------------------------------------------------------- worker side


class Bench:
    """The measured variants, set up once per worker process (inputs made before the clock)."""

    def __init__(self, T):
        import numpy as np

        import echosim

        self.np, self.echosim, self.T = np, echosim, T
        self.cache = {}

    def _premade(self, key, problem, B, T):
        if key not in self.cache:
            self.cache[key] = problem.batches(0, 0, T, B)
        return self.cache[key]

    def run(self):
        e = self.echosim
        e.run(e.LeastSquares(dim=100), e.EchoedGD(lr=0.05), batch_size=256, echo=8, n_batches=self.T)
        return self.T * 8

    def _call(self, X, Y, K, lrs, loss, wide, method="gd", first=False):
        """One kernel call over every batch from w = 0, logging once at the end: lrs (T, L).

        This tree's specialised kernel (`kernel_for`), or a tree's ``echo_chunk`` /
        ``echo_chunk_many`` from before the method table."""
        np = self.np
        T, L = lrs.shape
        d = X.shape[2]
        no_rows, counters = np.zeros((0, 0), dtype=np.int64), np.zeros(2, dtype=np.int64)
        try:
            from echosim.training import kernel as kmod
            from echosim.training import losses, methods

            code = {"gd": methods.GD, "heavy_ball": methods.HEAVY_BALL, "adam": methods.ADAM}[method]
            kernel = kmod.kernel_for(code, losses.LOSSES[loss].code, wide)
        except ImportError:  # a tree before the method table: its two kernels, GD only
            from echosim.training import codes
            from echosim.training.kernel import echo_chunk, echo_chunk_many

            if wide:
                W = np.zeros((d, L))
                echo_chunk_many(X, Y, K, lrs, no_rows, codes.METHOD_GD, codes.LOSS_CODES[loss], 0.0, -1.0, 0.0, W,
                                W.copy(), np.zeros((d, L)), np.zeros((d, L)), counters, np.full(L, -1, dtype=np.int64),
                                np.array([T - 1]), False, np.empty((1, d, L)), np.empty((1, d, L)),
                                np.empty((1, d, L)))
                return
            for l in range(L):
                w = np.zeros(d)
                echo_chunk(X, Y, K, np.ascontiguousarray(lrs[:, l]), no_rows, codes.METHOD_GD, codes.LOSS_CODES[loss],
                           0.0, -1.0, 0.0, w, w.copy(), np.zeros(d), np.zeros(d), np.zeros(2, dtype=np.int64),
                           np.array([T - 1]), False, np.empty((1, d)), np.empty((1, d)), np.empty((1, d)))
            return
        n_state = {"gd": 0, "heavy_ball": 1, "adam": 2}[method]
        hyper = {"gd": np.zeros(0), "heavy_ball": np.array([0.9]), "adam": np.array([0.9, 0.999, 1e-8])}[method]
        for cols in ([list(range(L))] if wide else [[l] for l in range(L)]):
            n = len(cols)
            first_loss = np.empty((T, n)) if first else np.zeros((0, n))
            kernel(X, Y, K, np.ascontiguousarray(lrs[:, cols]), no_rows, hyper, 0.0, np.zeros((n, d)),
                   np.zeros((n_state, n, d)), np.zeros((n, d)), np.zeros((n, d)), np.zeros(2, dtype=np.int64),
                   np.full(n, -1, dtype=np.int64), np.array([T - 1]), False, np.empty((1, n, d)), np.empty((1, n, d)),
                   np.empty((1, n, d)), first_loss)

    def kernel(self, method="gd", first=False):
        np = self.np
        X, Y = self._premade("ls", self.echosim.LeastSquares(dim=100), 256, self.T)
        self._call(X, Y, np.full(self.T, 8), np.full((self.T, 1), 0.05), "squared", False, method, first)
        return self.T * 8

    def floor(self):
        from numba import njit

        if "floor" not in self.cache:
            @njit(fastmath={"reassoc", "nsz"})
            def read_floor(X, Y, K):
                total = 0.0
                for t in range(X.shape[0]):
                    xt, yt = X[t], Y[t]
                    for _ in range(K):
                        s = 0.0
                        for i in range(xt.shape[0]):
                            for j in range(xt.shape[1]):
                                s += xt[i, j]
                        for i in range(yt.shape[0]):
                            s += yt[i]
                        total += s
                return total
            self.cache["floor"] = read_floor
        X, Y = self._premade("ls", self.echosim.LeastSquares(dim=100), 256, self.T)
        self.cache["floor"](X, Y, 8)
        return self.T * 8

    def numpy(self):
        np = self.np
        rng = np.random.default_rng(0)
        d, B, K, eta = 100, 256, 8, 0.05
        w_star, w = np.full(d, 0.1), np.zeros(d)
        avg_sum = np.zeros(d)
        for _ in range(self.T):
            X = rng.standard_normal((B, d))
            y = X @ w_star + 0.5 * rng.standard_normal(B)
            for _ in range(K):
                w -= eta * (X.T @ (X @ w - y)) / B
                avg_sum += w
        return self.T * K

    def jax(self):
        if "jax" not in self.cache:
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_enable_x64", True)
            d, B, K, eta = 100, 256, 8, 0.05
            w_star = jnp.full(d, 0.1)

            @jax.jit
            def whole(key, T_arr):
                def batch(carry, t):
                    w, avg = carry
                    kx, ke = jax.random.split(jax.random.fold_in(key, t))
                    X = jax.random.normal(kx, (B, d), dtype=jnp.float64)
                    y = X @ w_star + 0.5 * jax.random.normal(ke, (B,), dtype=jnp.float64)

                    def step(_, c):
                        w, avg = c
                        w = w - eta * (X.T @ (X @ w - y)) / B
                        return w, avg + w

                    return jax.lax.fori_loop(0, K, step, (w, avg)), None

                (w, avg), _ = jax.lax.scan(batch, (jnp.zeros(d), jnp.zeros(d)), T_arr)
                return w, avg

            self.cache["jax"] = (whole, jax.random.PRNGKey(0), jnp.arange(self.T))
            whole(self.cache["jax"][1], self.cache["jax"][2])[0].block_until_ready()  # compile
        whole, key, T_arr = self.cache["jax"]
        whole(key, T_arr)[0].block_until_ready()
        return self.T * 8

    def _many_setup(self, shape):
        np, e = self.np, self.echosim
        if shape == "logistic":
            problem, B, T, lrs = e.Logistic(dim=10, radius=0.2, w_star_norm=10.0), 2048, 32, np.geomspace(0.1, 10, L_MANY)
        else:
            problem, B, T, lrs = e.LeastSquares(dim=100), 256, 64, np.geomspace(0.001, 0.1, L_MANY)
        X, Y = self._premade(shape, problem, B, T)
        return problem, X, Y, T, lrs

    def many(self, shape):
        problem, X, Y, T, lrs = self._many_setup(shape)
        self._call(X, Y, self.np.full(T, 8), self.np.ascontiguousarray(self.np.tile(lrs, (T, 1))), problem.loss, True)
        return T * 8 * len(lrs)

    def singles(self, shape):
        problem, X, Y, T, lrs = self._many_setup(shape)
        self._call(X, Y, self.np.full(T, 8), self.np.ascontiguousarray(self.np.tile(lrs, (T, 1))), problem.loss, False)
        return T * 8 * len(lrs)

    def exps(self):
        """Logistic loss derivatives ℓ'(z) over 10⁶ margins (the kernels' exp-bound part)."""
        from numba import njit

        try:
            from echosim.training.gradients import dlogistic as _dlogistic
        except ImportError:  # older trees: in the kernel's module; the name before it was public;
            try:  # before the loss table, and 0.1's layout, ℓ' with a loss code
                from echosim.training.kernel import dlogistic as _dlogistic
            except ImportError:
                try:
                    from echosim.training.kernel import _dlogistic
                except ImportError:
                    try:
                        from echosim.training.kernel import _dloss
                    except ImportError:
                        from echosim._kernels.optim import _dloss
                    _dlogistic = None

        np = self.np
        if "exps" not in self.cache:
            if _dlogistic is not None:
                @njit(fastmath={"reassoc", "contract", "nsz", "arcp"})
                def derivs(z, y, out):
                    for i in range(z.shape[0]):
                        out[i] = _dlogistic(z[i], y[i])
            else:
                @njit(fastmath={"reassoc", "contract", "nsz", "arcp"})
                def derivs(z, y, out):
                    for i in range(z.shape[0]):
                        out[i] = _dloss(z[i], y[i], 1)
            z = np.random.default_rng(0).normal(0, 3, 1_000_000)
            y = np.where(z > 0, 1.0, -1.0)
            self.cache["exps"] = (derivs, z, y, np.empty_like(z))
        derivs, z, y, out = self.cache["exps"]
        derivs(z, y, out)
        return len(z)


def worker(T):
    bench = Bench(T)
    for line in sys.stdin:
        name, *args = json.loads(line)
        try:
            getattr(bench, name)(*args)  # warm: compile, make inputs
            t0, w0 = time.process_time(), time.perf_counter()
            units = getattr(bench, name)(*args)
            out = {"cpu": (time.process_time() - t0) / units, "wall": (time.perf_counter() - w0) / units}
        except Exception as exc:  # noqa: BLE001 - report, keep serving
            out = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(out), flush=True)


# --------------------------------------------------------------------------- sweeps and memory


def peak_memory(n_batches):
    import resource

    import echosim

    p = echosim.LeastSquares(dim=10)
    echosim.run(p, echosim.EchoedGD(0.05), batch_size=16, echo=1, n_batches=32)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    echosim.run(p, echosim.EchoedGD(0.05), batch_size=16, echo=1, n_batches=n_batches, log="auto")
    print(json.dumps({"peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "base_mb": base,
                      "seconds": time.perf_counter() - t0}))


def sweep_rows(roots, repeats):
    """The 0.1 grid end to end, whole process, wall clock: each tree with a fresh Numba cache
    (compiling) and with a warm one (its own cache, filled by an untimed run first), on 1
    and 2 workers, interleaved; this tree and --base with a fresh store and no lr extension
    (the same 1,476 runs as 0.1)."""

    print(f"\n## The 0.1 default sweep's grid end to end (s, wall clock of the whole process, median of "
          f"{repeats} interleaved repeat(s))\n")
    cases = [(label, cache, w) for label in roots for cache in ("fresh", "warm") for w in (1, 2)]
    results = {case: [] for case in cases}
    with tempfile.TemporaryDirectory(prefix="echosim-bench-") as top:
        def cmd_env(label, cache, w, tmp):
            root = roots[label]
            numba = os.path.join(tmp if cache == "fresh" else top, "numba-" + label.replace(" ", "-"))
            cmd = [sys.executable, "-m", "echosim", "sweep", SWEEP_CONFIG, "--workers", str(w),
                   "--out", os.path.join(tmp, "out"), "--no-plot", "--quiet"]
            if label != "0.1":  # 0.1's default sweep is this grid; it has no store or lr extension
                cmd += ["--store", os.path.join(tmp, "store"), "--set", "sweep.lr_extend=0"]
            return cmd, harness.env_for(root, numba_cache=numba)

        for label in roots:  # fill each tree's warm cache
            with tempfile.TemporaryDirectory(prefix="echosim-bench-") as tmp:
                cmd, env = cmd_env(label, "warm", 2, tmp)
                timed(cmd, env, cwd=roots[label])
        for rep in range(repeats):
            for case in cases:
                with tempfile.TemporaryDirectory(prefix="echosim-bench-") as tmp:
                    cmd, env = cmd_env(*case, tmp)
                    elapsed, tail = timed(cmd, env, cwd=roots[case[0]])
                    results[case].append(elapsed if elapsed is not None else tail)
    print("| code | Numba cache | 1 worker | 2 workers |\n| --- | --- | ---: | ---: |")
    med, out = {}, []
    for label in roots:
        for cache in ("fresh", "warm"):
            cells = []
            for w in (1, 2):
                vals = results[(label, cache, w)]
                nums = [v for v in vals if isinstance(v, float)]
                if nums:
                    med[(label, cache, w)] = harness.median(nums)
                out.append({"code": label, "numba_cache": cache, "workers": w, **harness.summary(nums)})
                cells.append(f"{med[(label, cache, w)]:.1f}" if nums else f"failed: {vals[0]}")
            print(f"| {label} | {cache} | {cells[0]} | {cells[1]} |")
    print()
    for other in ("0.1", "base"):
        for cache in ("fresh", "warm"):
            for w in (1, 2):
                if (other, cache, w) in med and ("this tree", cache, w) in med:
                    target = " (target ≥ 2.5)" if other == "0.1" and cache == "fresh" else ""
                    print(f"- {other} / this tree, {cache} cache, {w} worker(s){target}: "
                          f"{med[(other, cache, w)] / med[('this tree', cache, w)]:.2f}×")
    return out


def timed(cmd, env, cwd=ROOT):
    """(wall seconds, last line of stdout) of a command, or (None, last line of stderr) if it failed."""
    o = harness.run_command(cmd, env=env, cwd=cwd)
    if o.status:
        return None, [o.last_line("err") or "failed"]
    return o.seconds, [o.last_line()]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--v01", metavar="PATH", help="a checkout of echosim 0.1 (e.g. a worktree of 3054723)")
    p.add_argument("--batches", type=int, default=400, help="T of the whole-run and kernel rows (default 400)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--sweep-repeats", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="skip the sweeps and the memory row")
    p.add_argument("--base", metavar="PATH", help="another checkout (e.g. the commit before a change) whose "
                   "per-step rows run interleaved with this tree's")
    p.add_argument("--only", metavar="TEXT", action="append",
                   help="only the per-step rows whose name contains TEXT (repeatable); no sweeps, no memory row")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--memory", type=int, metavar="BATCHES", help=argparse.SUPPRESS)
    harness.add_options(p, smoke="T = 8, one repeat, the GD kernel, floor and whole-run rows only")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.batches)
    if args.memory:
        return peak_memory(args.memory)
    if args.smoke:
        args.batches, args.repeats, args.quick = 8, 1, True
        args.only = args.only or ["kernel (GD", "floor", "whole run"]
    with harness.Session("bench_runs", args, argv) as session:
        session.results = measure(args)


def measure(args) -> dict:
    """Every row; returns what the session writes."""
    print("one thread per process")
    roots = {"this tree": ROOT}
    if args.v01:
        roots["0.1"] = os.path.abspath(args.v01)
    if args.base:
        roots["base"] = os.path.abspath(args.base)
    procs = {}
    for label, root in roots.items():
        procs[label] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", "--batches",
                                         str(args.batches)], env=harness.env_for(root), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=root)
    try:
        import jax  # noqa: F401
        has_jax = True
    except ImportError:
        has_jax = False
    rows = [("kernel (GD, pre-made data)", "this tree", ["kernel"]),
            ("read-only floor", "this tree", ["floor"]),
            ("kernel, heavy ball (same data)", "this tree", ["kernel", "heavy_ball"]),
            ("kernel, Adam (same data)", "this tree", ["kernel", "adam"]),
            ("kernel, GD recording the first-step loss", "this tree", ["kernel", "gd", True]),
            ("whole run()", "this tree", ["run"]),
            ("whole run()", "0.1", ["run"]),
            ("whole run, plain NumPy", "this tree", ["numpy"])]
    if has_jax:
        rows.append(("whole run, JAX (jit + scan, jax.random)", "this tree", ["jax"]))
    for shape in ("logistic", "least_squares"):
        rows.append((f"L={L_MANY} at once, per lr ({shape})", "this tree", ["many", shape]))
        rows.append((f"{L_MANY} single kernel calls, per lr ({shape})", "this tree", ["singles", shape]))
    rows.append(("logistic ℓ'(z) (one exp each), ns", "this tree", ["exps"]))
    if "0.1" in procs:
        rows.append(("logistic ℓ'(z) (one exp each), ns", "0.1", ["exps"]))
    if "base" in procs:  # once more in the base tree, each row that times echosim's code
        own = [row for row in rows if row[1] == "this tree" and row[2][0] not in ("floor", "numpy", "jax")
               and len(row[2]) == 1 or row[2][0] in ("many", "singles")]
        rows = [r for row in rows for r in ([row, (row[0], "base", row[2])] if row in own else [row])]
    if args.only:
        rows = [row for row in rows if any(text in row[0] for text in args.only)]
    def ask(i):
        def task():
            who, cmd = rows[i][1], rows[i][2]
            procs[who].stdin.write(json.dumps(cmd) + "\n")
            procs[who].stdin.flush()
            return json.loads(procs[who].stdout.readline())
        return task

    got = harness.interleave({i: ask(i) for i, row in enumerate(rows) if row[1] in procs}, args.repeats)
    errors = {i: out["error"] for i, outs in got.items() for out in outs if "error" in out}
    times = {i: [out["cpu"] * 1e6 for out in got.get(i, []) if "error" not in out] for i in range(len(rows))}
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    print(f"\n## Per step (µs, process CPU time; median of {args.repeats} interleaved repeats, IQR)\n")
    print("| variant | code | median | IQR |\n| --- | --- | ---: | ---: |")
    med, table = {}, []
    for i, (name, who, _) in enumerate(rows):
        if i in errors or not times[i]:
            print(f"| {name} | {who} | {errors.get(i, 'not run')} | |")
            table.append({"variant": name, "code": who, "error": errors.get(i, "not run")})
            continue
        st = harness.summary(times[i])
        m, q = st["median"], st["iqr"]
        scale = 1e3 if name.endswith("ns") else 1.0
        table.append({"variant": name, "code": who, "unit": "ns" if scale > 1 else "µs per step",
                      **{k: v * scale if isinstance(v, float) else v for k, v in st.items()}})
        med[(name, who)] = m
        print(f"| {name} | {who} | {m * scale:.3f} | {q * scale:.3f} |")
    if not has_jax:
        print("\n(JAX rows skipped: jax is not installed; `pip install jax` to add them.)")

    ratios = {}

    def ratio(text, a, b):
        """One line `text: a / b`, if both rows ran."""
        r = harness.ratio(med.get(a), med.get(b))
        if r is not None:
            ratios[text] = r
            print(f"- {text}: {r:.2f}×")

    print("\n## Ratios against the targets\n")
    ratio("run() 0.1 / this tree (target ≥ 3)", ("whole run()", "0.1"), ("whole run()", "this tree"))
    ratio("JAX whole run / run() (target ≥ 2)", ("whole run, JAX (jit + scan, jax.random)", "this tree"),
          ("whole run()", "this tree"))
    ratio("kernel / floor (target ≤ 1.3)", ("kernel (GD, pre-made data)", "this tree"),
          ("read-only floor", "this tree"))
    ratio("NumPy whole run / run() (target ≥ 2.5)", ("whole run, plain NumPy", "this tree"), ("whole run()", "this tree"))
    for name in ("kernel, heavy ball (same data)", "kernel, Adam (same data)", "kernel, GD recording the first-step loss"):
        ratio(f"{name} / GD kernel", (name, "this tree"), ("kernel (GD, pre-made data)", "this tree"))
    for shape in ("logistic", "least_squares"):
        ratio(f"L={L_MANY} at once / single calls, per lr, {shape} (target ≤ 0.35)",
              (f"L={L_MANY} at once, per lr ({shape})", "this tree"),
              (f"{L_MANY} single kernel calls, per lr ({shape})", "this tree"))
    for name in dict.fromkeys(name for name, _, _ in rows):
        ratio(f"base / this tree, {name}", (name, "base"), (name, "this tree"))
    e = "logistic ℓ'(z) (one exp each), ns"
    rates = [f"{1e6 / med[(e, who)]:.3g} ({who})" for who in ("this tree", "base", "0.1") if (e, who) in med]
    if rates:
        print(f"- logistic derivatives per second: {', '.join(rates)}")

    result = {"T": args.batches, "repeats": args.repeats, "trees": roots, "per_step": table, "ratios": ratios}
    if not (args.quick or args.only):
        result["sweeps"] = sweep_rows(roots, args.sweep_repeats)
        print("\n## Memory: one run of 10⁶ fresh batches, log='auto' (least squares d=10, B=16, K=1)\n")
        print("| code | peak RSS (MB) | RSS before the run (MB) | seconds |\n| --- | ---: | ---: | ---: |")
        for label, root in roots.items():
            # twice: the first process fills Numba's cache (compiling takes ~45 MB of its own)
            for n_batches in ("32", "1000000"):
                res = harness.python(__file__, "--memory", n_batches, root=root)
            if res.status:
                print(f"| {label} | failed: {res.last_line('err')} | | |")
                continue
            m = harness.last_json(res.out)
            result.setdefault("memory", []).append({"code": label, **m})
            print(f"| {label} | {m['peak_mb']:.0f} | {m['base_mb']:.0f} | {m['seconds']:.1f} |")
    return result


if __name__ == "__main__":
    main()
