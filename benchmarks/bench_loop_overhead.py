"""The CPU that `echoing` itself costs the training loop's thread: per fresh batch under sync and
per step under fixed K, greedy and auto, with ``report(loss)`` every step and no work in the step.

    PYTHONPATH=. python benchmarks/bench_loop_overhead.py               # about 20 s
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --repeats 15 --batches 5000
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --base /tmp/base   # before/after, interleaved
    PYTHONPATH=. python benchmarks/bench_loop_overhead.py --smoke            # 2 repeats of 50 batches

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
import sys
import time

import echosim

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness


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
    """Every policy once, the order rotated by r (A B C D, B C D A, ...)."""
    k = r % len(POLICIES)
    order = list(POLICIES)[k:] + list(POLICIES)[:k]
    return {str(p): per_unit(p, batches) for p in order}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--batches", type=int, default=3000)
    ap.add_argument("--base", help="another checkout's root, timed alongside (interleaved)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # one repeat, as JSON (for --base)
    harness.add_options(ap, smoke="2 repeats of 50 fresh batches")
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one_repeat(args.batches, args.one)))
        return
    if args.smoke:
        args.repeats, args.batches = 2, 50
    trees = {"this tree": None}
    if args.base:
        trees = {"this tree": harness.ROOT, "base": os.path.abspath(args.base)}
    repeat = iter(range(10 ** 9))

    def tree_task(root):
        def task():  # one repeat in a fresh interpreter of that tree
            o = harness.python(__file__, "--one", next(repeat), "--batches", args.batches, root=root,
                               env=harness.env_for(root, threads_one=False)).check("a repeat")
            return harness.last_json(o.out)
        return task

    local = iter(range(10 ** 9))
    with harness.Session("bench_loop_overhead", args, argv) as session:
        if args.base:
            got = harness.interleave({t: tree_task(root) for t, root in trees.items()}, args.repeats)
        else:
            got = {"this tree": [one_repeat(args.batches, next(local)) for _ in range(args.repeats)]}
        stats = {t: {str(p): harness.summary([r[str(p)] for r in got[t]]) for p in POLICIES} for t in trees}
        print(f"{args.repeats} repeats of {args.batches} fresh batches"
              + (", trees interleaved; " + ", ".join(f"{t} = {d}" for t, d in trees.items()) if args.base else "")
              + "\n")
        print("| policy | unit | " + " | ".join(f"{t}: median CPU (µs) | IQR" for t in trees) + " |")
        print("|---|---|" + "---:|---:|" * len(trees))
        for p in POLICIES:
            cells = [f"{1e6 * stats[t][str(p)]['median']:.1f} | {1e6 * stats[t][str(p)]['iqr']:.1f}" for t in trees]
            unit = "fresh batch (= step)" if p == "sync" else "step"
            print(f"| {p} | {unit} | " + " | ".join(cells) + " |")
        session.results = {"repeats": args.repeats, "batches": args.batches, "unit": "seconds of thread CPU",
                           "rows": [{"policy": str(p), "code": t, **stats[t][str(p)]} for t in trees
                                    for p in POLICIES]}


if __name__ == "__main__":
    main()
