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
interleaved runs each: wall clock, process CPU, and the CPU time inside ``Logistic.risk``
(the exact risks of the logged iterates; timed through the public class, which every
run's problem is an instance of).

Run: ``python benchmarks/bench_risk.py --old /path/to/checkout [--sweep] [--json PATH]``;
without ``--old`` this tree alone. ``--smoke``: a few recorded calls, 2 repeats, and with
``--sweep`` a two-run grid (one lr, K = 1, one repetition).
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
PROBLEM = {"dim": 10, "design": "sphere", "radius": 0.2, "w_star_norm": 10.0}
SMOKE_SWEEP = ["sweep.repetitions=1", "optimizer.echo=[1]", "optimizer.lr=[1.0]"]
"""--smoke's overrides of the sweep: two runs (the two joint (B, T) of the grid)."""


def record(path, smoke=False):
    """Run the sweep's subset and save every W handed to ``problem.risk``."""
    import numpy as np

    import echosim

    problem = echosim.Logistic(**PROBLEM)
    calls = []
    risk = problem.risk
    problem.risk = lambda W: (calls.append(np.array(W)), risk(W))[1]
    lrs = np.geomspace(0.1, 10.0, 41)[::4]
    for B, T in ((4, 20), (2048, 5)) if smoke else ((4, 1000), (2048, 150)):
        for K in (1, 8) if smoke else (1, 8, 32):
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


def sweep_child(out, smoke=False):
    """The sweep through ``echosim.cli.main`` (what ``python -m echosim`` runs), timing the
    exact risks of the logged iterates: every call of ``Logistic.risk``, patched on the class."""
    import echosim
    from echosim.cli import main

    spent = [0.0]
    risk = echosim.Logistic.risk

    def timed_risk(self, W):
        t0 = time.process_time()
        try:
            return risk(self, W)
        finally:
            spent[0] += time.process_time() - t0

    echosim.Logistic.risk = timed_risk
    sets = [a for o in ["sweep.lr_extend=0", *(SMOKE_SWEEP if smoke else [])] for a in ("--set", o)]
    t0 = time.process_time()
    main(["sweep", SWEEP_CONFIG, *sets, "--workers", "1", "--no-plot", "--quiet",
          "--out", os.path.join(out, "out"), "--store", os.path.join(out, "store")])
    print(json.dumps({"cpu": time.process_time() - t0, "risk": spent[0]}))


def sweep(root, smoke=False):
    """One sweep from ``root``: wall seconds, and the child's CPU and ``Logistic.risk`` seconds."""
    with tempfile.TemporaryDirectory(prefix="echosim-bench-risk-") as tmp:
        o = harness.python(__file__, "--sweep-child", tmp, *(["--smoke"] if smoke else []), root=root)
        o.check(f"the sweep in {root}")
    return dict(harness.last_json(o.out), wall=o.seconds)


def median_iqr(values):
    st = harness.summary(values)
    return st["median"], st["iqr"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--old", metavar="PATH", help="the checkout to compare with (e.g. main); default: this tree alone")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--sweep", action="store_true", help="also time the sweep end to end")
    p.add_argument("--sweep-repeats", type=int, default=2)
    p.add_argument("--record", help=argparse.SUPPRESS)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--sweep-child", help=argparse.SUPPRESS)
    p.add_argument("--options", help=argparse.SUPPRESS)
    harness.add_options(p, smoke="a few recorded calls, 2 repeats; --sweep: a two-run grid, once")
    args = p.parse_args(argv)
    if args.record:
        return record(args.record, args.smoke)
    if args.worker:
        return worker(args.worker)
    if args.sweep_child:
        return sweep_child(args.sweep_child, args.smoke)
    if args.options:
        return options(args.options, args.repeats)
    if args.smoke:
        args.repeats, args.sweep_repeats = 2, 1

    roots = ({"old": os.path.abspath(args.old)} if args.old else {}) | {"this tree": ROOT}
    me = os.path.abspath(__file__)
    with harness.Session("bench_risk", args, argv) as session:
        print(f"trees: {', '.join(f'{k} = {v}' for k, v in roots.items())}")
        with tempfile.TemporaryDirectory(prefix="echosim-bench-risk-") as tmp:
            inputs = os.path.join(tmp, "calls.npz")
            o = harness.python(me, "--record", inputs, *(["--smoke"] if args.smoke else [])).check("recording")
            recorded = harness.last_json(o.out)
            print(f"recorded: {recorded}")
            procs = {label: subprocess.Popen([sys.executable, me, "--worker", inputs], env=harness.env_for(root),
                                             cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                     for label, root in roots.items()}

            def ask(proc, job):
                def task():
                    proc.stdin.write(json.dumps(job) + "\n")
                    proc.stdin.flush()
                    return json.loads(proc.stdout.readline())
                return task

            times = harness.interleave({(job, label): ask(proc, job) for job in ("sphere_risk", "risk")
                                        for label, proc in procs.items()}, args.repeats)
            for proc in procs.values():
                proc.stdin.close()
                proc.wait()
            o = harness.python(me, "--options", inputs, "--repeats", args.repeats).check("the options")
            opts = harness.last_json(o.out)
        print(f"\n## µs per 1,000 values (process CPU; median of {args.repeats} interleaved repeats, IQR; "
              "wall median)\n")
        labels = list(roots)
        print("| call | " + " | ".join(labels) + (" | old / this tree |" if args.old else " |"))
        print("| --- |" + " ---: |" * (len(labels) + bool(args.old)))
        rows = []
        for job, name in (("sphere_risk", "sphere_risk"), ("risk", "Logistic.risk")):
            cells, med = [], {}
            for label in roots:
                cpu = harness.summary([t["cpu"] for t in times[(job, label)]])
                wall = harness.summary([t["wall"] for t in times[(job, label)]])
                med[label] = cpu
                rows.append({"call": name, "code": label, "cpu": cpu, "wall": wall})
                cells.append(f"{cpu['median']:.0f} ± {cpu['iqr']:.0f} (wall {wall['median']:.0f})")
            r = harness.ratio(med["old"], med["this tree"]) if args.old else None
            print(f"| {name} | {' | '.join(cells)} |" + (f" {r:.1f}× |" if r is not None else ""))

        print(f"\n## R_M alone, options considered (this tree; µs per 1,000 values, process CPU, median of "
              f"{args.repeats}, IQR)\n")
        print(f"{opts['values']} recorded values of s, {opts['distinct']} distinct.\n")
        print("| option | µs | IQR |\n| --- | ---: | ---: |")
        for name, (m, q) in opts["times"].items():
            print(f"| {name} | {m:.0f} | {q:.0f} |")

        runs = {}
        if args.sweep:
            if not args.smoke:
                for root in roots.values():
                    sweep(root)  # warm Numba's cache
            runs = harness.interleave({label: (lambda root=root: sweep(root, args.smoke))
                                       for label, root in roots.items()}, args.sweep_repeats)
            print(f"\n## The sweep end to end, 1 worker (s; {args.sweep_repeats} interleaved runs each, "
                  "warm cache)\n")
            print("| code | wall | process CPU | of which `Logistic.risk` |\n| --- | --- | --- | --- |")
            for label, vals in runs.items():
                cells = [" / ".join(f"{v[key]:.1f}" for v in vals) for key in ("wall", "cpu", "risk")]
                print(f"| {label} | {' | '.join(cells)} |")
        session.results = {"trees": roots, "recorded": recorded, "per_1000_values_us": rows, "options": opts,
                           "sweep": runs}


if __name__ == "__main__":
    main()
