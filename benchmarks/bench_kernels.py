"""ns per echo step of the EchoedGD kernel, next to a plain NumPy loop and the memory floor.

Least squares, d=100, B=256, K=8, T=2000 by default, data pre-generated, one core:

- kernel   the optimizer kernel, ``echosim.training.kernel.kernel_for(GD, SQUARED,
           wide=False)`` (what ``run`` uses), over all T batches in one call, one
           iterate, logging once at the end;
- numpy    the same loop in plain NumPy: for each batch, K times
           ``r = X@w − y; g = Xᵀr / B; w −= η g; avg_sum += w`` (BLAS, one thread);
- floor    a @njit read-only pass over each batch's (X, y) K times (a sum of every
           element, vectorised with fastmath reassoc): no optimizer can step faster
           than it can read its batch.

Each variant is timed ``--repeats`` times, interleaved so that drift on this shared
machine hits all alike. The table gives the median and IQR of the thread's CPU time
per step (``time.thread_time_ns``: time spent descheduled by other users' jobs does
not count), and the median wall-clock time beside it. Compile time is measured
separately, on a first call with a tiny slice of the data. For a before/after
comparison with another checkout, use ``benchmarks/bench_runs.py --base PATH --only kernel``.

Run: ``python benchmarks/bench_kernels.py`` (``--help`` for sizes; ``--json PATH`` keeps the
numbers; ``--smoke`` runs tiny sizes with Numba's cache, to check the script runs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

TARGET_FLOOR_RATIO = 1.3
TARGET_NUMPY_SPEEDUP = 3.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=100, help="d, features (default 100)")
    p.add_argument("--batch-size", type=int, default=256, help="B, examples per batch (default 256)")
    p.add_argument("--echo", type=int, default=8, help="K, steps per batch (default 8)")
    p.add_argument("--batches", type=int, default=2000, help="T, fresh batches (default 2000)")
    p.add_argument("--lr", type=float, default=0.1, help="η (default 0.1; must not diverge)")
    p.add_argument("--repeats", type=int, default=9, help="timings per variant, >= 7 (default 9)")
    p.add_argument("--dtypes", nargs="+", default=["float64", "float32"], choices=["float64", "float32"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--numba-cache", action="store_true",
                   help="use Numba's on-disk cache (default: a fresh temporary cache, so the "
                        "compile time reported is a real compile)")
    p.add_argument("--pin", type=int, metavar="CPU", default=None, help="pin the process to this CPU")
    harness.add_options(p, smoke="d=4, B=8, K=2, T=20, 3 repeats, float64, Numba's cache: checks the script runs")
    args = p.parse_args(argv)
    if args.smoke:
        args.dim, args.batch_size, args.echo, args.batches, args.repeats = 4, 8, 2, 20, 3
        args.dtypes, args.numba_cache = ["float64"], True
    for name in ("dim", "batch_size", "echo", "batches"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.repeats < 7 and not args.smoke:
        p.error("--repeats must be >= 7")
    if args.pin is not None and args.pin not in os.sched_getaffinity(0):
        p.error(f"--pin must be one of the CPUs {sorted(os.sched_getaffinity(0))}")
    return args


def one_core_environment(args):
    """Single-threaded BLAS and Numba; set before numpy/numba are imported."""
    for name in harness.ONE_THREAD:
        os.environ[name] = "1"
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    if not args.numba_cache:
        cache_dir = tempfile.mkdtemp(prefix="echosim-bench-numba-")
        os.environ["NUMBA_CACHE_DIR"] = cache_dir
        return cache_dir
    return None


# --------------------------------------------------------------------------- machine


def openblas_info(np):
    """(config, core name, threads) of NumPy's OpenBLAS, via threadpoolctl or ctypes."""
    try:
        from threadpoolctl import threadpool_info

        libs = [lib for lib in threadpool_info() if lib.get("internal_api") == "openblas"]
        libs.sort(key=lambda lib: "numpy" not in lib.get("filepath", ""))  # NumPy's own first
        if libs:
            return libs[0].get("version"), libs[0].get("architecture"), libs[0].get("num_threads")
    except ImportError:
        pass
    import ctypes
    import glob

    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*"))
    for path in libs:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""), ("openblas_", "")):
            try:
                get_config = getattr(lib, f"{prefix}get_config{suffix}")
                get_core = getattr(lib, f"{prefix}get_corename{suffix}")
                get_threads = getattr(lib, f"{prefix}get_num_threads{suffix}")
            except AttributeError:
                continue
            get_config.restype = get_core.restype = ctypes.c_char_p
            return get_config().decode(), get_core().decode(), get_threads()
    return "?", "?", "?"


def machine_report(np, args):
    blas_config, blas_core, blas_threads = openblas_info(np)
    return [
        f"- process on CPUs {sorted(os.sched_getaffinity(0))}",
        (f"- OpenBLAS: {blas_config}; core {blas_core}; threads {blas_threads}; "
         f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
         f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE', '(unset)')} (left as found)"),
        "- " + ", ".join(f"{n}={os.environ[n]}" for n in harness.ONE_THREAD),
        (f"- least squares d={args.dim}, B={args.batch_size}, K={args.echo}, T={args.batches}, "
         f"η={args.lr}, seed={args.seed}; {args.repeats} repeats per variant"),
    ]


# --------------------------------------------------------------------------- variants


def make_floor(njit):
    @njit(fastmath={"reassoc", "nsz"})
    def read_floor(X, Y, K, zero):
        """Sum every element of batch t, K times per batch; zero sets the accumulator's dtype."""
        total = 0.0
        for t in range(X.shape[0]):
            xt = X[t]
            yt = Y[t]
            for _ in range(K):
                s = zero
                for i in range(xt.shape[0]):
                    s += xt[i]
                for i in range(yt.shape[0]):
                    s += yt[i]
                total += s
        return total

    return read_floor


def numpy_loop(X, Y, K, lr, w, avg_sum, end_sum):
    """The obvious NumPy echoed-GD loop, keeping the same running sums as the kernel."""
    B = X.shape[1]
    for t in range(X.shape[0]):
        Xt, yt = X[t], Y[t]
        for _ in range(K):
            r = Xt @ w - yt
            g = Xt.T @ r / B
            w -= lr * g
            avg_sum += w
        end_sum += w
    return w


class Variants:
    """The three timed callables for one dtype, sharing the pre-generated data."""

    def __init__(self, np, echo_chunk, read_floor, X, Y, K, lr):
        self.np, self.echo_chunk, self.read_floor = np, echo_chunk, read_floor
        self.X, self.Y, self.K, self.lr = X, Y, K, lr
        self.X_flat = X.reshape(X.shape[0], -1)
        self.zero = X.dtype.type(0)

    def kernel(self, n=None):
        np, X, Y = self.np, self.X[:n], self.Y[:n]
        T, _, d = X.shape
        W = np.zeros((1, d), dtype=X.dtype)
        avg_sum, end_sum, counters = np.zeros((1, d)), np.zeros((1, d)), np.zeros(2, dtype=np.int64)
        diverged, log_at = np.full(1, -1, dtype=np.int64), np.array([T - 1], dtype=np.int64)
        log_w, log_avg, log_end = np.empty((1, 1, d), dtype=X.dtype), np.empty((1, 1, d)), np.empty((1, 1, d))
        alive = self.echo_chunk(
            X, Y, np.full(T, self.K, dtype=np.int64), np.full((T, 1), self.lr), np.zeros((0, 0), dtype=np.int64),
            np.zeros(0), 0.0, W, np.zeros((0, 1, d), dtype=X.dtype), avg_sum, end_sum, counters, diverged,
            log_at, False, log_w, log_avg, log_end, np.zeros((0, 1)))
        if alive != 1:
            raise RuntimeError(f"the kernel diverged at batch {diverged[0]}: lower --lr")
        return log_w[0, 0]

    def numpy(self, n=None):
        np, X = self.np, self.X[:n]
        d = X.shape[2]
        return numpy_loop(X, self.Y[:n], self.K, self.lr, np.zeros(d, dtype=X.dtype), np.zeros(d), np.zeros(d))

    def floor(self, n=None):
        return self.read_floor(self.X_flat[:n], self.Y[:n], self.K, self.zero)


def load_kernel():
    """The kernel `run` uses for echoed GD on least squares (one iterate, full batches)."""
    from echosim.training import losses, methods
    from echosim.training.kernel import kernel_for

    return kernel_for(methods.GD, losses.SQUARED, False), "echosim.training.kernel.kernel_for(GD, SQUARED, wide=False)"


def time_variants(v, names, repeats, steps):
    """CPU (this thread's) and wall ns per step of each variant, `repeats` times, interleaved."""
    def task(fn):
        def timed():
            t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
            fn()
            c1, t1 = time.thread_time_ns(), time.perf_counter_ns()
            return {"cpu": (c1 - c0) / steps, "wall": (t1 - t0) / steps}
        return timed

    got = harness.interleave({name: task(getattr(v, name)) for name in names}, repeats)
    return ({name: [x["cpu"] for x in got[name]] for name in names},
            {name: [x["wall"] for x in got[name]] for name in names})


def main(argv=None):
    args = parse_args(argv)
    cache_dir = one_core_environment(args)
    try:
        with harness.Session("bench_kernels", args, argv) as session:
            session.results = bench(args)
        return 0
    finally:
        if cache_dir is not None:
            shutil.rmtree(cache_dir, ignore_errors=True)


def bench(args):
    import numpy as np
    from numba import njit

    from echosim import LeastSquares

    echo_chunk, kernel_source = load_kernel()
    read_floor = make_floor(njit)
    problem = LeastSquares(args.dim)
    steps = args.batches * args.echo
    names = ("kernel", "numpy", "floor")
    labels = {"kernel": "kernel (Numba)", "numpy": "NumPy loop", "floor": "read floor"}
    rows, compile_lines, checks = [], [], []
    for dtype in args.dtypes:
        t0 = time.perf_counter()
        X, Y = problem.batches(args.seed, 0, args.batches, args.batch_size, np.dtype(dtype))
        gen_s = time.perf_counter() - t0
        v = Variants(np, echo_chunk, read_floor, X, Y, args.echo, args.lr)

        # First calls on one batch: compile (or cache load) + a negligible run.
        first = {}
        hits_before = sum(echo_chunk.stats.cache_hits.values())
        for name in ("kernel", "floor"):
            t0 = time.perf_counter()
            getattr(v, name)(1)
            first[name] = time.perf_counter() - t0
        how = "Numba cache load" if sum(echo_chunk.stats.cache_hits.values()) > hits_before else "compile"
        compile_lines.append(f"- {dtype}: first call of the kernel ({how}) {first['kernel']:.2f} s, "
                             f"of the floor (compile) {first['floor']:.2f} s; data generation "
                             f"{gen_s:.1f} s ({X.nbytes / 2**20:.0f} MiB)")

        # Same answer from both optimizers (a benchmark of a wrong loop is worthless).
        n_check = min(args.batches, 16)
        w_k, w_n = v.kernel(n_check), v.numpy(n_check)
        scale = np.max(np.abs(w_n))
        rtol = 1e-10 if dtype == "float64" else 1e-3
        checks.append(f"{dtype}: max |w_kernel − w_numpy| / max |w| = "
                      f"{np.max(np.abs(w_k - w_n)) / scale:.1e} after {n_check} batches")
        np.testing.assert_allclose(w_k, w_n, rtol=rtol, atol=rtol * scale)

        cpu, wall = time_variants(v, names, args.repeats, steps)
        stats = {name: harness.summary(cpu[name]) for name in names}
        med = {name: stats[name]["median"] for name in names}
        for name in names:
            rows.append((labels[name], dtype, med[name], stats[name]["q25"], stats[name]["q75"],
                         harness.median(wall[name]), harness.ratio(stats[name], stats["floor"]),
                         harness.ratio(stats["numpy"], stats[name]) if name == "kernel" else None))
        to_floor, speedup = med["kernel"] / med["floor"], med["numpy"] / med["kernel"]
        checks.append(f"{dtype}: kernel/floor {to_floor:.2f} (target <= {TARGET_FLOOR_RATIO}): "
                      f"{'met' if to_floor <= TARGET_FLOOR_RATIO else 'MISSED'}; "
                      f"NumPy/kernel {speedup:.2f} (target >= {TARGET_NUMPY_SPEEDUP}): "
                      f"{'met' if speedup >= TARGET_NUMPY_SPEEDUP else 'MISSED'}")
        del v, X, Y

    print("## Echoed-GD kernel: ns per echo step\n")
    print("\n".join(machine_report(np, args)))
    print(f"- kernel: {kernel_source}")
    print()
    print("| variant | dtype | ns/step (median CPU) | IQR | wall median | ratio to floor | NumPy/kernel |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, dtype, m, q25, q75, w, ratio, speedup in rows:
        sp = "" if speedup is None else f"{speedup:.2f}"
        print(f"| {label} | {dtype} | {m:,.0f} | {q25:,.0f}–{q75:,.0f} | {w:,.0f} | {ratio:.2f} | {sp} |")
    numbers = args.batch_size * (args.dim + 1)
    print(f"\nOne step reads B·(d+1) = {numbers:,} numbers "
          f"({numbers * 8 / 1024:.0f} KiB float64, {numbers * 4 / 1024:.0f} KiB float32).")
    print("\nCompile time (excluded from the table):")
    print("\n".join(compile_lines))
    print("\nChecks:")
    print("\n".join(f"- {c}" for c in checks))
    keys = ("variant", "dtype", "ns_per_step_cpu_median", "q25", "q75", "ns_per_step_wall_median", "to_floor",
            "numpy_over_kernel")
    return {"kernel": kernel_source, "rows": [dict(zip(keys, row)) for row in rows], "compile": compile_lines,
            "checks": checks}


if __name__ == "__main__":
    sys.exit(main())
