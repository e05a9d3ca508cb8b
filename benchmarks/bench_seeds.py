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
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import resource
import tempfile
import time


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def agree(a: float, c: float) -> bool:
    """Issue 21's criterion for one cell: within max(2 fresh batches, 35%) (never = never)."""
    if math.isinf(a) or math.isinf(c):
        return math.isinf(a) and math.isinf(c)
    return abs(a - c) <= max(2.0, 0.35 * min(a, c))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bases", default="0,1,2,3", help="base seeds, comma-separated")
    ap.add_argument("--reps", default="3,5,10", help="repetition counts, comma-separated")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from echosim.experiments.config import default_config
    from echosim.experiments.sweep import run_sweep

    bases = [int(b) for b in args.bases.split(",")]
    counts = sorted(int(n) for n in args.reps.split(","))
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} cores\n")
    tables, cost = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench-seeds-") as tmp:
        for n in counts:
            c0, w0, new = _cpu(), time.perf_counter(), 0
            for b in bases:
                conf = default_config(overrides=[f"sweep.seed={b}", f"sweep.repetitions={n}"])
                rep = run_sweep(conf, out=os.path.join(tmp, f"b{b}n{n}"), workers=args.workers, progress=False,
                                store_dir=os.path.join(tmp, "store"))
                tables[(n, b)] = rep.tuned.set_index(["optimizer.batch_size", "optimizer.echo"])
                new += rep.n_new
            cost[n] = (_cpu() - c0, time.perf_counter() - w0, new)
    print("| seeds | pairs of base seeds that disagree somewhere | largest B = 4 gap | CPU s per new run | "
          "CPU s of one default sweep at this count |")
    print("| --- | --- | --- | --- | --- |")
    for n in counts:
        pairs = list(itertools.combinations(bases, 2))
        bad, gaps = 0, []
        for a, c in pairs:
            ta, tc = tables[(n, a)], tables[(n, c)]
            bad += any(not agree(ta.loc[k, "conv_batches"], tc.loc[k, "conv_batches"]) for k in ta.index)
            small = [k for k in ta.index if k[0] == min(i[0] for i in ta.index)]
            gaps += [abs(ta.loc[k, "conv_batches"] / tc.loc[k, "conv_batches"] - 1) for k in small]
        cpu, wall, new = cost[n]
        runs = len(default_config(overrides=[f"sweep.repetitions={n}"]).runs)
        per_run = cpu / max(new, 1)
        print(f"| {n} | {bad} of {len(pairs)} | {100 * max(gaps):.0f}% | {per_run * 1e3:.1f} ms | "
              f"{per_run * runs:.0f} s ({runs} runs) |")
    print("\nT per (B, K), one row per (seeds, base seed):")
    for (n, b), t in sorted(tables.items()):
        print(f"  n = {n:2d}, base {b}: " + " ".join(f"{v:g}" for v in t["conv_batches"]))
    print(f"\nload average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
