"""The CPU that `echoing` itself costs the training loop's thread: per fresh batch under sync and
per step under fixed K, greedy and auto, with ``report(loss)`` every step and no work in the step.

    PYTHONPATH=. python benchmarks/bench_loop_overhead.py               # about 20 s
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --repeats 15 --batches 5000
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --base /tmp/base   # before/after, interleaved

With ``--base PATH`` (another checkout's root), each repeat runs both trees in fresh
interpreters, one after the other in an alternating order, and the table has both.

The loader is an in-memory list (never late: greedy and auto echo only up to their caps
when told; here max_echo = 4). CPU time of the loop's thread (`time.thread_time`), not
wall-clock: the background thread's work and the hand-over waits are not counted.
Medians and IQRs over interleaved repeats (the order rotated each repeat); the load
average at the start and the end is printed: compare runs only when both were quiet.
Targets (issue 28): <= 20 µs per fresh batch under sync, <= 10 µs per step under auto.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import statistics
import sys
import time

import echosim


def per_unit(policy, n: int) -> float:
    """Main-thread CPU per step (per fresh batch under sync, where every step takes one)."""
    it = echosim.echoing(list(range(n)), policy, max_echo=4)
    steps = 0
    t0 = time.thread_time()
    for _ in it:
        it.report(1.0 - steps * 1e-5)
        steps += 1
    return (time.thread_time() - t0) / steps


POLICIES = ("sync", 4, "greedy", "auto")


def one_repeat(batches: int, r: int) -> dict:
    order = list(POLICIES)[r % 4:] + list(POLICIES)[: r % 4]
    return {str(p): per_unit(p, batches) for p in order}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--batches", type=int, default=3000)
    ap.add_argument("--base", help="another checkout's root, timed alongside (interleaved)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one repeat, as JSON (for --base)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one_repeat(args.batches, args.one)))
        return
    load0 = os.getloadavg()[0]
    if args.base:
        trees = {"this tree": os.path.dirname(os.path.dirname(os.path.abspath(echosim.__file__))),
                 "base": os.path.abspath(args.base)}
        res = {t: {str(p): [] for p in POLICIES} for t in trees}
        for r in range(args.repeats):
            names = list(trees) if r % 2 == 0 else list(trees)[::-1]
            for t in names:
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", str(r), "--batches",
                                      str(args.batches)], env=dict(os.environ, PYTHONPATH=trees[t]),
                                     capture_output=True, text=True, check=True).stdout
                for p, v in json.loads(out).items():
                    res[t][p].append(v)
        load1 = os.getloadavg()[0]
        print(f"load average {load0:.1f} at the start, {load1:.1f} at the end; {os.cpu_count()} cores; Python "
              f"{sys.version.split()[0]}; {args.repeats} repeats of {args.batches} fresh batches, trees interleaved; "
              f"{', '.join(f'{t} = {d}' for t, d in trees.items())}\n")
        print("| policy | unit | " + " | ".join(f"{t}: median CPU (µs) | IQR" for t in trees) + " |")
        print("|---|---|" + "---:|---:|" * len(trees))
        for p in POLICIES:
            cells = []
            for t in trees:
                v = res[t][str(p)]
                q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
                cells.append(f"{1e6 * statistics.median(v):.1f} | {1e6 * (q[2] - q[0]):.1f}")
            unit = "fresh batch (= step)" if p == "sync" else "step"
            print(f"| {p} | {unit} | " + " | ".join(cells) + " |")
        return
    per = {p: [] for p in POLICIES}
    for r in range(args.repeats):
        for p, v in one_repeat(args.batches, r).items():
            per[int(p) if p.isdigit() else p].append(v)
    load1 = os.getloadavg()[0]
    print(f"echosim from {os.path.dirname(echosim.__file__)}; load average {load0:.1f} at the start, {load1:.1f} "
          f"at the end; {os.cpu_count()} cores; Python {sys.version.split()[0]}; {args.repeats} repeats of "
          f"{args.batches} fresh batches\n")
    print("| policy | unit | median CPU (µs) | IQR (µs) |\n|---|---|---:|---:|")
    for p, v in per.items():
        q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
        unit = "fresh batch (= step)" if p == "sync" else "step"
        print(f"| {p} | {unit} | {1e6 * statistics.median(v):.1f} | {1e6 * (q[2] - q[0]):.1f} |")


if __name__ == "__main__":
    main()
