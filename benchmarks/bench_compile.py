"""Numba compile time: what a user waits for on the first run on a machine.

Prints, each measured in its own process with a fresh Numba cache directory
(``NUMBA_CACHE_DIR``), ``--repeats`` interleaved repeats, median (s, wall clock):

- part        ``compile_kernels(kernels=[part])`` for each part, alone: the kernel the
              default sweep's runs use (``run_many``'s, "echoed_gd:logistic:wide"), the
              one ``run`` uses for that problem ("echoed_gd:logistic:rows"), a second
              method's kernel compiled after the first in the same process (what one
              more method costs), the synthetic batch draws ("draws") and the pipeline
              simulator, at ``NUMBA_OPT=3`` (the default) and ``0`` (no LLVM
              optimisation: what is left is Numba's own typing and lowering). With
              ``--base PATH`` the same parts of another checkout from before the method
              table ("many" and "single": its two kernels with every method) run too;
- warm_up     the sweep's warm-up for the 0.1 default sweep's grid
              (configs/default_sweep_0.1.toml) with 1 and 2 workers (2: a helper
              process compiles the draws and the pipeline alongside), fresh cache, and
              again with the cache it filled (loading only).

Run: ``python benchmarks/bench_compile.py [--base PATH] [--json PATH]`` (about 3 min on 2
cores); ``--smoke`` times the pipeline part alone at ``NUMBA_OPT=0``, once, without the
warm-up (what the smoke test runs).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

CONFIG = harness.CONFIGS / "default_sweep_0.1.toml"

PART = """
import sys, time
t = time.perf_counter()
if sys.argv[1] == "pipeline":
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate
    t = time.perf_counter()
    simulate(Pipeline(1.0, policy="fixed", echo=1.0), n_batches=2, seed=0)
else:
    from echosim.training.runner import compile_kernels
    first, *then = sys.argv[1].split("+")  # "a+b": time b, compiled after a in the same process
    if then:
        compile_kernels(kernels=[first])
    t = time.perf_counter()
    compile_kernels(kernels=then or [first])
print(time.perf_counter() - t)
"""
PARTS = {  # label: (this tree's part, a tree before the method table's part)
    "run_many's kernel, default sweep": ("echoed_gd:logistic:wide", "many"),
    "run's kernel, same problem": ("echoed_gd:logistic:rows", "single"),
    "a second method's kernel (Adam, after GD)": ("echoed_gd:logistic:wide+echoed_adam:logistic:wide", None),
    "draws": ("draws", "draws"),
    "pipeline": ("pipeline", "pipeline"),
}

WARM = """
import sys, time
from echosim.experiments.config import load_config
from echosim.experiments.executors import warm_up
config = load_config(sys.argv[1], overrides=["sweep.lr_extend=0"])
print(warm_up(config, int(sys.argv[2])))
"""


def seconds(code, args, cache, opt="3", root=harness.ROOT):
    """The last line a child printed (seconds), run with a Numba cache of its own and NUMBA_OPT=opt."""
    env = harness.env_for(root, numba_cache=cache, threads_one=False, NUMBA_OPT=opt)
    o = harness.python(code, *args, root=root, env=env).check(f"compiling {args[0]}")
    return float(o.last_line())


def part_task(part, root, opt):
    def task():
        with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
            return seconds(PART, [part], cache, opt, root)
    return task


def warm_task(root, workers):
    def task():
        with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
            return {"fresh": seconds(WARM, [CONFIG, str(workers)], cache, root=root),
                    "cached": seconds(WARM, [CONFIG, str(workers)], cache, root=root)}
    return task


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--base", metavar="PATH", help="a checkout from before the method table, timed alongside")
    harness.add_options(ap, smoke="the pipeline part at NUMBA_OPT=0 only, once, no warm-up")
    args = ap.parse_args(argv)
    trees = {"this tree": (harness.ROOT, 0)} | ({"base": (os.path.abspath(args.base), 1)} if args.base else {})
    parts = {"pipeline": PARTS["pipeline"]} if args.smoke else PARTS
    opts = ("0",) if args.smoke else ("3", "0")
    repeats = 1 if args.smoke else args.repeats
    tasks = {}  # every part of every tree, interleaved
    for label, both in parts.items():
        for tree, (root, which) in trees.items():
            if both[which] is not None:
                for opt in opts:
                    tasks[(label, tree, opt)] = part_task(both[which], root, opt)
    if not args.smoke:
        for workers in (1, 2):
            for tree, (root, _) in trees.items():
                tasks[("warm_up", tree, workers)] = warm_task(root, workers)
    with harness.Session("bench_compile", args, argv) as session:
        times = harness.interleave(tasks, repeats)
        stats = {}
        for key, vals in times.items():
            if key[0] == "warm_up":
                for cache in ("fresh", "cached"):
                    stats[(*key, cache)] = harness.summary([v[cache] for v in vals])
            else:
                stats[key] = harness.summary(vals)
        med = {k: s["median"] for k, s in stats.items()}
        print(f"## Each part alone, fresh cache (s, wall, median of {repeats} interleaved; IQR)\n")
        print("| part | code | " + " | ".join(f"NUMBA_OPT={o}" for o in opts) + " |\n| --- | --- |"
              + " ---: |" * len(opts))
        for label in parts:
            for tree in trees:
                if (label, tree, opts[0]) in med:
                    cells = [harness.spread(stats[(label, tree, o)], digits=2) for o in opts]
                    print(f"| {label} | {tree} | {' | '.join(cells)} |")
        if not args.smoke:
            print(f"\n## The sweep's warm-up for the 0.1 grid (s, wall, median of {repeats})\n")
            print("| code | workers | fresh cache | cache filled |\n| --- | ---: | ---: | ---: |")
            for tree in trees:
                for workers in (1, 2):
                    print(f"| {tree} | {workers} | {med[('warm_up', tree, workers, 'fresh')]:.2f} | "
                          f"{med[('warm_up', tree, workers, 'cached')]:.2f} |")
        session.results = {"repeats": repeats, "trees": {t: str(r) for t, (r, _) in trees.items()},
                           "rows": [{"what": k[0], "code": k[1], "setting": k[2], **({"cache": k[3]} if len(k) > 3
                                                                                     else {}), **s}
                                    for k, s in stats.items()]}


if __name__ == "__main__":
    main()
