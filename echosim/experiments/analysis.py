"""Convergence time, learning-rate tuning and the saturation fit.

Convergence time. The loss is F(w) = excess risk + F*; at logged point i the
trailing mean is the mean of the losses at points i−window+1 … i (a full window is
required; the default window is one point, the loss itself). A point is *inside* the
band when that mean is ≤ (1 + rtol)·F* (or ≤ F* + atol). When a run counts as
converged is the `rule` (`RULES`):

- ``"hold"`` (the default, `DEFAULT_RULE`): the first logged point that is inside the
  band and stays inside at every logged point of the next ``hold`` fresh batches
  (`DEFAULT_HOLD`). It needs ``hold`` batches of log past that point; it does not
  depend on the rest of the budget, so T is the same for every budget that covers
  T + hold batches, and a step that only passes through the band does not count.
  Logged at every fresh batch (the default sweep), T is resolved to one batch
  whatever the budget; a finer log resolves it finer.
- ``"first"``: the first point inside the band (Agarwal et al. §4, "the first point
  where the trailing mean of ten training losses is within 1% of globally optimal
  training loss", with ``window = 10``).
- ``"stable"``: inside from that point to the end of the budget. T then grows with the
  budget (a longer budget has more room for one late excursion); kept for comparison.

A run that never converges, or diverged, has convergence time +inf — kept in the
tables, never dropped and never NaN. The time is reported in four units: fresh
batches T, optimizer steps KT, samples BT and simulated wall-clock.

Tuning (`tune`): for every setting of everything but the learning rate, the chosen lr
minimises the median convergence time over the seeds; ties (common: T counts whole
batches) go to the smaller upper quartile, then the smaller 90% quantile, then more
seeds converged, and a plateau of lrs that still tie is resolved at its middle, the
choice least likely to change with another set of seeds (at a plateau's ends one
seed's excursion tips the cell). Every run is kept; the tuned table points at the
chosen lr and carries each seed's time there.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from echosim._validate import check_int, is_int

__all__ = [
    "ITERATES",
    "UNITS",
    "RULES",
    "DEFAULT_RULE",
    "DEFAULT_HOLD",
    "DEFAULT_WINDOW",
    "DEFAULT_RTOL",
    "trailing_mean",
    "loss_threshold",
    "convergence_index",
    "convergence",
    "analysis_settings",
    "run_convergence",
    "tune",
    "median_interval",
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
    check_int("window", window, lo=1)
    out = np.full(v.shape, np.nan)
    if v.size >= window:
        out[window - 1:] = np.lib.stride_tricks.sliding_window_view(v, window).mean(axis=1)
    return out


DEFAULT_RTOL = 0.01
"""The target of every sweep, figure and run that states none: loss <= (1 + rtol)·F*."""


def loss_threshold(F_star: float, rtol: float | None = DEFAULT_RTOL, atol: float | None = None) -> float:
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


RULES = ("hold", "first", "stable")
"""When a run counts as converged (see the module docstring)."""
DEFAULT_RULE = "hold"
"""The convergence rule of every sweep, figure and run that does not name one."""
DEFAULT_HOLD = 20
"""Fresh batches a run must stay inside the band under the "hold" rule."""
DEFAULT_WINDOW = 1
"""Logged points in the trailing mean (1: the loss itself)."""


def convergence_index(loss, threshold: float, window: int = DEFAULT_WINDOW, rule: str = DEFAULT_RULE,
                      batches=None, hold: int = DEFAULT_HOLD) -> int:
    """The logged point where the trailing mean reaches the threshold by `rule`; −1 if none.

    "hold": the first point inside the band from which every point with at most
    ``batches[i] + hold`` fresh batches is inside too, provided the log reaches that
    far (`batches`, the fresh-batch count of each point, is required). "first": the
    first point inside. "stable": the first point from which every point to the end
    is inside.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(map(repr, RULES))}, got {rule!r}")
    m = trailing_mean(loss, window)
    inside = m <= threshold
    if rule == "first":
        hit = np.nonzero(inside)[0]
        return int(hit[0]) if hit.size else -1
    if rule == "stable":
        if not inside.size or not inside[-1]:
            return -1
        outside = np.nonzero(~inside)[0]
        return int(outside[-1]) + 1 if outside.size else 0
    if not is_int(hold) or hold < 0:
        raise ValueError(f"hold must be an integer >= 0 (fresh batches), got {hold!r}")
    if batches is None:
        raise ValueError("the hold rule needs the fresh-batch count of every logged point (batches)")
    b = np.asarray(batches, dtype=np.int64)
    if b.shape != inside.shape:
        raise ValueError(f"batches has {b.size} points, the loss {inside.size}")
    if not b.size:
        return -1
    ends = np.searchsorted(b, b + hold, side="right")  # one past the last point of the hold
    n_inside = np.concatenate([[0], np.cumsum(inside)])
    i = np.arange(b.size)
    held = inside & (b + hold <= b[-1]) & (n_inside[ends] - n_inside[i] == ends - i)
    hit = np.nonzero(held)[0]
    return int(hit[0]) if hit.size else -1


def convergence(curve: Mapping[str, np.ndarray], F_star: float, *, rtol: float | None = DEFAULT_RTOL,
                atol: float | None = None, fraction: float | None = None, window: int = DEFAULT_WINDOW,
                iterate: str = "last", status: str = "ok", rule: str = DEFAULT_RULE,
                hold: int = DEFAULT_HOLD) -> dict:
    """Convergence time of one run in every unit.

    Parameters
    ----------
    curve : mapping with arrays ``batches``, ``steps``, ``samples``, ``time`` (NaN
        without a pipeline) and the excess risks ``risk``, ``risk_avg``, ``risk_end_avg``.
    F_star : F*, so that loss = excess risk + F*.
    rtol, atol, fraction : the target (one of them): loss ≤ (1 + rtol)·F*, excess risk
        ≤ atol, or excess risk ≤ fraction × the excess risk at the first logged point (w₀).
    window : trailing-mean window in logged points.
    rule : "hold" (inside and staying inside for `hold` fresh batches), "first" (the
        paper's) or "stable" (inside to the end of the budget).
    hold : fresh batches of the "hold" rule.
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
        idx = convergence_index(np.asarray(curve[ITERATES[iterate]]) + F_star, threshold, window, rule,
                                batches=curve["batches"], hold=hold)
    time = np.asarray(curve.get("time", []), dtype=np.float64)
    has_time = time.size > 0 and bool(np.all(np.isfinite(time)))
    out = {"converged": idx >= 0, "conv_index": idx}
    for unit in ("batches", "steps", "samples"):
        out[f"conv_{unit}"] = float(curve[unit][idx]) if idx >= 0 else math.inf
    out["conv_time"] = (float(time[idx]) if idx >= 0 else math.inf) if has_time else math.nan
    return out


def analysis_settings(settings: Mapping | None = None) -> dict:
    """A sweep's analysis settings with every key present: the target (rtol, atol or
    fraction; rtol = `DEFAULT_RTOL` if none is given), window, rule, hold, iterate and tune_by.
    Keys of `settings` that are missing or None take the defaults defined here."""
    given = dict(settings or {})
    out = {"rtol": given.get("rtol"), "atol": given.get("atol"), "fraction": given.get("fraction")}
    if all(v is None for v in out.values()):
        out["rtol"] = DEFAULT_RTOL
    defaults = {"window": DEFAULT_WINDOW, "rule": DEFAULT_RULE, "hold": DEFAULT_HOLD, "iterate": "last",
                "tune_by": "batches"}
    for k, v in defaults.items():
        out[k] = v if given.get(k) is None else given[k]
    return out


def run_convergence(row: Mapping, curves: Mapping | None, settings: Mapping | None = None) -> dict:
    """`convergence` of one stored run (its summary row and curves) under a sweep's
    analysis settings (`analysis_settings`). A failed run, or one without curves or F*,
    never converged."""
    s = analysis_settings(settings)
    F_star = row.get("F_star")
    status = row.get("status", "failed")
    if curves is None or status == "failed" or F_star is None or not math.isfinite(F_star):
        has_time = row.get("pipeline.policy") is not None
        return {"converged": False, "conv_index": -1, "conv_batches": math.inf, "conv_steps": math.inf,
                "conv_samples": math.inf, "conv_time": math.inf if has_time else math.nan}
    return convergence(curves, F_star, rtol=s["rtol"], atol=s["atol"], fraction=s["fraction"], window=s["window"],
                       iterate=s["iterate"], status=status, rule=s["rule"], hold=s["hold"])


def _order_stat(t: np.ndarray, q: float) -> float:
    """The q-quantile of `t` as one of its values (inf allowed: a seed that never got there)."""
    t = np.sort(t)
    return float(t[min(t.size - 1, max(0, math.ceil(q * t.size) - 1))])


def _rank(t: np.ndarray) -> tuple:
    """How good a learning rate is from its seeds' times (smaller is better): the median,
    then the upper quartile and 90% quantile (fewer slow seeds), then more seeds converged."""
    with np.errstate(invalid="ignore"):
        med = float(np.median(t))
    return (med, _order_stat(t, 0.75), _order_stat(t, 0.9), -int(np.isfinite(t).sum()))


def median_interval(values, level: float = 0.9) -> tuple[float, float]:
    """A distribution-free interval for the median of the law the `values` came from.

    The order statistics (t_(l), t_(n+1−l)) with the largest l whose binomial coverage
    P(l <= Binomial(n, 1/2) <= n − l) is at least `level`; for fewer than 5 values no such
    l exists and the interval is (min, max) with lower coverage. inf (never) is a value.
    """
    t = np.asarray(values, dtype=np.float64)
    t = np.sort(np.where(np.isnan(t), np.inf, t))
    n = t.size
    if n == 0:
        return math.nan, math.nan
    best = 1
    for l in range(1, n // 2 + 1):
        if sum(math.comb(n, j) for j in range(l, n - l + 1)) >= level * 2**n:
            best = l
    return float(t[best - 1]), float(t[n - best])


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
    DataFrame, one row per setting: its parameters, the chosen ``optimizer.lr`` (NaN if
    no lr converged on a majority of seeds), ``lr_edge`` ("low"/"high" if the choice is at
    the end of the grid, else ""; where no lr converged, if the lr with the smallest
    median final excess risk is; or if the lrs that tie with the choice reach the end),
    ``n_lr``, ``n_tied`` (lrs that tie with the choice on every criterion), ``n_seeds``, ``n_converged`` (at the chosen lr), the medians
    ``conv_batches``, ``conv_steps``, ``conv_samples``, ``conv_time`` at the chosen lr
    (inf: never converged), ``seeds_batches`` (each seed's T there, in repetition
    order) and ``conv_batches_low``/``conv_batches_high``, a 90% distribution-free
    interval for the median T (`median_interval`).

    Ties are resolved as the module docstring says: (median, upper quartile, 90%
    quantile, more seeds converged), then the tied lr nearest the middle of the tied
    range on the log scale.
    """
    import pandas as pd

    if by not in UNITS:
        raise ValueError(f"by must be one of {', '.join(map(repr, UNITS))}, got {by!r}")
    if params is None:
        params = [c for c in summary.columns
                  if c.split(".")[0] in ("problem", "pipeline", "optimizer", "sweep") and "." in c and c != lr]
    params = [c for c in params if c in summary.columns]
    out_cols = [*params, lr, "lr_edge", "n_lr", "n_tied", "n_seeds", "n_converged",
                "conv_batches", "conv_steps", "conv_samples", "conv_time",
                "conv_batches_low", "conv_batches_high", "seeds_batches"]
    if len(summary) == 0:
        return pd.DataFrame(columns=out_cols)
    lr_all = summary[lr].to_numpy(dtype=np.float64)
    conv = {u: summary[f"conv_{u}"].to_numpy(dtype=np.float64) for u in UNITS}
    converged_all = summary["converged"].to_numpy(dtype=bool)
    final = summary["final_risk"].to_numpy(dtype=np.float64) if "final_risk" in summary else None
    reps = summary["repetition"].to_numpy() if "repetition" in summary else np.zeros(len(summary))
    if params:
        groups = summary.groupby(params, dropna=False, sort=False).indices
    else:
        groups = {(): np.arange(len(summary))}
    rows = []
    for gkey, idx in groups.items():
        gkey = gkey if isinstance(gkey, tuple) else (gkey,)
        lrs_g = lr_all[idx]
        lrs = np.unique(lrs_g)
        ranks = []
        for value in lrs:
            t = conv[by][idx[lrs_g == value]]
            ranks.append(_rank(np.where(np.isnan(t), np.inf, t)))
        best = min(ranks)
        tied = [i for i, r in enumerate(ranks) if r == best]
        centre = math.sqrt(lrs[tied[0]] * lrs[tied[-1]])  # the plateau's middle on the log scale
        value = lrs[min(tied, key=lambda i: (abs(math.log(lrs[i] / centre)) if centre > 0 else lrs[i], i))]
        sel = idx[lrs_g == value]
        sel = sel[np.argsort(reps[sel], kind="stable")]
        row = dict(zip(params, gkey))
        converged = math.isfinite(best[0])
        row[lr] = float(value) if converged else math.nan
        if not converged and final is not None:  # where to look: the lr that got closest
            value = min(lrs, key=lambda v: (_median_or_inf(final[idx[lrs_g == v]]), v))
        # at the edge: the choice, or the plateau of lrs tying with it (its middle is not known yet)
        lo, hi = (lrs[tied[0]], lrs[tied[-1]]) if converged else (value, value)
        row["lr_edge"] = ("low" if lo == lrs[0] else "high" if hi == lrs[-1] else "") if len(lrs) > 1 else ""
        row["n_lr"] = int(len(lrs))
        row["n_tied"] = len(tied) if converged else 0
        row["n_seeds"] = int(len(sel))
        row["n_converged"] = int(converged_all[sel].sum()) if converged else 0
        for unit in UNITS:
            t = conv[unit][sel]
            if unit == "time" and np.all(np.isnan(t)):
                row["conv_time"] = math.nan
                continue
            row[f"conv_{unit}"] = float(np.median(np.where(np.isnan(t), np.inf, t))) if converged else math.inf
        t = np.where(np.isnan(conv["batches"][sel]), np.inf, conv["batches"][sel])
        row["conv_batches_low"], row["conv_batches_high"] = median_interval(t) if converged else (math.inf, math.inf)
        row["seeds_batches"] = [float(v) for v in t]
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
