"""A short pilot in the user's own loop, and the timing the planner takes from its records.

`pilot` runs the user's step function on their loader under a few echo policies, in
short interleaved segments (so that machine drift hits every policy alike), through
`echosim.echoing`, and returns the records. `recorded_timing` turns records (a pilot's
or any run's) into the loader and step times per policy and batch size that
`echosim.plan` uses instead of profiles taken apart: on a shared host the loader and
the step slow each other down, differently under each policy.

How short: the timing settles within a few dozen fresh batches per policy, far less
than a training run; 40 fresh batches per policy (in two segments of 20) is the
default, a few percent of a typical run's steps (docs/howto/should-i-echo.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

__all__ = ["pilot", "recorded_timing"]

PILOT_POLICIES = ("sync", 2, 4, "greedy")


def _limited(loader, n: int):
    """The first n batches of `loader`, re-iterated over epochs as needed."""
    got = 0
    while got < n:
        empty = True
        for batch in loader:
            empty = False
            yield batch
            got += 1
            if got >= n:
                return
        if empty:
            return


def pilot(step: Callable, loader: Iterable, *, policies=PILOT_POLICIES, batches: int = 40, rounds: int = 2,
          max_echo: int = 64, batch_size: int | None = None, auto: dict | None = None) -> list:
    """Run ``step(batch)`` under each echo policy for `batches` fresh batches and return the records.

    Parameters
    ----------
    step : callable
        One training step on a batch; may return the loss (a float, or anything with
        ``float()``, e.g. a 0-d tensor), which is reported to `echoing`.
    loader : re-iterable
        The loader (a DataLoader, a list): each segment iterates it afresh.
    policies : sequence of "sync", "greedy", "auto" or int K
        The policies to time (default: sync, K = 2, K = 4, greedy).
    batches : int
        Fresh batches per policy in all (split into `rounds` segments).
    rounds : int
        Segments per policy, interleaved: round r runs every policy once, in an order
        rotated by r.
    max_echo, batch_size, auto : passed to `echoing`.

    Returns
    -------
    list of Records, one per segment, in the order run (pass them to ``plan(records=...)``).
    """
    from echosim.planner.echoing import echoing

    if not callable(step):
        raise ValueError(f"step: expected a callable step(batch) -> loss, got {type(step).__name__}")
    if not isinstance(loader, Iterable) or isinstance(loader, Iterable) and iter(loader) is loader:
        raise ValueError("loader: expected a re-iterable loader (a DataLoader, a list): each pilot segment "
                         "iterates it afresh")
    pols = list(policies) if not isinstance(policies, (str, numbers.Integral)) else [policies]
    if not pols:
        raise ValueError("policies: expected at least one policy")
    for name, v, lo in (("batches", batches, 2), ("rounds", rounds, 1)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"{name}: expected an integer >= {lo}, got {v!r}")
    per = max(2, math.ceil(batches / rounds))
    for p in pols:  # bad policies fail here, before any step runs
        echoing([], p, max_echo=max_echo, auto=auto if p == "auto" else None).close()
    out = []
    for r in range(rounds):
        order = pols[r % len(pols):] + pols[: r % len(pols)]
        for p in order:
            it = echoing(_limited(loader, per), p, max_echo=max_echo, batch_size=batch_size,
                         auto=auto if p == "auto" else None)
            with it:
                for batch in it:
                    loss = step(batch)
                    if loss is not None:
                        it.report(loss)
            out.append(it.records())
    return out


# --------------------------------------------------------------------------- timing from records


def _as_records(x, where: str):
    from echosim.planner.records import Records, load_records

    if isinstance(x, (str, Path)):
        return load_records(x)
    if not isinstance(x, Records):
        raise ValueError(f"records: expected Records (from echosim.echoing(...).records(), echosim.pilot or "
                         f"echosim.planner.load_records), got {type(x).__name__} {where}")
    return x


def _flatten(records):
    """[(B given by the caller or None, Records)], from a Records, a list, or a mapping B -> list."""
    if isinstance(records, Mapping):
        out = []
        for B, v in records.items():
            if isinstance(B, bool) or not isinstance(B, numbers.Integral) or B < 1:
                raise ValueError(f"records: batch sizes must be integers >= 1, got {B!r}")
            for r in (v if isinstance(v, (list, tuple)) else [v]):
                out.append((int(B), _as_records(r, f"at B = {B}")))
        return out
    items = records if isinstance(records, (list, tuple)) else [records]
    if not items:
        raise ValueError("records: expected at least one run's records")
    return [(None, _as_records(r, f"(item {i})")) for i, r in enumerate(items)]


def recorded_timing(records, batch_sizes) -> dict:
    """Loader and step times per batch size and policy from runs through `echoing`.

    Returns ``{B: [(mean echo, policy, loader Trace or None, step Trace, n_batches), ...]}``,
    sorted by mean echo; the loader is None where every load time was censored (the
    loader ran ahead of the loop). ValueError naming the problem: a record without a
    fresh batch, records of unknown batch size mixed with several planned batch sizes,
    a planned batch size without records.
    """
    from echosim.pipeline.traces import Trace

    flat = _flatten(records)
    Bs = list(batch_sizes)
    groups: dict = {}
    for i, (B, r) in enumerate(flat):
        if r.n_batches == 0:
            raise ValueError(f"records: record {i} (policy {r.policy}) has no fresh batch")
        if B is not None and r.batch_size is not None and r.batch_size != B:
            raise ValueError(f"records: record {i} says batch size {r.batch_size}, but it was given at B = {B}")
        b = B if B is not None else r.batch_size
        if b is None:
            if len(Bs) != 1:
                raise ValueError(f"records: the batch size of record {i} is unknown and several batch sizes are "
                                 f"planned ({', '.join(map(str, Bs))}); pass batch_size= to echoing, or records as "
                                 "a mapping {B: [records]}")
            b = Bs[0]
        key = (b, r.policy, r.echo)
        g = groups.setdefault(key, {"load": [], "all": [], "step": [], "steps": 0, "batches": 0})
        steady = slice(1, None) if r.n_batches > 1 else slice(0, None)
        load, cens = r.load_time[steady], r.load_censored[steady]
        g["load"].append(load[~cens & (load > 0)])
        g["all"].append(load[load > 0])
        st = r.step_time[np.isfinite(r.step_time) & (r.step_time > 0)]
        if st.size == 0:
            raise ValueError(f"records: record {i} (policy {r.policy}) has no finished step with a positive time")
        g["step"].append(st)
        g["steps"] += r.n_steps
        g["batches"] += r.n_batches
    recorded: dict = {}
    for (b, policy, echo), g in groups.items():
        load = np.concatenate(g["load"])
        if not load.size and policy == "sync":
            # under sync a loader that always ran ahead is faster than a step: its (lower-bound)
            # times say so, which is all the plan needs (the loader keeps up)
            load = np.concatenate(g["all"])
        loader = Trace(load, "resample") if load.size else None
        step = Trace(np.concatenate(g["step"]), "resample")
        recorded.setdefault(b, []).append((g["steps"] / g["batches"], policy, loader, step, g["batches"]))
    missing = [B for B in Bs if B not in recorded]
    if missing:
        raise ValueError(f"records: no records at batch size {', '.join(map(str, missing))}; the records cover "
                         f"B = {', '.join(map(str, sorted(recorded)))}")
    for B in Bs:
        if all(g[2] is None for g in recorded[B]):
            raise ValueError(f"records: no record measured the loader at B = {B} (under fixed K the loop, not the "
                             "loader, set the pace: the loader ran ahead of it); add a sync or greedy run")
    return {B: sorted(recorded[B], key=lambda g: g[0]) for B in Bs}
