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
  machine does (see `python -m echosim sweep --dry-run` for the estimate of a sweep);
- a config file holds at most `MAX_CONFIG_BYTES`.

`check_useful` then refuses values that cannot be meant (a log that records nothing, a
simulated clock that overflows, more loader workers than `MAX_WORKERS`) and collects
one-line warnings (`ConfigWarning`) for values that are legal but change nothing or
make the sweep pointless (a prefetch buffer larger than the run, more loader workers
than fresh batches, a greedy cap that can never bind, more log points than there are
batches, a target window longer than any run's log).
"""

from __future__ import annotations

import math

from echosim.experiments.schema import MAX_GRID_VALUES, ConfigError
from echosim.pipeline.model import MAX_ECHO, POLICIES
from echosim.pipeline.sizes import format_bytes, memory_limit

__all__ = ["MAX_RUNS", "MAX_GRID_VALUES", "MAX_RUN_WORK", "MAX_CONFIG_BYTES", "MAX_WORKERS", "check_run_count",
           "check_run_size", "run_footprint", "max_batch_size", "check_useful"]

MAX_RUNS = 100_000
"""Runs per sweep (expanding a config costs about 0.1 ms per run)."""
MAX_RUN_WORK = 1e15
"""Units of work per run (multiply-adds, plus 64 per step, event and batch)."""
MAX_CONFIG_BYTES = 16 << 20
"""Bytes of a config file (a grid of 100,000 listed values takes about 1 MiB)."""
MAX_WORKERS = 1_000_000
"""Loader workers of a simulated pipeline (each one is state in the event loop)."""
MAX_CLOCK = 1e300
"""The simulated wall-clock of a run must stay below this (float64 ends at 1.8e308)."""
NO_CAP = 1_000_000
"""A greedy ``max_echo`` above this is no cap at all: K_t never gets near it."""

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
                  n_logs: float, schedule_per_batch: float, workers: int, shuffle: int = 0) -> dict:
    """Memory terms (bytes) and work (units) of one run; see the module docstring."""
    chunk = max(_CHUNK_BYTES, _BLOCK * B * (n_features + 1) * itemsize)
    memory = {
        "batches": T * (40.0 + schedule_per_batch),
        "logs": n_logs * (8.0 + d * (16.0 + itemsize)),
        "data": 2.0 * chunk + min(_MEMO_BYTES, T * B * (n_features + 1) * itemsize),
        "dim": 64.0 * d,
        "workers": 24.0 * workers,
        "shuffle": 8.0 * shuffle,
    }
    steps = T * K
    work = steps * (b_step * d + _STEP_OVERHEAD) + T * _STEP_OVERHEAD
    return {"memory": memory, "work": work, "steps": steps}


def max_batch_size(n_features: int = 1, itemsize: int = 4) -> int:
    """The largest batch size B a run of a sweep can hold on this machine: one fresh batch
    of a run (`run_footprint` with T = K = 1) must fit in memory and in `MAX_RUN_WORK`.

    With the defaults (one feature, float32) it is the largest B that any sweep takes (a
    run of one fresh batch that logs one point); `check_run_size` refuses a larger one
    for every problem. The planner checks its batch sizes against it before any work.

    >>> max_batch_size() > max_batch_size(n_features=100, itemsize=8) > 10_000
    True
    """

    def fits(B: int) -> bool:
        f = run_footprint(1.0, 1.0, B, B, n_features, n_features, itemsize, 2.0, 8.0, 1)
        return sum(f["memory"].values()) <= memory_limit() and f["work"] <= MAX_RUN_WORK

    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def check_run_size(base: dict, lab) -> None:
    """Refuse one resolved grid point (resolve.resolve_point's dict) that cannot fit; `lab` maps key paths to labels."""
    from echosim.experiments.specs import build_pipeline
    from echosim.pipeline.schedule import mean_batch_time, schedule_bytes_per_batch
    from echosim.pipeline.stream import estimate_echo

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
    row = None if pipeline is None else POLICIES[pipeline.policy]
    if pipeline is None:
        K, k_key, per_batch, workers = float(base["echo"] or 1), "optimizer.echo", 8.0, 0
    else:
        if row.capped:
            K, k_key = estimate_echo(pipeline), "pipeline.max_echo"
        else:
            K, k_key = float(pipeline.echo or 1), "optimizer.echo"
        per_batch = schedule_bytes_per_batch(pipeline, B if row.shuffles_examples else None)
        if "time_budget" in run:
            per_batch *= 2  # the simulation may double its batches to pass the budget
        workers = pipeline.workers
    every = run.get("log_every", "auto")
    n_logs = 2000.0 if every == "auto" else T / every
    if "log_points" in run:
        n_logs = min(float(run["log_points"]), T) + 1
    shuffle = 0 if row is None or not row.shuffles_examples else (pipeline.shuffle_buffer or 0)
    f = run_footprint(T, K, B, b_step, problem.dim, problem.n_features, itemsize, n_logs, per_batch, workers,
                      shuffle)
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
            "shuffle": ("pipeline.shuffle_buffer", shuffle),
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


def _units(base: dict, pipeline) -> tuple[float, str, float]:
    """(upper bound of a run's fresh batches T, the log unit, upper bound of its log units)."""
    from echosim.pipeline.schedule import mean_batch_time

    run = base["run"]
    if "n_batches" in run:
        T = float(run["n_batches"])
    else:
        T = 1.25 * run["time_budget"] / mean_batch_time(pipeline) + 16
    if "max_steps" in run:
        T = min(T, float(run["max_steps"]))
    row = None if pipeline is None else POLICIES[pipeline.policy]
    by_step = run.get("log_unit", "batch") == "step" or (row is not None and row.shuffles_examples)
    if not by_step:
        return T, "fresh batches", T
    if row is None or row.takes_echo:
        K = float(math.ceil(base["echo"] or 1))
    elif row.capped:
        K = float(pipeline.max_echo)
    else:
        K = 1.0
    steps = T * K if "max_steps" not in run else min(T * K, float(run["max_steps"]))
    return T, "steps", steps


def check_useful(base: dict, lab, notes: dict) -> float:
    """Refuse the values of one resolved grid point that cannot be meant; add a one-line
    warning to `notes` (key path → text, the first one kept) for values that are legal
    but change nothing. Returns an upper bound of the points the run logs (for the
    target window, checked over the whole grid)."""
    from echosim.experiments.specs import build_pipeline

    run, pipe = base["run"], base["pipeline"]
    pipeline = None if pipe is None else build_pipeline(pipe, base["echo"])
    T, unit, n = _units(base, pipeline)
    if pipeline is not None:
        from echosim.pipeline.schedule import mean_batch_time

        W = pipeline.workers
        if W > MAX_WORKERS:
            raise ConfigError(f"{lab('pipeline.workers')}: {W:,} loader workers, more than the simulation takes "
                              f"({MAX_WORKERS:,})")
        clock = T * mean_batch_time(pipeline)
        if not clock < MAX_CLOCK:
            times = {"pipeline.arrival": pipeline.arrival.mean / W, "pipeline.step_time": pipeline.step_time.mean,
                     "pipeline.switch_overhead": pipeline.switch_overhead}
            key = max(times, key=times.get)
            raise ConfigError(f"{lab(key)}: a run of {T:.3g} fresh batches would take about {clock:.3g} time "
                              "units, beyond what the simulated clock can count; use a smaller time unit")
        if "n_batches" in run and W > T:
            notes.setdefault("pipeline.workers", f"{lab('pipeline.workers')}: {W:,} loader workers for "
                             f"{T:.0f} fresh batches: the extra ones never load a batch")
        if "n_batches" in run and pipeline.prefetch > T:
            notes.setdefault("pipeline.prefetch", f"{lab('pipeline.prefetch')}: a buffer of {pipeline.prefetch:,} "
                             f"batches for runs of {T:.0f} fresh batches never fills (it acts as unbounded)")
        if POLICIES[pipeline.policy].capped and pipeline.max_echo > NO_CAP:
            notes.setdefault("pipeline.max_echo", f"{lab('pipeline.max_echo')}: {pipeline.max_echo:,} acts as no "
                             f"cap at all (greedy's K_t follows the loader's waits; the default cap is {MAX_ECHO})")
    every = run.get("log_every", "auto")
    if "log_points" in run:
        if run["log_points"] > n:
            notes.setdefault("sweep.log_points", f"{lab('sweep.log_points')}: {run['log_points']:,} points, more "
                             f"than the {n:.0f} {unit} of a run: every one of them is logged")
        return min(float(run["log_points"]), n) + 1
    if every == "auto":
        return min(n, 2000.0) + 1
    if every > n:
        raise ConfigError(f"{lab('sweep.log_every')}: every {every:,} {unit}, more than the {n:.0f} of a run: "
                          "it would log nothing (use a smaller value, or sweep.log_points)")
    return n / every + 1


def check_window(window: int, most_points: float, notes: dict) -> None:
    """Warn (in `notes`) when the target window is longer than every run's log: no run
    can reach the target (a full window of logged points is required)."""
    if window > most_points:
        notes.setdefault("sweep.window", f"sweep.window: a trailing mean of {window:,} logged points, but no run "
                         f"logs more than {most_points:.0f}: none can reach the target")
