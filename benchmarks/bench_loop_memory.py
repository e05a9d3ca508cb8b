"""How much memory `echoing`'s records take: bytes per step of a real run, and a 10^7-step run.

    PYTHONPATH=. python benchmarks/bench_loop_memory.py                   # about a minute
    PYTHONPATH=. python benchmarks/bench_loop_memory.py --base /tmp/base  # another checkout alongside
    PYTHONPATH=. python benchmarks/bench_loop_memory.py --smoke           # 2,000 steps, 10^4 synthetic

1. A real run: `echoing` over a list of 2·10^5 small ints under K = 2 and auto
   (max_echo 4), ``report(loss)`` every step, no work; the memory allocated during the
   run and still held at its end (`tracemalloc`, the list itself and the imports of a
   warm-up run excluded), per step.
   With ``--base`` the same in the other checkout (a fresh interpreter each).
2. A 10^7-step run built without a loop: the recorder (`echosim.loop.recorder.Recorder`)
   fed 10^7 steps under K = 2 (5·10^6 fresh batches) and under sync (10^7 fresh
   batches) with the default ``keep_steps``; its `nbytes` (the arrays' allocations),
   the bound of its docstring, and the size of the `.npz` file of its records.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness


def real_run(policy, n: int) -> float:
    import echosim

    data = list(range(n))
    warm = echosim.echoing(range(5), policy, max_echo=4)  # imports and first-use caches, before measuring
    for i, _ in enumerate(warm):
        warm.report(1.0 / (1 + i))
    warm.records()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    it = echosim.echoing(data, policy, max_echo=4)
    steps = 0
    for _ in it:
        it.report(1.0 - steps * 1e-6)
        steps += 1
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / steps


def synthetic(T: int, K: int) -> dict:
    from echosim.loop.recorder import KEEP_STEPS, Recorder

    rec = Recorder(KEEP_STEPS, K)
    add, cap, echo = rec.add_batch, rec.cap.append, rec.echo.append
    start, loss, st = rec.step_start.append, rec.loss.append, rec.step_time.append
    t = 0.0
    t0 = time.perf_counter()
    for b in range(T):
        add(0.01, False, 0, 0.0)
        cap(K)
        for _ in range(K):
            start(t)
            loss(1.0)
            st(0.001)
            t += 0.001
        echo(K)
    fed = time.perf_counter() - t0
    nbytes = rec.nbytes()
    r = rec.records("fixed" if K > 1 else "sync", K, 32, None, ())
    with tempfile.TemporaryDirectory() as d:
        size = os.path.getsize(r.save(os.path.join(d, "r.npz")))
    return {"T": T, "steps": T * K, "nbytes": nbytes, "bound": 1.0625 * (33 * T + 36 * KEEP_STEPS) + 4096,
            "file": size, "kept": len(rec.loss), "seconds": fed}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--base", help="another checkout's root, measured alongside (row 1)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    harness.add_options(ap, smoke="2,000 steps, and 10^4 synthetic steps instead of 10^7")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(real_run(int(args.one) if args.one.isdigit() else args.one, args.steps // 2)))
        return
    total = 10 ** 4 if args.smoke else 10 ** 7
    if args.smoke:
        args.steps = 2000
    trees = {"this tree": harness.ROOT, **({"base": os.path.abspath(args.base)} if args.base else {})}
    with harness.Session("bench_loop_memory", args, argv) as session:
        print(f"{', '.join(f'{t} = {d}' for t, d in trees.items())}\n")
        print("| run | " + " | ".join(f"{t}: bytes per step" for t in trees) + " |\n|---|" + "---:|" * len(trees))
        real = {}
        for policy in ("2", "auto"):
            cells = []
            for t, d in trees.items():
                o = harness.python(__file__, "--one", policy, "--steps", args.steps, root=d,
                                   env=harness.env_for(d, threads_one=False)).check(f"policy {policy} in {t}")
                real[(policy, t)] = harness.last_json(o.out)
                cells.append(f"{real[(policy, t)]:.1f}")
            print(f"| echoing over {args.steps // 2} fresh batches, policy {policy} | " + " | ".join(cells) + " |")
        print(f"\n| {total:,} steps, no loop | fresh batches | steps kept | recorder nbytes (MB) | bound (MB) | "
              ".npz file (MB) | feeding time (s) |\n|---|---:|---:|---:|---:|---:|---:|")
        synth = []
        for K in (2, 1):
            s = synthetic(total // K, K)
            synth.append(dict(s, K=K))
            print(f"| {'K = 2' if K == 2 else 'sync'} | {s['T']:,} | {s['kept']:,} | {s['nbytes'] / 1e6:.1f} | "
                  f"{s['bound'] / 1e6:.1f} | {s['file'] / 1e6:.1f} | {s['seconds']:.0f} |")
        session.results = {"steps": args.steps,
                           "bytes_per_step": [{"policy": p, "code": t, "bytes": v} for (p, t), v in real.items()],
                           "synthetic": synth}


if __name__ == "__main__":
    main()
