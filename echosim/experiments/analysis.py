"""Convergence time, learning-rate tuning and the saturation fit, as in the paper's protocol.

Convergence time (Agarwal et al. §4, "the first point where the trailing mean of ten
training losses is within 1% of globally optimal training loss"): the loss is
F(w) = excess risk + F*; at logged point i the trailing mean is the mean of the
losses at points i−window+1 … i (a full window is required); the run has converged at
the first point where that mean is ≤ (1 + rtol)·F* (or ≤ F* + atol). A run that never
gets there, or diverged, has convergence time +inf — kept in the tables, never dropped
and never NaN. The time is reported in four units: fresh batches T, optimizer steps
KT, samples BT and simulated wall-clock.

Tuning: for every setting of everything but the learning rate, the chosen lr is the one
with the smallest median convergence time over the seeds (ties: smaller mean — with
inf counted — then more seeds converged, then the smaller lr). Every run is kept; the
tuned table just points at the chosen lr.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

__all__ = [
    "ITERATES",
    "UNITS",
    "trailing_mean",
    "loss_threshold",
    "convergence_index",
    "convergence",
    "tune",
    "fit_saturation",
    "regime",
]

ITERATES = {"last": "risk", "avg": "risk_avg", "end_avg": "risk_end_avg"}
"""Which curve column each ``iterate`` setting reads (excess risks)."""

UNITS = {"batches": "T", "steps": "KT", "samples": "BT", "time": "wall-clock"}
"""Convergence-time units: column suffix → the paper's symbol."""


def trailing_mean(values, window: int) -> np.ndarray:
    """Mean of the last `window` values at each point; NaN until a full window exists."""
    v = np.asarray(values, dtype=np.float64)
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    out = np.full(v.shape, np.nan)
    if v.size >= window:
        out[window - 1:] = np.lib.stride_tricks.sliding_window_view(v, window).mean(axis=1)
    return out


def loss_threshold(F_star: float, rtol: float | None = 0.01, atol: float | None = None) -> float:
    """The loss level that counts as converged: (1 + rtol)·F* or F* + atol."""
    if (rtol is None) == (atol is None):
        raise ValueError("give exactly one of rtol (relative to F*) or atol (excess risk)")
    if atol is not None:
        if not (math.isfinite(atol) and atol > 0):
            raise ValueError(f"atol must be a number > 0, got {atol!r}")
        return float(F_star) + float(atol)
    if not (math.isfinite(rtol) and rtol > 0):
        raise ValueError(f"rtol must be a number > 0, got {rtol!r}")
    if not F_star > 0:
        raise ValueError(f"rtol needs F* > 0 (got F* = {F_star!r}); use atol (an excess-risk target)")
    return (1.0 + float(rtol)) * float(F_star)


RULES = ("stable", "first")
"""When a run counts as converged: its trailing mean stays in the band from there to the
end of its budget ("stable", the default), or first enters it ("first", the paper's)."""


def convergence_index(loss, threshold: float, window: int = 10, rule: str = "first") -> int:
    """The logged point where the trailing mean reaches the threshold by `rule`; −1 if none.

    "first": the first point whose trailing mean is <= threshold. "stable": the first
    point from which every trailing mean to the end is <= threshold, so a run that only
    passes through the band (a step past the stability edge) does not count.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, RULES))}, got {rule!r}")
    m = trailing_mean(loss, window)
    inside = m <= threshold
    if rule == "first":
        hit = np.nonzero(inside)[0]
        return int(hit[0]) if hit.size else -1
    if not inside.size or not inside[-1]:
        return -1
    outside = np.nonzero(~inside)[0]
    return int(outside[-1]) + 1 if outside.size else 0


def convergence(curve: Mapping[str, np.ndarray], F_star: float, *, rtol: float | None = 0.01,
                atol: float | None = None, fraction: float | None = None, window: int = 10,
                iterate: str = "last", status: str = "ok", rule: str = "stable") -> dict:
    """Convergence time of one run in every unit.

    Parameters
    ----------
    curve : mapping with arrays ``batches``, ``steps``, ``samples``, ``time`` (NaN
        without a pipeline) and the excess risks ``risk``, ``risk_avg``, ``risk_end_avg``.
    F_star : F*, so that loss = excess risk + F*.
    rtol, atol, fraction : the target (one of them): loss ≤ (1 + rtol)·F*, excess risk
        ≤ atol, or excess risk ≤ fraction × the excess risk at the first logged point (w₀).
    window : trailing-mean window in logged points.
    rule : "stable" (stays in the band to the end of the budget) or "first" (the paper's).
    iterate : "last", "avg" or "end_avg".
    status : the run's status; anything but "ok" (diverged, failed) never converges.

    Returns
    -------
    dict with ``converged`` (bool), ``conv_index`` (−1 if never) and ``conv_batches``,
    ``conv_steps``, ``conv_samples``, ``conv_time`` (inf if never; ``conv_time`` is NaN
    without a wall-clock).
    """
    if iterate not in ITERATES:
        raise ValueError(f"iterate must be one of {', '.join(map(repr, ITERATES))}, got {iterate!r}")
    if fraction is not None:
        start = np.asarray(curve[ITERATES[iterate]], dtype=np.float64)
        rtol, atol = None, float(fraction) * float(start[0]) if start.size else math.inf
        if not (math.isfinite(atol) and atol > 0):
            return {"converged": False, "conv_index": -1, "conv_batches": math.inf, "conv_steps": math.inf,
                    "conv_samples": math.inf, "conv_time": math.nan}
    threshold = loss_threshold(F_star, rtol, atol)
    idx = -1
    if status == "ok" and len(curve["batches"]):
        idx = convergence_index(np.asarray(curve[ITERATES[iterate]]) + F_star, threshold, window, rule)
    time = np.asarray(curve.get("time", []), dtype=np.float64)
    has_time = time.size > 0 and bool(np.all(np.isfinite(time)))
    out = {"converged": idx >= 0, "conv_index": idx}
    for unit in ("batches", "steps", "samples"):
        out[f"conv_{unit}"] = float(curve[unit][idx]) if idx >= 0 else math.inf
    out["conv_time"] = (float(time[idx]) if idx >= 0 else math.inf) if has_time else math.nan
    return out


def tune(summary, by: str = "batches", lr: str = "optimizer.lr", params=None):
    """Per setting of everything but `lr`, the lr with the smallest median convergence time.

    Parameters
    ----------
    summary : pandas DataFrame, one row per run, with the parameter columns
        (``problem.*``, ``pipeline.*``, ``optimizer.*``, ``sweep.*``), ``repetition``
        and ``conv_batches``, ``conv_steps``, ``conv_samples``, ``conv_time``.
    by : the unit that is minimised ("batches", "steps", "samples" or "time").
    lr : the column that is tuned.
    params : the columns that define a setting (default: every parameter column but `lr`).

    Returns
    -------
    DataFrame, one row per setting: its parameters, the chosen ``optimizer.lr``
    (NaN if no lr converged on a majority of seeds), ``lr_edge`` ("low"/"high" if the
    choice is at the end of the grid, else ""; where no lr converged, if the lr with the
    smallest median final excess risk is), ``n_lr``, ``n_seeds``, ``n_converged``
    (at the chosen lr) and the medians ``conv_batches``, ``conv_steps``,
    ``conv_samples``, ``conv_time`` at the chosen lr (inf: never converged).
    """
    import pandas as pd

    if by not in UNITS:
        raise ValueError(f"by must be one of {', '.join(map(repr, UNITS))}, got {by!r}")
    if params is None:
        params = [c for c in summary.columns
                  if c.split(".")[0] in ("problem", "pipeline", "optimizer", "sweep") and "." in c and c != lr]
    params = [c for c in params if c in summary.columns]
    out_cols = [*params, lr, "lr_edge", "n_lr", "n_seeds", "n_converged",
                "conv_batches", "conv_steps", "conv_samples", "conv_time"]
    if len(summary) == 0:
        return pd.DataFrame(columns=out_cols)
    lr_all = summary[lr].to_numpy(dtype=np.float64)
    conv = {u: summary[f"conv_{u}"].to_numpy(dtype=np.float64) for u in UNITS}
    converged_all = summary["converged"].to_numpy(dtype=bool)
    final = summary["final_risk"].to_numpy(dtype=np.float64) if "final_risk" in summary else None
    if params:
        groups = summary.groupby(params, dropna=False, sort=False).indices
    else:
        groups = {(): np.arange(len(summary))}
    rows = []
    for gkey, idx in groups.items():
        gkey = gkey if isinstance(gkey, tuple) else (gkey,)
        lrs_g = lr_all[idx]
        lrs = np.unique(lrs_g)
        best = None
        for value in lrs:
            sel = idx[lrs_g == value]
            t = conv[by][sel]
            t = np.where(np.isnan(t), np.inf, t)
            rank = (float(np.median(t)), float(np.mean(t)), -int(np.isfinite(t).sum()), float(value))
            if best is None or rank < best[0]:
                best = (rank, value, sel)
        rank, value, sel = best
        row = dict(zip(params, gkey))
        converged = math.isfinite(rank[0])
        row[lr] = float(value) if converged else math.nan
        if not converged and final is not None:  # where to look: the lr that got closest
            value = min(lrs, key=lambda v: (_median_or_inf(final[idx[lrs_g == v]]), v))
        row["lr_edge"] = ("low" if value == lrs[0] else "high" if value == lrs[-1] else "") if len(lrs) > 1 else ""
        row["n_lr"] = int(len(lrs))
        row["n_seeds"] = int(len(sel))
        row["n_converged"] = int(converged_all[sel].sum()) if converged else 0
        for unit in UNITS:
            t = conv[unit][sel]
            if unit == "time" and np.all(np.isnan(t)):
                row["conv_time"] = math.nan
                continue
            row[f"conv_{unit}"] = float(np.median(np.where(np.isnan(t), np.inf, t))) if converged else math.inf
        rows.append(row)
    return pd.DataFrame(rows, columns=out_cols)


def _median_or_inf(x) -> float:
    x = x[np.isfinite(x)]
    return float(np.median(x)) if x.size else math.inf


def fit_saturation(K, T) -> dict:
    """Fit T(K) ≈ a/K + c (a, c ≥ 0) in relative least squares; K_sat = a/c.

    The digest's §3.7: the curvature term needs T ∝ 1/K fresh batches, the noise term a
    K-independent T; they are equal at K_sat. K ≪ K_sat: T ∝ 1/K, steps KT plateau
    (curvature-dominated); K ≫ K_sat: T plateaus (noise-dominated). Non-finite T are
    left out; fewer than two finite points give NaNs.
    """
    from scipy.optimize import nnls

    K = np.asarray(K, dtype=np.float64)
    T = np.asarray(T, dtype=np.float64)
    ok = np.isfinite(T) & np.isfinite(K) & (T > 0) & (K > 0)
    if ok.sum() < 2:
        return {"a": math.nan, "c": math.nan, "K_sat": math.nan}
    K, T = K[ok], T[ok]
    A = np.column_stack([1.0 / K, np.ones_like(K)]) / T[:, None]
    (a, c), _ = nnls(A, np.ones_like(T))
    K_sat = math.inf if c == 0 else a / c
    return {"a": float(a), "c": float(c), "K_sat": float(K_sat)}


def regime(K_sat: float, K_max: float) -> str:
    """A one-phrase reading of a fitted K_sat over echo factors 1 … K_max."""
    if not math.isfinite(K_sat) and math.isnan(K_sat):
        return "unknown (too few converged settings)"
    if K_sat < 1.5:
        return "noise-dominated: T, and so BT, plateaus in K"
    if K_sat >= min(4.0, K_max):
        return f"curvature-dominated up to K≈{K_sat:.3g}: T ∝ 1/K, KT plateaus"
    return f"mixed: echoing pays up to K≈{K_sat:.2g}"
