"""How many seeds the default sweep needs: its tuned table for several base seeds and
repetition counts, how far apart the tables are, and what each count costs.

For every repetition count n and base seed b, the default sweep (``python -m echosim
sweep``) with ``sweep.repetitions = n`` and ``sweep.seed = b`` is run into one fresh run
store (a count reuses the runs of smaller counts: repetitions 0 … n−1 of a base seed are
the same runs), and every pair of base seeds is compared cell by cell against the
criterion of issue 21: T within max(2 fresh batches, 35%). The CPU time (user + system
of this process and its workers) of the new runs per count is printed next to it, with
the load average: on a shared machine the CPU time, not the wall time, is what to
compare.

    python benchmarks/bench_seeds.py                      # seeds 0-3, n = 3, 5, 10 (minutes)
    python benchmarks/bench_seeds.py --bases 0,1 --reps 10
    python benchmarks/bench_seeds.py --smoke                # 2 base seeds, 1 repetition, a tiny grid
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

SMOKE_GRID = ["optimizer.echo=[1, 2]", "optimizer.lr=[4.0, 8.0, 16.0, 32.0]", "sweep.lr_extend=0"]
"""--smoke's overrides of the default sweep: 2 K x 4 lrs per batch size."""


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def agree(a: float, c: float) -> bool:
    """Issue 21's criterion for one cell: within max(2 fresh batches, 35%) (never = never)."""
    if math.isinf(a) or math.isinf(c):
        return math.isinf(a) and math.isinf(c)
    return abs(a - c) <= max(2.0, 0.35 * min(a, c))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bases", default="0,1,2,3", help="base seeds, comma-separated")
    ap.add_argument("--reps", default="3,5,10", help="repetition counts, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override of the default sweep (repeatable)")
    harness.add_options(ap, smoke="base seeds 0 and 1, 1 repetition, 2 K x 4 lrs, 1 worker")
    args = ap.parse_args(argv)
    if args.smoke:
        args.bases, args.reps, args.workers, args.set = "0,1", "1", 1, SMOKE_GRID + args.set
    from echosim.experiments.config import default_config
    from echosim.experiments.sweep import run_sweep

    bases = [int(b) for b in args.bases.split(",")]
    counts = sorted(int(n) for n in args.reps.split(","))
    tables, cost = {}, {}
    with harness.Session("bench_seeds", args, argv) as session:
        with tempfile.TemporaryDirectory(prefix="bench-seeds-") as tmp:
            for n in counts:
                c0, w0, new = _cpu(), time.perf_counter(), 0
                for b in bases:
                    conf = default_config(overrides=[*args.set, f"sweep.seed={b}", f"sweep.repetitions={n}"])
                    rep = run_sweep(conf, out=os.path.join(tmp, f"b{b}n{n}"), workers=args.workers, progress=False,
                                    store_dir=os.path.join(tmp, "store"))
                    tables[(n, b)] = rep.tuned.set_index(["optimizer.batch_size", "optimizer.echo"])
                    new += rep.n_new
                cost[n] = (_cpu() - c0, time.perf_counter() - w0, new)
        print("| seeds | pairs of base seeds that disagree somewhere | largest B = 4 gap | CPU s per new run | "
              "CPU s of one default sweep at this count |")
        print("| --- | --- | --- | --- | --- |")
        rows = []
        for n in counts:
            pairs = list(itertools.combinations(bases, 2))
            bad, gaps = 0, []
            for a, c in pairs:
                ta, tc = tables[(n, a)], tables[(n, c)]
                bad += any(not agree(ta.loc[k, "conv_batches"], tc.loc[k, "conv_batches"]) for k in ta.index)
                small = [k for k in ta.index if k[0] == min(i[0] for i in ta.index)]
                gaps += [abs(ta.loc[k, "conv_batches"] / tc.loc[k, "conv_batches"] - 1) for k in small
                         if math.isfinite(ta.loc[k, "conv_batches"]) and math.isfinite(tc.loc[k, "conv_batches"])]
            cpu, wall, new = cost[n]
            runs = len(default_config(overrides=[*args.set, f"sweep.repetitions={n}"]).runs)
            per_run = cpu / max(new, 1)
            gap = max(gaps) if gaps else math.nan
            rows.append({"seeds": n, "pairs": len(pairs), "disagree": bad, "largest_small_B_gap": gap,
                         "cpu_s_per_new_run": per_run, "runs": runs, "cpu_s_per_sweep": per_run * runs,
                         "wall_s": wall, "new_runs": new})
            print(f"| {n} | {bad} of {len(pairs)} | {100 * gap:.0f}% | {per_run * 1e3:.1f} ms | "
                  f"{per_run * runs:.0f} s ({runs} runs) |")
        print("\nT per (B, K), one row per (seeds, base seed):")
        for (n, b), t in sorted(tables.items()):
            print(f"  n = {n:2d}, base {b}: " + " ".join(f"{v:g}" for v in t["conv_batches"]))
        session.results = {"bases": bases, "counts": counts, "overrides": args.set, "rows": rows,
                           "T": {f"n{n}-base{b}": list(t["conv_batches"]) for (n, b), t in tables.items()}}


if __name__ == "__main__":
    main()
