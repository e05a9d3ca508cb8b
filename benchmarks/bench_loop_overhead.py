"""The CPU that `echoing` itself costs the training loop's thread: per fresh batch under sync and
per step under fixed K, greedy and auto, with ``report(loss)`` every step and no work in the step.

    PYTHONPATH=. python benchmarks/bench_loop_overhead.py               # about 20 s
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --repeats 15 --batches 5000

The loader is an in-memory list (never late: greedy and auto echo only up to their caps
when told; here max_echo = 4). CPU time of the loop's thread (`time.thread_time`), not
wall-clock: the background thread's work and the hand-over waits are not counted.
Medians and IQRs over interleaved repeats (the order rotated each repeat); the load
average at the start and the end is printed: compare runs only when both were quiet.
Targets (issue 28): <= 20 µs per fresh batch under sync, <= 10 µs per step under auto.
"""

from __future__ import annotations

import argparse
import os
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--batches", type=int, default=3000)
    args = ap.parse_args(argv)
    load0 = os.getloadavg()[0]
    per = {p: [] for p in ("sync", 4, "greedy", "auto")}
    for r in range(args.repeats):
        order = list(per)[r % 4:] + list(per)[: r % 4]
        for p in order:
            per[p].append(per_unit(p, args.batches))
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
