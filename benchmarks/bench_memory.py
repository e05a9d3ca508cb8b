"""Peak memory of long pipeline runs (issue 13): a greedy pipeline, from the API and
from a CLI sweep, at T = 10⁶ and 3·10⁶ fresh batches, next to the same run without a
pipeline (the baseline).

Every case runs in its own process and reports that process's peak RSS (``ru_maxrss``
from ``os.wait4``, so cases never mix), after a warm-up process per code tree that
fills the Numba cache (compiling is not what is measured). The run: least squares
d=10, B=16, EchoedGD(0.05), log="auto"; the pipeline: Gamma(4, cv 0.5) loader, one
worker, prefetch 2, Gamma(1, cv 0.2) step times, policy "greedy" (about 4 steps per
fresh batch). The sweep: the same run as a one-run config (``sweep.n_batches = T``,
default ``log_every = "auto"``), ``python -m echosim sweep CFG --workers 1``.

    python benchmarks/bench_memory.py                       # this tree, T = 10⁶ and 3·10⁶
    python benchmarks/bench_memory.py --before /tmp/before  # and a checkout to compare with
    python benchmarks/bench_memory.py --smoke               # T = 2,000 only: checks the script runs

``--before PATH`` runs the same cases with ``PYTHONPATH=PATH`` (e.g. ``git archive
<commit> | tar -x -C /tmp/before``). Prints a Markdown table and the load average at
the start and the end: the machine is shared, but peak memory hardly depends on load.
Not a test: run on demand (CI runs only --smoke).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

ROOT = str(harness.ROOT)
CASES = ("api greedy", "api none", "cli greedy", "cli none")

PIPELINE_TOML = """
[pipeline]
arrival = {kind = "gamma", mean = 4.0, cv = 0.5}
step_time = {kind = "gamma", mean = 1.0, cv = 0.2}
workers = 1
prefetch = 2
policy = "greedy"
"""

CONFIG_TOML = """
[problem]
kind = "least_squares"
dim = 10
{pipeline}
[optimizer]
method = "echoed_gd"
lr = 0.05
batch_size = 16

[sweep]
name = "memory"
seed = 0
repetitions = 1
n_batches = {T}
"""


# --------------------------------------------------------------------------- worker side


def api_run(T: int, pipeline: bool) -> None:
    """One run from Python; prints the RSS before it (imports, warm kernels) and its shape."""
    import resource

    import echosim

    problem, opt = echosim.LeastSquares(dim=10), echosim.EchoedGD(0.05)
    pipe = echosim.Pipeline(echosim.Gamma(mean=4.0, cv=0.5), step_time=echosim.Gamma(mean=1.0, cv=0.2),
                            workers=1, prefetch=2, policy="greedy")
    echosim.run(problem, opt, batch_size=16, echo=echosim.simulate(pipe, 32, seed=0))  # warm, small
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if pipeline:
        schedule = echosim.simulate(pipe, T, seed=0)
        traj = echosim.run(problem, opt, batch_size=16, echo=schedule, log="auto")
    else:
        traj = echosim.run(problem, opt, batch_size=16, echo=1, n_batches=T, log="auto")
    print(json.dumps({"base_mb": base, "steps": int(traj.steps[-1])}))


# --------------------------------------------------------------------------- driver


def peak_of(cmd, env, cwd):
    """Peak RSS (MB) of one child process from its own rusage (``wait4``), its wall
    seconds and its last line of output."""
    o = harness.run_command(cmd, env=env, cwd=cwd).check(" ".join(map(str, cmd)))
    return o.peak_mb, o.seconds, o.last_line()


def case_command(case: str, T: int, tmp: str):
    kind, what = case.split()
    if kind == "api":
        return [sys.executable, os.path.abspath(__file__), "--api", str(T), "--pipeline", what]
    cfg = os.path.join(tmp, f"{what}-{T}.toml")
    with open(cfg, "w", encoding="utf-8") as f:
        f.write(CONFIG_TOML.format(pipeline=PIPELINE_TOML if what == "greedy" else "", T=T))
    out = os.path.join(tmp, f"out-{what}-{T}")
    return [sys.executable, "-m", "echosim", "sweep", cfg, "--out", out, "--store", out + "-store", "--no-plot",
            "--quiet", "--workers", "1"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, nargs="+", default=[1_000_000, 3_000_000], help="values of T")
    p.add_argument("--before", metavar="PATH", help="another checkout to measure the same cases with")
    p.add_argument("--api", type=int, metavar="T", help=argparse.SUPPRESS)
    p.add_argument("--pipeline", choices=["greedy", "none"], help=argparse.SUPPRESS)
    harness.add_options(p, smoke="T = 2,000, the cases api greedy and cli none, no warm-up process")
    args = p.parse_args(argv)
    if args.api:
        return api_run(args.api, args.pipeline == "greedy")
    if args.smoke:
        args.batches = [2000]
    cases = ("api greedy", "cli none") if args.smoke else CASES
    trees = {"this tree": ROOT}
    if args.before:
        trees["before"] = os.path.abspath(args.before)
    with harness.Session("bench_memory", args, argv) as session:
        print("| case | code | T | peak RSS (MB) | RSS before the run (MB) | steps | seconds |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        peaks, rows = {}, []
        with tempfile.TemporaryDirectory(prefix="echosim-mem-") as tmp:
            for label, root in trees.items():
                env = harness.env_for(root, threads_one=False)
                work = tempfile.mkdtemp(dir=tmp)  # fresh sweep outputs and run store per tree
                if not args.smoke:
                    peak_of(case_command("api greedy", 64, work), env, root)  # fills this tree's Numba cache
                for case in cases:
                    for T in args.batches:
                        peak, seconds, last = peak_of(case_command(case, T, work), env, root)
                        info = json.loads(last) if case.startswith("api") else {}
                        base = f"{info['base_mb']:.0f}" if info else ""
                        print(f"| {case} | {label} | {T:,} | {peak:.0f} | {base} | {info.get('steps', '')} "
                              f"| {seconds:.1f} |", flush=True)
                        peaks[(case, label, T)] = peak
                        rows.append({"case": case, "code": label, "T": T, "peak_mb": peak,
                                     "base_mb": info.get("base_mb"), "steps": info.get("steps"), "seconds": seconds})
        growth = []
        if len(args.batches) > 1:
            lo, hi = min(args.batches), max(args.batches)
            print(f"\nGrowth from T = {lo:,} to {hi:,} (bytes per fresh batch):\n")
            for label in trees:
                for case in cases:
                    grow = (peaks[(case, label, hi)] - peaks[(case, label, lo)]) * 2**20 / (hi - lo)
                    growth.append({"case": case, "code": label, "bytes_per_batch": grow})
                    print(f"- {case}, {label}: {grow:.0f}")
        session.results = {"rows": rows, "growth": growth}


if __name__ == "__main__":
    main()
