"""The timing the planner takes from records of runs through `echosim.echoing`.

`recorded_timing` turns records (a pilot's or any run's) into the loader and step times
per policy and batch size that `echosim.plan` uses instead of profiles taken apart: on a
shared host the loader and the step slow each other down, differently under each policy.

Censored load times: where the loader's thread had been held by a full buffer, a loader
with workers of its own prefetched meanwhile, so the time recorded is a lower bound
(``load_censored``). Leaving those out keeps only the loads during which the loop waited,
which are the slow ones; so every time is kept, and each censored one is replaced by a
time of the same batch size's sync run (else greedy run) at least as long
(`_uncensor`): the loader's distribution where it set the pace, above the bound.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from echosim._validate import check_int
from echosim.planner.candidates import BASELINE

__all__ = ["check_records", "recorded_timing", "step_time_at"]


def _as_records(x, where: str):
    from echosim.loop.records import Records, load_records

    if isinstance(x, (str, Path)):
        return check_records(load_records(x), f"{where} ({x})")
    if not isinstance(x, Records):
        raise ValueError(f"records: expected Records (from echosim.echoing(...).records(), echosim.pilot or "
                         f"echosim.planner.load_records), got {type(x).__name__} {where}")
    return check_records(x, where)


def check_records(r, where: str = ""):
    """`r` if it is within the planner's limits, else a ValueError naming the record and the
    field: K and every K_t at most `echosim.planner.response.MAX_ECHO`. (`Records` checks the
    rest of its fields itself, when it is made or loaded.)"""
    from echosim.planner.response import MAX_ECHO

    def bad(field: str, what: str):
        raise ValueError(f"records: {where + ': ' if where else ''}{field} {what}")

    if r.echo is not None and not 1 <= r.echo <= MAX_ECHO:
        bad("echo", f"must be an integer K in 1..{MAX_ECHO}, got {r.echo!r}")
    k = np.asarray(r.steps_per_batch)
    if k.size and not np.all(k <= MAX_ECHO):
        bad("steps_per_batch", f"must be in 1..{MAX_ECHO} steps per fresh batch, got {int(k[k > MAX_ECHO][0])}")
    return r


def _flatten(records):
    """[(B given by the caller or None, Records)], from a Records, a list, or a mapping B -> list."""
    if isinstance(records, Mapping):
        out = []
        for B, v in records.items():
            check_int("records: a batch size", B, lo=1)
            for r in (v if isinstance(v, (list, tuple)) else [v]):
                out.append((int(B), _as_records(r, f"at B = {B}")))
        return out
    items = records if isinstance(records, (list, tuple)) else [records]
    if not items:
        raise ValueError("records: expected at least one run's records")
    return [(None, _as_records(r, f"(item {i})")) for i, r in enumerate(items)]


def _uncensor(exact: np.ndarray, bounds: np.ndarray, reference: np.ndarray | None) -> np.ndarray:
    """Load times with each lower bound in `bounds` replaced from `reference` (times where the
    loader set the pace): the reference's times at least as long as the bound, at evenly
    spaced quantiles (deterministic), or the bound itself where none is. Without a
    reference, the exact times alone (or the bounds, if there are none).

    >>> _uncensor(np.array([0.5]), np.array([0.01, 0.2]), np.array([0.1, 0.3, 0.4])).tolist()
    [0.5, 0.1, 0.4]
    """
    if not bounds.size:
        return exact
    if reference is None or not reference.size:
        return exact if exact.size else bounds
    ref = np.sort(reference)
    order = np.argsort(bounds, kind="stable")
    filled = np.empty(bounds.size)
    for j, i in enumerate(order):
        above = ref[ref >= bounds[i]]
        filled[i] = above[min(int((j + 0.5) / bounds.size * above.size), above.size - 1)] if above.size else bounds[i]
    return np.concatenate([exact, filled])


def _pooled_loader(groups: dict, z: float = 2.0) -> dict:
    """{group key: the loader's times pooled over the policies at its batch size} for each
    group whose loader is not told apart from the others' (`z` standard errors, over segment
    means: a shared host's load drifts between segments far more than within one). Only
    groups where the loader set the pace (under half their times censored, two segments or
    more) take part; the others keep their own times. The loader is one program whatever
    the policy; a policy's own times are kept only where its contention shows beyond that
    drift (on a CPU-only host echoing can slow the loader)."""
    paced: dict = {}
    for key, g in groups.items():
        n_exact = sum(a.size for a in g["load"])
        n_all = n_exact + sum(a.size for a in g["bound"])
        means = [float(a.mean()) for a in g["load"] if a.size >= 2]
        if n_all and n_exact >= 0.5 * n_all and len(means) >= 2:
            paced.setdefault(key[0], {})[key] = (np.asarray(means), np.concatenate(g["load"]))
    out = {}
    for members in paced.values():
        if len(members) < 2:
            continue
        everything = np.concatenate([m[1] for m in members.values()])
        for key, (means, _) in members.items():
            others = np.concatenate([m[0] for k, m in members.items() if k != key])
            if others.size < 2:
                continue
            se = math.sqrt(means.var(ddof=1) / means.size + others.var(ddof=1) / others.size)
            if se > 0 and abs(means.mean() - others.mean()) <= z * se:
                out[key] = everything
    return out


def recorded_timing(records, batch_sizes) -> dict:
    """Loader and step times per batch size and policy from runs through `echoing`.

    Returns ``{B: [(mean echo, policy, loader Trace or None, step Trace, n_batches), ...]}``,
    sorted by mean echo; a policy whose loader times are not told apart from the others' takes
    the loader's times pooled over them (`_pooled_loader`); censored load times are replaced
    from the sync (else greedy) run at that batch size (`_uncensor`); the loader is None where every load time was censored
    and there is no such run (the loader ran ahead of the loop). ValueError naming the problem: a record without a
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
        g = groups.setdefault(key, {"load": [], "bound": [], "step": [], "steps": 0, "batches": 0})
        steady = slice(1, None) if r.n_batches > 1 else slice(0, None)
        load, cens = r.load_time[steady], r.load_censored[steady]
        g["load"].append(load[~cens & (load > 0)])
        g["bound"].append(load[cens & (load > 0)])
        st = r.step_time[np.isfinite(r.step_time) & (r.step_time > 0)]
        if st.size == 0:
            raise ValueError(f"records: record {i} (policy {r.policy}) has no finished step with a positive time")
        g["step"].append(st)
        g["steps"] += r.n_steps
        g["batches"] += r.n_batches
    recorded: dict = {}
    exact = {key: np.concatenate(g["load"]) for key, g in groups.items()}
    pooled = _pooled_loader(groups)
    for (b, policy, echo), g in groups.items():
        load, bounds = exact[(b, policy, echo)], np.concatenate(g["bound"])
        if (b, policy, echo) in pooled:
            load = pooled[(b, policy, echo)]
        if policy == BASELINE:
            # under sync a loader that ran ahead is faster than a step: its (lower-bound) times
            # say so, which is all the plan needs (the loader keeps up)
            load = np.concatenate([load, bounds])
        else:
            ref = next((exact[k] for k in ((b, BASELINE, 1), (b, "greedy", None)) if k in exact and exact[k].size), None)
            load = _uncensor(load, bounds, ref) if ref is not None else load
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


def step_time_at(groups, echo: float):
    """The step's time under a fixed K that no record ran, from a model of step time in K, not
    copied from the nearest policy: on a shared host the step slows while the loader works,
    so with u(K) the fraction of the loop's time the loader is busy, s(K) = s0 + s1·u(K),
    fitted by least squares to the recorded policies (u = loader time over the time per fresh
    batch, max(loader, K·step)); for the new K, s solves s = s0 + s1·min(1, L / (K·s)), L the
    sync (else fastest) run's loader time. Returns the nearest recorded step Trace scaled to
    that mean; the nearest one as it is where fewer than two policies measured both times.

    `groups`: one batch size's list from `recorded_timing`.
    """
    have = [g for g in groups if g[2] is not None and g[3] is not None]
    nearest = min(groups, key=lambda g: abs(math.log(g[0]) - math.log(echo)))[3]
    if len({round(g[0], 9) for g in have}) < 2:
        return nearest
    u = np.array([min(1.0, g[2].mean / max(g[2].mean, g[0] * g[3].mean)) for g in have])
    s = np.array([g[3].mean for g in have])
    w = np.array([g[4] for g in have], dtype=float)
    if np.ptp(u) <= 1e-9:
        return nearest.scaled(float(np.average(s, weights=w)) / nearest.mean)
    uc = float(np.average(u, weights=w))
    s1 = float(np.sum(w * (u - uc) * s) / np.sum(w * (u - uc) ** 2))
    s0 = float(np.average(s, weights=w)) - s1 * uc
    L = next((g[2].mean for g in have if g[1] == "sync"), min(g[2].mean for g in have))
    pred = float(np.average(s, weights=w))
    for _ in range(50):  # a contraction for the s1 of a host (|s1| below s0); the last iterate otherwise
        pred = max(s0 + s1 * min(1.0, L / (echo * pred)), 0.05 * s.min())
    return nearest.scaled(pred / nearest.mean)
