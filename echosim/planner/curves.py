"""Steps to target read off whole loss curves: a run's loss per fresh batch gives T at
every target at once, so the planner takes the curves themselves (records of runs through
`echosim.echoing`, a CSV, or arrays) instead of one number per run.

A curve is the loss per fresh batch: ``Records.first_loss`` (each fresh batch's loss before
the model trained on it, an unbiased reading of the population loss while batches are
fresh), or a column of a CSV. T at a target loss L is the first fresh batch from which the
trailing mean over `window` batches is <= L and stays <= L to the end of the curve
(reaches and stays); a run that never does is left out, and said.

CSV: one row per fresh batch, columns ``batch_size`` and ``loss``, optionally ``echo``
(K, default 1), ``run`` (repeats of one (B, K)) and ``fresh_batch`` (the order; default
the file's).

Examples
--------
>>> import numpy as np
>>> curve = 1.0 + 10.0 / np.arange(1, 201)            # loss per fresh batch
>>> steps_from_curves({64: curve, (256, 4): 1.0 + 40.0 / np.arange(1, 101)}, target_loss=1.5, window=1)
{64: [20.0], (256, 4): [320.0]}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from echosim._validate import check_int, check_real

__all__ = ["load_curves", "steps_from_curves", "steps_at_targets", "batches_to_reach"]


def batches_to_reach(loss, target_loss: float, window: int = 10) -> float:
    """Fresh batches until the trailing mean of `loss` over `window` batches is <= `target_loss`
    and stays so to the end (1-based); inf if it never does. NaN readings are skipped in the mean."""
    x = np.asarray(loss, dtype=float)
    if x.size == 0:
        return math.inf
    ok = np.isfinite(x)
    c = np.concatenate([[0.0], np.cumsum(np.where(ok, x, 0.0))])
    n = np.concatenate([[0], np.cumsum(ok)])
    idx = np.arange(1, x.size + 1)
    lo = np.maximum(idx - window, 0)
    cnt = n[idx] - n[lo]
    mean = np.where(cnt > 0, (c[idx] - c[lo]) / np.maximum(cnt, 1), np.inf)
    above = mean > target_loss
    if above[-1]:
        return math.inf
    last_above = np.flatnonzero(above)
    return float(last_above[-1] + 2) if last_above.size else 1.0


def _curve_key(key):
    if isinstance(key, tuple):
        if len(key) != 2:
            raise ValueError(f"curves: a key is a batch size B or a pair (B, K), got {key!r}")
        B, K = key
    else:
        B, K = key, 1
    from echosim.planner.response import MAX_ECHO

    check_int(f"curves: the batch size B in key {key!r}", B, lo=1)
    check_int(f"curves: the echo factor K in key {key!r}", K, lo=1, hi=MAX_ECHO)
    return int(B), int(K)


def _from_records(r) -> tuple[tuple[int, int], np.ndarray]:
    from echosim.planner.recorded import check_records

    check_records(r, "curves")
    if r.batch_size is None:
        raise ValueError("curves: records without a batch size (pass batch_size= to echoing) cannot be placed")
    if r.echo is None:  # greedy or auto: K_t varied
        raise ValueError(f"curves: records of policy {r.policy!r} have no single K; give sync or fixed-K runs")
    if r.epoch.size and int(np.max(r.epoch)) > 0:
        raise ValueError("curves: records over more than one epoch: from the second epoch the first-step loss is a "
                         "training loss, not the population loss the target is about")
    return (int(r.batch_size), int(r.echo)), np.asarray(r.first_loss, dtype=float)


def _from_csv(path) -> dict:
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"curves: cannot read {path}: {exc}") from None
    if not rows or not {"batch_size", "loss"} <= set(rows[0]):
        raise ValueError(f"curves: {path}: needs a header with columns batch_size and loss (optionally echo, run, "
                         "fresh_batch) and at least one row")
    groups: dict = {}
    for i, row in enumerate(rows, start=2):
        try:
            B = int(row["batch_size"])
            K = int(row.get("echo") or 1)
            loss = float(row["loss"]) if row["loss"] not in ("", None) else math.nan
            order = float(row.get("fresh_batch") or i)
        except (TypeError, ValueError):
            raise ValueError(f"curves: {path}, line {i}: batch_size and echo must be integers and loss a number, "
                             f"got {dict(row)}") from None
        key = _curve_key((B, K))
        groups.setdefault((key, row.get("run") or ""), []).append((order, loss))
    out: dict = {}
    for (key, _), pts in groups.items():
        pts.sort()
        out.setdefault(key, []).append(np.array([v for _, v in pts]))
    return out


def load_curves(source) -> dict:
    """{(B, K): [loss per fresh batch, ...]} from Records (or a list of them, or .npz files of
    `Records.save`), a CSV path, or a mapping B or (B, K) -> a curve or a list of curves."""
    from echosim.loop.records import Records, load_records

    items = source if isinstance(source, (list, tuple)) else [source]
    out: dict = {}
    for item in items:
        if isinstance(item, Records):
            key, curve = _from_records(item)
            out.setdefault(key, []).append(curve)
        elif isinstance(item, (str, Path)):
            if str(item).endswith(".csv"):
                for key, cs in _from_csv(item).items():
                    out.setdefault(key, []).extend(cs)
            else:
                key, curve = _from_records(load_records(item))
                out.setdefault(key, []).append(curve)
        elif isinstance(item, Mapping):
            for k, v in item.items():
                key = _curve_key(k)
                arr = np.asarray(v, dtype=float) if not isinstance(v, (list, tuple)) or np.ndim(v[0]) == 0 else None
                curves = [arr] if arr is not None else [np.asarray(c, dtype=float) for c in v]
                out.setdefault(key, []).extend(c.reshape(-1) for c in curves)
        else:
            raise ValueError(f"curves: expected Records, a .csv or .npz path, or a mapping B or (B, K) -> losses per "
                             f"fresh batch, got {type(item).__name__}")
    if not out:
        raise ValueError("curves: no curve given")
    return out


def steps_from_curves(curves, target_loss: float, window: int = 10) -> dict:
    """Steps to target for `echosim.planner.response.fit_response`: key B (K = 1) or (B, K),
    value a list with one entry per run that reached `target_loss` (K x fresh batches).
    ValueError naming `curves` if some (B, K) never reaches it, or `target_loss`/`window`."""
    check_real("target_loss (the loss to reach with the curves)", target_loss)
    check_int("window (fresh batches in the trailing mean)", window, lo=1)
    out = {}
    for (B, K), cs in load_curves(curves).items():
        T = [batches_to_reach(c, float(target_loss), int(window)) for c in cs]
        reached = [K * t for t in T if math.isfinite(t)]
        if not reached:
            raise ValueError(f"curves: at B = {B}{f', K = {K}' if K > 1 else ''} no run reaches loss {target_loss:g} "
                             f"and stays there (trailing mean over {window} fresh batches): a longer run or a higher "
                             "target")
        out[B if K == 1 else (B, K)] = [float(s) for s in reached]
    return out


def steps_at_targets(curves, target_losses, window: int = 10) -> dict:
    """{target loss: {B or (B, K): [steps, ...]}}: every target at once from the same curves
    (targets some (B, K) never reaches map to what the others give, that key left out)."""
    loaded = load_curves(curves)
    out = {}
    for L in target_losses:
        got = {}
        for (B, K), cs in loaded.items():
            T = [batches_to_reach(c, float(L), int(window)) for c in cs]
            reached = [float(K * t) for t in T if math.isfinite(t)]
            if reached:
                got[B if K == 1 else (B, K)] = reached
        out[float(L)] = got
    return out
