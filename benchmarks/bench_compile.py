"""Numba compile time: what a user waits for on the first run on a machine.

Prints, each measured in its own process with a fresh Numba cache directory
(``NUMBA_CACHE_DIR``), ``--repeats`` interleaved repeats, median (s, wall clock):

- part        ``compile_kernels(kernels=[part])`` for each part ("many": ``run_many``'s
              kernel, "single": ``run``'s, "draws": the synthetic batch draws) and the
              pipeline simulator, alone, at ``NUMBA_OPT=3`` (the default) and ``0`` (no
              LLVM optimisation: what is left is Numba's own typing and lowering);
- warm_up     the sweep's warm-up for the 0.1 default sweep's grid
              (configs/default_sweep_0.1.toml) with 1 and 2 workers (2: a helper
              process compiles the draws and the pipeline alongside), fresh cache, and
              again with the cache it filled (loading only).

Run: ``python benchmarks/bench_compile.py`` (about 3 min on 2 cores). Not run by pytest.
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
    t = time.perf_counter()
    compile_kernels(kernels=[sys.argv[1]])
print(time.perf_counter() - t)
"""

WARM = """
import sys, time
from echosim.experiments.config import load_config
from echosim.experiments.executors import warm_up
config = load_config(sys.argv[1], overrides=["sweep.lr_extend=0"])
print(warm_up(config, int(sys.argv[2])))
"""


def seconds(code, args, cache, opt="3"):
    env = dict(os.environ, PYTHONPATH=ROOT, NUMBA_CACHE_DIR=cache, NUMBA_OPT=opt)
    res = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=ROOT)
    if res.returncode:
        raise SystemExit(res.stderr)
    return float(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    print("# bench_compile\n")
    print(f"load average at start: {open('/proc/loadavg').read().strip()}; cores: {os.cpu_count()}")
    parts = ("many", "single", "draws", "pipeline")
    times = {}
    for _ in range(args.repeats):
        for part in parts:
            for opt in ("3", "0"):
                with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
                    times.setdefault((part, opt), []).append(seconds(PART, [part], cache, opt))
        for workers in (1, 2):
            with tempfile.TemporaryDirectory(prefix="echosim-bench-") as cache:
                times.setdefault(("warm_up", workers, "fresh"), []).append(
                    seconds(WARM, [CONFIG, str(workers)], cache))
                times.setdefault(("warm_up", workers, "cached"), []).append(
                    seconds(WARM, [CONFIG, str(workers)], cache))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n## Each part alone, fresh cache (s, median of {args.repeats})\n")
    print("| part | NUMBA_OPT=3 | NUMBA_OPT=0 |\n| --- | ---: | ---: |")
    for part in parts:
        print(f"| {part} | {med[(part, '3')]:.2f} | {med[(part, '0')]:.2f} |")
    print(f"| sum | {sum(med[(p, '3')] for p in parts):.2f} | {sum(med[(p, '0')] for p in parts):.2f} |")
    print(f"\n## The sweep's warm-up for the 0.1 grid (s, median of {args.repeats})\n")
    print("| workers | fresh cache | cache filled |\n| ---: | ---: | ---: |")
    for workers in (1, 2):
        print(f"| {workers} | {med[('warm_up', workers, 'fresh')]:.2f} | {med[('warm_up', workers, 'cached')]:.2f} |")
    print(f"\nload average at end: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
