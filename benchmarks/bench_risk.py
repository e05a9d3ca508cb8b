"""Exact logistic risk (issue 12): its cost per 1,000 logged iterates, this tree against another.

Inputs are the iterates the default sweep logs (``configs/default_sweep_0.1.toml``:
``Logistic(dim=10, design="sphere", radius=0.2, w_star_norm=10)``, EchoedGD, B = 4 for 1,000
batches and B = 2048 for 150, K in {1, 8, 32}, 11 of its 41 learning rates), recorded once
by this tree before any clock starts; every call the runner made is replayed as made
(1,001 or 151 rows). Rows, in µs of process CPU time per 1,000 values:

- sphere_risk     ``logistic_risk.sphere_risk(|w|, w.w*, |w*|, r, d)`` on the recorded rows;
- Logistic.risk   ``problem.risk(W)``: the rows' norms and projections, then sphere_risk.

Each code runs in its own worker process (``PYTHONPATH`` = its root, one thread); a
repeat replays every recorded call once, and repeats alternate between the codes
(median and IQR of ``--repeats``). ``--sweep`` adds the sweep itself, end to end: the
command line of ``python -m echosim sweep configs/default_sweep_0.1.toml --set
sweep.lr_extend=0 --workers 1 --no-plot --quiet`` through ``echosim.cli.main`` in a process
per root (one untimed run each first, so Numba's caches are warm), ``--sweep-repeats``
interleaved runs each: wall clock, process CPU, and the CPU time inside ``runner._finish``
(the excess risks of the logged iterates, plus the rest of each run's summary).

Run: ``python benchmarks/bench_risk.py --old /path/to/checkout [--sweep]``. Not run by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ONE_THREAD = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SWEEP_CONFIG = os.path.join(HERE, "configs", "default_sweep_0.1.toml")
PROBLEM = dict(dim=10, design="sphere", radius=0.2, w_star_norm=10.0)


def env_for(root):
    env = dict(os.environ, PYTHONPATH=root)
    for name in ONE_THREAD:
        env[name] = "1"
    return env


def record(path):
    """Run the sweep's subset and save every W handed to ``problem.risk``."""
    import numpy as np

    import echosim

    problem = echosim.Logistic(**PROBLEM)
    calls = []
    risk = problem.risk
    problem.risk = lambda W: (calls.append(np.array(W)), risk(W))[1]
    lrs = np.geomspace(0.1, 10.0, 41)[::4]
    for B, T in ((4, 1000), (2048, 150)):
        for K in (1, 8, 32):
            echosim.run_many(problem, [echosim.EchoedGD(lr=lr) for lr in lrs], batch_size=B, echo=K, n_batches=T,
                             seed=0, log=np.arange(1, T + 1))
    calls = calls[1:]  # the first is F* at construction
    np.savez(path, *calls)
    print(json.dumps({"calls": len(calls), "rows": sum(len(W) for W in calls)}))


def worker(path):
    """Serve timing requests: one line ``"sphere_risk"`` or ``"risk"`` in, one JSON line out."""
    import numpy as np

    import echosim
    from echosim.training import logistic_risk

    problem = echosim.Logistic(**PROBLEM)
    with np.load(path) as data:
        calls = [data[k] for k in data.files]
    rows = sum(len(W) for W in calls)
    nws = float(np.linalg.norm(problem.w_star))
    pairs = [(np.linalg.norm(W, axis=1), W @ problem.w_star) for W in calls]
    jobs = {
        "sphere_risk": lambda: [logistic_risk.sphere_risk(n, c, nws, problem.radius, problem.dim) for n, c in pairs],
        "risk": lambda: [problem.risk(W) for W in calls],
    }
    for line in sys.stdin:
        job = jobs[json.loads(line)]
        job()  # warm: Numba, tables
        t0, w0 = time.process_time(), time.perf_counter()
        job()
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        print(json.dumps({"cpu": cpu / rows * 1e9, "wall": wall / rows * 1e9}), flush=True)  # µs per 1,000


def options(path, repeats):
    """R_M by the options considered, on the recorded s = r |w| (this tree only)."""
    import math

    import numpy as np
    from numba import njit

    from echosim.training import logistic_risk as lr

    problem_kw = dict(PROBLEM)
    with np.load(path) as data:
        s = np.concatenate([problem_kw["radius"] * np.linalg.norm(data[k], axis=1) for k in data.files])
    rule = lr.quadrature_rule("sphere", problem_kw["dim"])
    table = lr.softplus_table("sphere", problem_kw["dim"])
    weights = rule.weight * rule.dens[0] * (2.0 * rule.density_const * rule.z_max)

    @njit(cache=True)
    def node_loop(s, z, weights, out):  # the rule's dense branch, one exp + log1p per node
        for i in range(s.size):
            acc = 0.0
            for j in range(z.size):
                acc += weights[j] * math.log1p(math.exp(-s[i] * z[j]))
            out[i] = acc

    def numpy_table(s):  # the kept formula, vectorised over (values, points)
        u = s / table.width
        piece = np.minimum(u.astype(np.intp), table.mid.size - 1)
        dx = (2.0 * (u - piece) - 1.0)[:, None] - table.x
        dx[dx == 0.0] = 1e-300
        w = table.lam / dx
        return table.mid[piece] + np.einsum("ij,ij->i", w, table.delta[piece]) / w.sum(axis=1)

    out = np.empty(s.size)
    variants = {
        "rule, NumPy (before)": lambda: lr.tau_sums(s, rule, lr.g_softplus, 0),
        "rule, Numba loop over the 84 nodes (libm exp, log1p)": lambda: node_loop(s, rule.zeta, weights, out),
        "table, NumPy (values x points arrays)": lambda: numpy_table(s),
        "table, Numba (kept: `softplus_remainder`)": lambda: lr.softplus_remainder(s, rule),
    }
    times = {name: [] for name in variants}
    for f in variants.values():
        f()
    for _ in range(repeats):
        for name, f in variants.items():
            t0 = time.process_time()
            f()
            times[name].append((time.process_time() - t0) / s.size * 1e9)
    print(json.dumps({"values": int(s.size), "distinct": int(np.unique(s).size),
                      "times": {k: median_iqr(v) for k, v in times.items()}}))


def sweep_child(out):
    """The sweep through ``echosim.cli.main`` (what ``python -m echosim`` runs), timing
    ``_finish`` (the excess risks of the logged iterates, and the rest of a run's summary)."""
    from echosim.cli import main
    from echosim.training import runner

    spent = [0.0]
    finish = runner._finish

    def timed_finish(*args, **kwargs):
        t0 = time.process_time()
        try:
            return finish(*args, **kwargs)
        finally:
            spent[0] += time.process_time() - t0

    runner._finish = timed_finish
    t0 = time.process_time()
    main(["sweep", SWEEP_CONFIG, "--set", "sweep.lr_extend=0", "--workers", "1", "--no-plot", "--quiet",
          "--out", os.path.join(out, "out"), "--store", os.path.join(out, "store")])
    print(json.dumps({"cpu": time.process_time() - t0, "finish": spent[0]}))


def sweep(root):
    """One sweep from ``root``: wall seconds, and the child's CPU and ``_finish`` seconds."""
    with tempfile.TemporaryDirectory(prefix="echosim-bench-risk-") as tmp:
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--sweep-child", tmp], env=env_for(root),
                             cwd=root, check=True, capture_output=True, text=True)
        wall = time.perf_counter() - t0
    return dict(json.loads(res.stdout.strip().splitlines()[-1]), wall=wall)


def median_iqr(values):
    import numpy as np

    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(np.percentile(v, 75) - np.percentile(v, 25))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", metavar="PATH", help="the checkout to compare with (e.g. main); required")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--sweep", action="store_true", help="also time the sweep end to end")
    p.add_argument("--sweep-repeats", type=int, default=2)
    p.add_argument("--record", help=argparse.SUPPRESS)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--sweep-child", help=argparse.SUPPRESS)
    p.add_argument("--options", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.record:
        return record(args.record)
    if args.worker:
        return worker(args.worker)
    if args.sweep_child:
        return sweep_child(args.sweep_child)
    if args.options:
        return options(args.options, args.repeats)
    if not args.old:
        p.error("--old is required")

    roots = {"old": os.path.abspath(args.old), "this tree": ROOT}
    print("# bench_risk\n")
    print(f"load average at start: {open('/proc/loadavg').read().strip()}; cores: {os.cpu_count()}; "
          f"python {sys.version.split()[0]}; old = {roots['old']}")
    with tempfile.TemporaryDirectory(prefix="echosim-bench-risk-") as tmp:
        inputs = os.path.join(tmp, "calls.npz")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--record", inputs], env=env_for(ROOT),
                             cwd=ROOT, check=True, capture_output=True, text=True)
        print(f"recorded: {out.stdout.strip().splitlines()[-1]}")
        procs = {label: subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", inputs],
                                         env=env_for(root), cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True)
                 for label, root in roots.items()}
        times = {}
        for _ in range(args.repeats):
            for job in ("sphere_risk", "risk"):
                for label, proc in procs.items():
                    proc.stdin.write(json.dumps(job) + "\n")
                    proc.stdin.flush()
                    times.setdefault((job, label), []).append(json.loads(proc.stdout.readline()))
        for proc in procs.values():
            proc.stdin.close()
            proc.wait()
        res = subprocess.run([sys.executable, os.path.abspath(__file__), "--options", inputs, "--repeats",
                              str(args.repeats)], env=env_for(ROOT), cwd=ROOT, check=True, capture_output=True, text=True)
        opts = json.loads(res.stdout.strip().splitlines()[-1])
    print(f"\n## µs per 1,000 values (process CPU; median of {args.repeats} interleaved repeats, IQR; wall median)\n")
    print("| call | old | this tree | old / this tree |\n| --- | ---: | ---: | ---: |")
    for job, name in (("sphere_risk", "sphere_risk"), ("risk", "Logistic.risk")):
        cells, med = [], {}
        for label in roots:
            m, q = median_iqr([t["cpu"] for t in times[(job, label)]])
            wall = median_iqr([t["wall"] for t in times[(job, label)]])[0]
            med[label] = m
            cells.append(f"{m:.0f} ± {q:.0f} (wall {wall:.0f})")
        print(f"| {name} | {cells[0]} | {cells[1]} | {med['old'] / med['this tree']:.1f}× |")

    print(f"\n## R_M alone, options considered (this tree; µs per 1,000 values, process CPU, median of "
          f"{args.repeats}, IQR)\n")
    print(f"{opts['values']} recorded values of s, {opts['distinct']} distinct.\n")
    print("| option | µs | IQR |\n| --- | ---: | ---: |")
    for name, (m, q) in opts["times"].items():
        print(f"| {name} | {m:.0f} | {q:.0f} |")

    if args.sweep:
        for root in roots.values():
            sweep(root)  # warm Numba's cache
        runs = {label: [] for label in roots}
        for _ in range(args.sweep_repeats):
            for label, root in roots.items():
                runs[label].append(sweep(root))
        print(f"\n## The sweep end to end, 1 worker (s; {args.sweep_repeats} interleaved runs each, warm cache)\n")
        print("| code | wall | process CPU | of which `_finish` |\n| --- | --- | --- | --- |")
        for label, vals in runs.items():
            cells = [" / ".join(f"{v[key]:.1f}" for v in vals) for key in ("wall", "cpu", "finish")]
            print(f"| {label} | {' | '.join(cells)} |")
    print(f"\nload average at end: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
