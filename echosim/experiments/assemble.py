"""The run assembler: one resolved `RunSpec` → problem, optimizer and schedule → a
Trajectory → a payload of plain dicts and arrays. Every run of every command goes
through `execute_run`, through `execute_group` for runs that differ only in the
learning rate (one kernel call over their common batches), or through `execute_cell`
for runs that share a fresh-batch stream (problem, B, data seed, dtype): their
learning-rate groups, of any K, schedule or method, advance side by side over one
draw of each batch. A run's own exception becomes a "failed" payload, never a crash.
"""

from __future__ import annotations

import math
import time

import numpy as np

from echosim.experiments import store
from echosim.experiments.specs import build_optimizer, build_pipeline, build_problem
from echosim.pipeline.model import POLICIES

__all__ = ["execute_run", "execute_group", "execute_cell", "group_by_learning_rate", "group_by_stream",
           "schedule_of", "is_coupled"]


# --------------------------------------------------------------------------- one run


def schedule_of(spec):
    """The run's Schedule: simulated from its pipeline (for T batches or a wall-clock
    budget), or K steps per fresh batch without a clock. Returns (schedule, summary dict)."""
    from echosim.pipeline.schedule import echo_schedule, simulate, simulate_until

    if spec.pipeline is None:
        return echo_schedule(spec.echo, spec.run["n_batches"]), {}
    if is_coupled(spec):
        raise ValueError(f"pipeline.policy {spec.pipeline['policy']!r}: the schedule depends on the run's losses; "
                         "it is simulated with the run (execute_run)")
    pipeline = build_pipeline(spec.pipeline, spec.echo)
    B = spec.optimizer["batch_size"] if POLICIES[pipeline.policy].shuffles_examples else None
    if "time_budget" in spec.run:
        full, schedule = simulate_until(pipeline, spec.run["time_budget"], spec.pipeline_seed, batch_size=B)
    else:
        full = schedule = simulate(pipeline, spec.run["n_batches"], seed=spec.pipeline_seed, batch_size=B)
    return schedule, {f"schedule.{k}": v for k, v in full.summary().items()}


def _log_at(spec_run: dict, n: int) -> np.ndarray:
    """Log positions 1..n (in fresh batches, or steps): log-spaced points, every m-th, or
    the library's "auto" rule (`echosim.training.runner.log_points`, the one rule)."""
    from echosim.training.runner import log_points

    if "log_points" in spec_run:
        return log_points(int(spec_run["log_points"]), n)
    every = spec_run.get("log_every", "auto")
    if every == "auto":
        return log_points("auto", n)
    return np.arange(int(every), n + 1, int(every), dtype=np.int64)


def _setting(spec):
    """Problem, schedule, B, log points and run() keywords: all but the optimizer."""
    problem = build_problem(spec.problem).memoize_batches()
    B = spec.optimizer["batch_size"]
    schedule, info = schedule_of(spec)
    if "max_steps" in spec.run and schedule.n_steps > spec.run["max_steps"]:
        schedule = schedule.first_steps(spec.run["max_steps"])
    T = schedule.n_batches
    log_unit = spec.run.get("log_unit", "batch")
    # log points are in fresh batches, or in steps (asked for, or under example echoing)
    by_step = log_unit == "step" or schedule.step_examples is not None
    logs = _log_at(spec.run, schedule.n_steps if by_step else T)
    kwargs = dict(batch_size=B, echo=schedule, seed=spec.seed, dtype=spec.run.get("dtype", "float64"), log=logs,
                  log_unit=log_unit)
    return problem, schedule, info, kwargs


def _result(spec, problem, schedule, info, traj, B) -> tuple[dict, dict]:
    """The summary fields and the curves of `spec`'s trajectory."""
    T = schedule.n_batches
    steps = np.asarray(traj.steps, dtype=np.int64)
    t = np.full(len(steps), np.nan) if traj.time is None else np.asarray(traj.time, dtype=np.float64)
    n_steps = schedule.n_steps
    curves = {
        "batches": np.asarray(traj.batches, dtype=np.int64),
        "steps": steps,
        "samples": np.asarray(traj.batches, dtype=np.int64) * B,
        "time": t,
        "risk": np.asarray(traj.risk, dtype=np.float64),
        "risk_avg": np.asarray(traj.risk_avg, dtype=np.float64),
        "risk_end_avg": np.asarray(traj.risk_end_avg, dtype=np.float64),
    }
    const = problem.constants()
    last = len(steps) > 0
    info.update(
        status=traj.status,
        error="",
        diverged_at=math.nan if traj.diverged_at is None else float(traj.diverged_at),
        n_batches=int(T),
        n_steps=n_steps,
        mean_echo=n_steps / T,
        final_batches=int(curves["batches"][-1]) if last else 0,
        final_risk=float(curves["risk"][-1]) if last else math.nan,
        final_risk_avg=float(curves["risk_avg"][-1]) if last else math.nan,
        final_risk_end_avg=float(curves["risk_end_avg"][-1]) if last else math.nan,
        final_time=float(t[-1]) if last else math.nan,
        F_star=float(problem.F_star),
        beta=float(const["beta"]),
        rho=float(const["rho"]),
        D=float(const["D"]),
        constants_kind=str(getattr(problem, "constants_kind", "")),
    )
    return info, curves


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return text[:500]


def execute_run(spec) -> dict:
    """Run one spec; returns ``{"summary": row dict, "curves": dict of arrays or None}``.

    Never raises for a run's own errors: an exception gives status "failed" and its
    message in ``error`` (and no curves). The same path as `execute_group` (a group of
    one), so a run's result does not depend on the runs it was computed with.
    """
    return execute_group([spec])[0]


def _failed(spec, exc, elapsed: float) -> dict:
    row = spec.params()
    row.update(status="failed", error=_one_line(exc), elapsed_s=elapsed)
    row.update(store.provenance())
    return {"summary": row, "curves": None}


def group_key(spec) -> str:
    """What runs of one group share: the resolved spec without the learning rate (with it
    under "auto", where every learning rate has its own schedule: one run per group, so
    that the runs spread over the workers)."""
    from echosim.experiments.specs import canonical_json

    resolved = dict(spec.resolved())
    if not is_coupled(spec):
        resolved["optimizer"] = {k: v for k, v in resolved["optimizer"].items() if k != "lr"}
    return canonical_json(resolved)


def group_by_learning_rate(specs) -> list[list]:
    """Split specs into groups that differ only in the learning rate (same data seed,
    problem, B, method, schedule and run settings), in order of first appearance."""
    groups: dict[str, list] = {}
    for spec in specs:
        groups.setdefault(group_key(spec), []).append(spec)
    return list(groups.values())


def execute_group(specs) -> list[dict]:
    """`[execute_run(s) for s in specs]` for specs of one group (see `group_by_learning_rate`),
    with every learning rate advanced in one pass over the common batches
    (`echosim.training.runner.run_many`).

    Each payload is bitwise what the spec gives alone (`run_many`'s columns do not
    depend on each other) except ``elapsed_s``: the group's time, split evenly. A group
    that fails as a whole falls back to one run at a time, so each run records its own
    error.
    """
    from echosim.training.runner import run_many

    specs = list(specs)
    if len({group_key(s) for s in specs}) > 1:
        raise ValueError("execute_group: the specs differ in more than the learning rate")
    if specs and is_coupled(specs[0]):  # a group of one (see group_key)
        return [_execute_coupled(specs[0])]
    t0 = time.perf_counter()
    try:
        optimizers = [build_optimizer(s.optimizer) for s in specs]
        problem, schedule, info, kwargs = _setting(specs[0])
        trajs = run_many(problem, optimizers, quiet=True, **kwargs)  # the warm-up says when it compiles
    except Exception as exc:  # noqa: BLE001 - a failed run is data, not a crash
        if len(specs) == 1:
            return [_failed(specs[0], exc, time.perf_counter() - t0)]
        return [payload for s in specs for payload in execute_group([s])]  # each run records its own error
    elapsed = (time.perf_counter() - t0) / len(specs)
    return [_payload(spec, problem, schedule, dict(info), traj, kwargs["batch_size"], elapsed)
            for spec, traj in zip(specs, trajs)]


def _payload(spec, problem, schedule, info, traj, B, elapsed) -> dict:
    """The payload of one finished run (a "failed" one if its results cannot be read)."""
    try:
        info, curves = _result(spec, problem, schedule, info, traj, B)
    except Exception as exc:  # noqa: BLE001
        return _failed(spec, exc, elapsed)
    row = spec.params()
    row.update(info)
    row["elapsed_s"] = elapsed
    row.update(store.provenance())
    return {"summary": row, "curves": curves}


def is_coupled(spec) -> bool:
    """Is the run's pipeline policy simulated together with the run (its row's ``coupled``)?"""
    return spec.pipeline is not None and POLICIES[spec.pipeline["policy"]].coupled


def _execute_coupled(spec) -> dict:
    """One run under policy "auto": the pipeline and the optimizer advanced together
    (`echosim.training.runner.run_coupled`); its summary adds the caps' (``auto.*``)."""
    from echosim.training.runner import run_coupled

    t0 = time.perf_counter()
    try:
        problem = build_problem(spec.problem).memoize_batches()
        pipeline = build_pipeline(spec.pipeline, spec.echo)
        B, T = spec.optimizer["batch_size"], spec.run["n_batches"]
        log_unit = spec.run.get("log_unit", "batch")
        # log points in fresh batches, or in steps up to the most the run can take
        logs = _log_at(spec.run, T if log_unit == "batch" else T * pipeline.max_echo)
        c = run_coupled(problem, build_optimizer(spec.optimizer), pipeline, batch_size=B, n_batches=T,
                        seed=spec.seed, pipeline_seed=spec.pipeline_seed, dtype=spec.run.get("dtype", "float64"),
                        log=logs, log_unit=log_unit, quiet=True)
        info = {f"schedule.{k}": v for k, v in c.schedule.summary().items()}
        info.update({f"auto.{k}": v for k, v in c.summary().items()})
    except Exception as exc:  # noqa: BLE001 - a failed run is data, not a crash
        return _failed(spec, exc, time.perf_counter() - t0)
    return _payload(spec, problem, c.schedule, info, c.trajectory, B, time.perf_counter() - t0)


# --------------------------------------------------------------------------- runs of one stream


def stream_key(spec) -> str:
    """What the runs of one cell share: the fresh-batch stream (problem, B, data seed,
    dtype) and the log unit, under batch echoing. A run whose schedule depends on its
    losses (a coupled policy) or that gathers examples across batches (a policy that
    shuffles examples) keeps its learning-rate group's key: a cell of its own."""
    from echosim.experiments.specs import canonical_json

    if is_coupled(spec) or (spec.pipeline is not None and POLICIES[spec.pipeline["policy"]].shuffles_examples):
        return group_key(spec)
    return canonical_json({"problem": spec.problem, "batch_size": spec.optimizer["batch_size"], "seed": spec.seed,
                           "dtype": spec.run.get("dtype", "float64"), "log_unit": spec.run.get("log_unit", "batch")})


def group_by_stream(specs) -> list[list]:
    """Split specs into cells that share one fresh-batch stream (`stream_key`), in order
    of first appearance: the sweep's unit of work (`execute_cell`)."""
    cells: dict[str, list] = {}
    for spec in specs:
        cells.setdefault(stream_key(spec), []).append(spec)
    return list(cells.values())


def execute_cell(specs) -> list[dict]:
    """`[execute_run(s) for s in specs]` for specs of one cell (see `group_by_stream`): its
    learning-rate groups advanced side by side, window by window, over one draw of each
    window of fresh batches (`echosim.training.runner.run_shared`).

    Each payload is bitwise what the spec gives alone except ``elapsed_s``: the cell's
    time, split evenly. A cell that fails as a whole falls back to one learning-rate
    group at a time (`execute_group`), so each run records its own error.
    """
    from echosim.training.runner import run_shared

    specs = list(specs)
    if len({stream_key(s) for s in specs}) > 1:
        raise ValueError("execute_cell: the specs do not share one fresh-batch stream")
    groups = group_by_learning_rate(specs)
    if len(groups) <= 1 or is_coupled(specs[0]):
        return _in_order(specs, groups, [execute_group(g) for g in groups])
    t0 = time.perf_counter()
    try:
        settings = [_setting(g[0]) for g in groups]
        problem, _, _, kwargs = settings[0]
        members = [([build_optimizer(s.optimizer) for s in g], kw["echo"], kw["log"])
                   for g, (_, _, _, kw) in zip(groups, settings)]
        trajs = run_shared(problem, members, batch_size=kwargs["batch_size"], seed=kwargs["seed"],
                           dtype=kwargs["dtype"], log_unit=kwargs["log_unit"], quiet=True)
    except Exception:  # noqa: BLE001 - a failed run is data, not a crash: each group records its own
        return _in_order(specs, groups, [execute_group(g) for g in groups])
    elapsed = (time.perf_counter() - t0) / len(specs)
    return _in_order(specs, groups, [[_payload(spec, prob, schedule, dict(info), traj, kw["batch_size"], elapsed)
                                      for spec, traj in zip(group, group_trajs)]
                                     for group, (prob, schedule, info, kw), group_trajs in zip(groups, settings, trajs)])


def _in_order(specs, groups, payloads) -> list[dict]:
    """The payloads of `groups` (lists parallel to each group) in the order of `specs`."""
    done = {id(spec): p for group, ps in zip(groups, payloads) for spec, p in zip(group, ps)}
    return [done[id(spec)] for spec in specs]
