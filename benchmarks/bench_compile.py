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

Run: ``python benchmarks/bench_compile.py [--base PATH]`` (about 3 min on 2 cores). Not
run by pytest.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(HERE, "configs", "default_sweep_0.1.toml")

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


def seconds(code, args, cache, opt="3", root=ROOT):
    env = dict(os.environ, PYTHONPATH=root, NUMBA_CACHE_DIR=cache, NUMBA_OPT=opt)
    res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=root)
    if res.returncode:
        raise SystemExit(res.stderr)
    return float(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--base", metavar="PATH", help="a checkout from before the method table, timed alongside")
    args = ap.parse_args(argv)
    print("# bench_compile\n")
    print(f"load average at start: {open('/proc/loadavg').read().strip()}; cores: {os.cpu_count()}")
    trees = {"this tree": (ROOT, 0)} | ({"base": (os.path.abspath(args.base), 1)} if args.base else {})
    times = {}
    for _ in range(args.repeats):  # interleaved: every part of every tree in each repeat
        for label, parts in PARTS.items():
            for tree, (root, which) in trees.items():
                if parts[which] is None:
                    continue
                for opt in ("3", "0"):
                    with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
                        times.setdefault((label, tree, opt), []).append(
                            seconds(PART, [parts[which]], cache, opt, root))
        for workers in (1, 2):
            for tree, (root, _) in trees.items():
                with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
                    times.setdefault(("warm_up", tree, workers, "fresh"), []).append(
                        seconds(WARM, [CONFIG, str(workers)], cache, root=root))
                    times.setdefault(("warm_up", tree, workers, "cached"), []).append(
                        seconds(WARM, [CONFIG, str(workers)], cache, root=root))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n## Each part alone, fresh cache (s, wall, median of {args.repeats} interleaved)\n")
    print("| part | code | NUMBA_OPT=3 | NUMBA_OPT=0 |\n| --- | --- | ---: | ---: |")
    for label in PARTS:
        for tree in trees:
            if (label, tree, "3") in med:
                print(f"| {label} | {tree} | {med[(label, tree, '3')]:.2f} | {med[(label, tree, '0')]:.2f} |")
    print(f"\n## The sweep's warm-up for the 0.1 grid (s, wall, median of {args.repeats})\n")
    print("| code | workers | fresh cache | cache filled |\n| --- | ---: | ---: | ---: |")
    for tree in trees:
        for workers in (1, 2):
            print(f"| {tree} | {workers} | {med[('warm_up', tree, workers, 'fresh')]:.2f} | "
                  f"{med[('warm_up', tree, workers, 'cached')]:.2f} |")
    print(f"\nload average at end: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
