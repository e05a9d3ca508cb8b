"""Size limits of a sweep: the number of runs, and the memory and work each run implies,
checked while the config is validated, before anything is allocated or run.

A config that cannot fit is refused with a `ConfigError` naming the key and the limit:

- at most `MAX_RUNS` runs per sweep (grid points × repetitions), and at most
  `MAX_GRID_VALUES` values in one learning-rate grid;
- a run's arrays (its schedule, per-batch learning rates and step counts, log points,
  a chunk of batch data) must fit in the machine's memory
  (`echosim.pipeline.sizes.memory_limit`);
- a run may take at most `MAX_RUN_WORK` units of work, a unit being one multiply-add of
  a gradient (B·d per step) or the fixed cost of one step, one event or one batch
  (taken as 64 units): about a day at 10^10 units per second, far beyond what this
  machine does (see `python -m echosim sweep --dry-run` for the estimate of a sweep).
"""

from __future__ import annotations

import math

from echosim.experiments.schema import MAX_GRID_VALUES, ConfigError
from echosim.pipeline.sizes import format_bytes, memory_limit

__all__ = ["MAX_RUNS", "MAX_GRID_VALUES", "MAX_RUN_WORK", "check_run_count", "check_run_size", "run_footprint"]

MAX_RUNS = 100_000
"""Runs per sweep (expanding a config costs about 0.1 ms per run)."""
MAX_RUN_WORK = 1e15
"""Units of work per run (multiply-adds, plus 64 per step, event and batch)."""

_STEP_OVERHEAD = 64.0
_MEMO_BYTES = 256 << 20  # a worker's batch memo (Problem.memoize_batches)
_CHUNK_BYTES = 8 << 20  # batch data per kernel call (runner.CHUNK_BYTES)
_BLOCK = 16  # fresh batches per generator block (problems.BATCHES_PER_BLOCK)


def check_run_count(n_points: int, repetitions: int, axes) -> None:
    """Refuse a sweep of more than `MAX_RUNS` runs before expanding it.

    `axes` are (label, number of values) pairs, to name the biggest one.
    """
    n = n_points * repetitions
    if n <= MAX_RUNS:
        return
    if repetitions >= n_points:
        raise ConfigError(f"sweep.repetitions: {repetitions:,} repetitions of {n_points:,} grid point(s) give "
                          f"{n:,} runs, more than the limit of {MAX_RUNS:,} runs per sweep")
    label, size = max(axes, key=lambda a: a[1])
    raise ConfigError(f"{label}: {size:,} values in a grid of {n_points:,} points × {repetitions} repetition(s) "
                      f"give {n:,} runs, more than the limit of {MAX_RUNS:,} runs per sweep")


def run_footprint(T: float, K: float, B: int, b_step: int, d: int, n_features: int, itemsize: int,
                  n_logs: float, schedule_per_batch: float, workers: int) -> dict:
    """Memory terms (bytes) and work (units) of one run; see the module docstring."""
    chunk = max(_CHUNK_BYTES, _BLOCK * B * (n_features + 1) * itemsize)
    memory = {
        "batches": T * (40.0 + schedule_per_batch),
        "logs": n_logs * (8.0 + d * (16.0 + itemsize)),
        "data": 2.0 * chunk + min(_MEMO_BYTES, T * B * (n_features + 1) * itemsize),
        "dim": 64.0 * d,
        "workers": 24.0 * workers,
    }
    steps = T * K
    work = steps * (b_step * d + _STEP_OVERHEAD) + T * _STEP_OVERHEAD
    return {"memory": memory, "work": work, "steps": steps}


def check_run_size(base: dict, lab) -> None:
    """Refuse one resolved grid point (config._resolve's dict) that cannot fit; `lab` maps key paths to labels."""
    from echosim.experiments.specs import build_pipeline
    from echosim.pipeline.schedule import mean_batch_time, schedule_bytes_per_batch
    from echosim.pipeline.stream import _estimate_echo

    problem = base["problem_obj"]
    opt, run, pipe_dict = base["optimizer"], base["run"], base["pipeline"]
    B = opt["batch_size"]
    b_step = opt.get("sub_batch", B) if opt["method"] == "echoed_sgd" else B
    itemsize = 4 if run.get("dtype") == "float32" else 8
    pipeline = None if pipe_dict is None else build_pipeline(pipe_dict, base["echo"])
    if "n_batches" in run:
        T, t_key, t_value = float(run["n_batches"]), "sweep.n_batches", run["n_batches"]
    else:
        T = 1.25 * run["time_budget"] / mean_batch_time(pipeline) + 16
        t_key, t_value = "sweep.time_budget", run["time_budget"]
    if pipeline is None:
        K, k_key, per_batch, workers = float(base["echo"] or 1), "optimizer.echo", 8.0, 0
    else:
        if pipeline.policy == "greedy":
            K, k_key = _estimate_echo(pipeline), "pipeline.max_echo"
        else:
            K, k_key = float(pipeline.echo or 1), "optimizer.echo"
        per_batch = schedule_bytes_per_batch(pipeline, B if pipeline.policy == "example" else None)
        if "time_budget" in run:
            per_batch *= 2  # the simulation may double its batches to pass the budget
        workers = pipeline.workers
    every = run.get("log_every", "auto")
    n_logs = 2000.0 if every == "auto" else T / every
    f = run_footprint(T, K, B, b_step, problem.dim, problem.n_features, itemsize, n_logs, per_batch, workers)
    memory = f["memory"]
    total = sum(memory.values())
    limit = memory_limit()
    if total > limit:
        term = max(memory, key=memory.get)
        key, value = {
            "batches": (t_key, t_value),
            "logs": ("sweep.log_every", every),
            "data": ("optimizer.batch_size", B),
            "dim": ("problem.dim", problem.dim),
            "workers": ("pipeline.workers", workers),
        }[term]
        if term == "logs" and total - memory["logs"] > limit:
            term, key, value = "batches", t_key, t_value  # too many batches, logged or not
        if term == "batches" and K > T:
            key, value = k_key, (pipe_dict.get("max_echo") if k_key == "pipeline.max_echo" else base["echo"])
        if term == "data" and problem.n_features > B:
            key, value = "problem.dim", problem.dim
        raise ConfigError(f"{lab(key)}: {_show(value)} makes a run need about {format_bytes(total)} of memory "
                          f"({T:.3g} fresh batches, about {K:.3g} steps each), more than this machine's "
                          f"{format_bytes(limit)}")
    if f["work"] > MAX_RUN_WORK:
        factors = {t_key: (T, t_value), "optimizer.batch_size": (b_step, B),
                   "problem.dim": (problem.dim, problem.dim), k_key: (K, None)}
        key = max(factors, key=lambda k: factors[k][0])
        value = factors[key][1]
        if value is None:
            value = pipe_dict.get("max_echo") if key == "pipeline.max_echo" else base["echo"]
        raise ConfigError(f"{lab(key)}: {_show(value)} makes a run take about {f['steps']:.3g} optimizer steps "
                          f"and {f['work']:.3g} units of work, more than the limit of {MAX_RUN_WORK:.0e} "
                          "(about a day at 10^10 multiply-adds per second)")


def _show(v) -> str:
    if isinstance(v, float) and (abs(v) >= 1e6 or v != math.floor(v)):
        return f"{v:g}"
    return f"{v}"
