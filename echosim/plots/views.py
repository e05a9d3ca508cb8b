"""Plot data first, drawing second (benchopt's habit).

The ``*_data`` functions and `overlay` return plain dicts of arrays and labels —
``{"x", "y", "y_low", "y_high", "label"}`` for a median with its quantile band,
``{"x", "y", "label"}`` for a bound — so they can be tested, saved or drawn with any
library. The ``draw_*`` functions and `plot_results` render them with matplotlib,
which is imported only inside them (``import echosim.plots`` stays light).

x-axes: ``"batches"`` (fresh batches T), ``"steps"`` (optimizer steps), ``"samples"``
(B·T) or ``"time"`` (simulated wall-clock). A bound is a function of T, so on the
steps axis T = steps/K and on the time axis T(t) is read off the runs themselves
(the median over seeds of the fresh batches consumed by time t).
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

__all__ = [
    "median_band",
    "mean_curve",
    "method_bound",
    "echo_counts",
    "bound_curve",
    "overlay",
    "draw_overlay",
    "convergence_vs_echo_data",
    "draw_convergence_vs_echo",
    "risk_vs_time_data",
    "draw_risk_vs_time",
    "plot_results",
]

X_AXES = ("batches", "steps", "samples", "time")
X_LABELS = {"batches": "fresh batches T", "steps": "optimizer steps", "samples": "samples B·T",
            "time": "simulated wall-clock (step times)"}
Y_COLUMNS = ("risk", "risk_avg", "risk_end_avg")


# --------------------------------------------------------------------------- inputs


def _runs_as_arrays(runs) -> list[dict]:
    """Trajectories, dicts of arrays, or a curves DataFrame → list of dicts of arrays."""
    if hasattr(runs, "groupby") and hasattr(runs, "columns"):  # a curves DataFrame
        if "run_id" not in runs.columns:
            raise ValueError("a curves DataFrame needs a run_id column (echosim.experiments.tables.load(...).curves)")
        out = []
        for _, g in runs.groupby("run_id", sort=False, observed=True):
            g = g.sort_values("batches")
            out.append({c: g[c].to_numpy(dtype=np.float64) for c in (*X_AXES, *Y_COLUMNS) if c in g.columns})
        return out
    out = []
    for r in runs:
        if isinstance(r, dict):
            out.append({k: np.asarray(v, dtype=np.float64) for k, v in r.items() if v is not None})
        else:  # an echosim Trajectory
            d = {"batches": r.batches, "steps": r.steps, "risk": r.risk, "risk_avg": r.risk_avg,
                 "risk_end_avg": r.risk_end_avg}
            if r.time is not None:
                d["time"] = r.time
            B = r.info.get("batch_size") if getattr(r, "info", None) else None
            if B is not None:
                d["samples"] = np.asarray(r.batches) * B
            out.append({k: np.asarray(v, dtype=np.float64) for k, v in d.items()})
    return out


def _step_values(x, y, grid):
    """y of the last point with x <= grid (the iterate held until the next log); NaN outside."""
    idx = np.searchsorted(x, grid, side="right") - 1
    out = np.where(idx >= 0, y[np.clip(idx, 0, len(y) - 1)], np.nan)
    out[grid > x[-1]] = np.nan
    return out


def _band_label(q, n) -> str:
    lo, hi = (int(round(100 * v)) for v in q)
    return f"median, {lo}–{hi}% over {n} seed{'s' if n != 1 else ''}"


# --------------------------------------------------------------------------- overlay


def _matrix(runs, x: str, y: str):
    """(grid, Y): every run's `y` on a common `x` grid (runs with different x are read as
    step functions), kept where at least half of the runs have data."""
    if x not in X_AXES:
        raise ValueError(f"x must be one of {', '.join(X_AXES)}, got {x!r}")
    if y not in Y_COLUMNS:
        raise ValueError(f"y must be one of {', '.join(Y_COLUMNS)}, got {y!r}")
    arrays = [r for r in _runs_as_arrays(runs) if x in r and len(r[x])]
    if not arrays:
        raise ValueError(f"no runs with a {x!r} axis (time needs a pipeline; samples a batch size)")
    if any(y not in r for r in arrays):
        raise ValueError(f"the runs have no {y!r} column")
    same = all(len(r[x]) == len(arrays[0][x]) and np.array_equal(r[x], arrays[0][x]) for r in arrays)
    if same:
        grid = arrays[0][x]
        Y = np.vstack([r[y] for r in arrays])
    else:
        grid = np.unique(np.concatenate([r[x][np.isfinite(r[x])] for r in arrays]))
        Y = np.vstack([_step_values(r[x], r[y], grid) for r in arrays])
    count = np.sum(np.isfinite(Y), axis=0)
    keep = count >= max(1, math.ceil(len(arrays) / 2))
    return grid[keep], Y[:, keep], len(arrays)


@contextmanager
def _quiet():
    """All-NaN columns (no run has data there) give NaN without a warning."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def median_band(runs, x: str = "batches", y: str = "risk", q=(0.1, 0.9), label: str | None = None) -> dict:
    """Median over runs of `y` vs `x`, with the `q` quantile band, on a common x grid.

    Parameters
    ----------
    runs : Trajectories, dicts of arrays, or a curves DataFrame (several run_ids).
    x : "batches", "steps", "samples" or "time".
    y : "risk" (last iterate), "risk_avg" or "risk_end_avg" (excess risks).
    q : (low, high) quantiles of the band.
    label : a prefix for the label.

    Returns
    -------
    dict with ``x``, ``y`` (median), ``y_low``, ``y_high``, ``n`` (runs) and ``label``
    ("median, 10–90% over 20 seeds"). Where runs log different x (e.g. wall-clock),
    each run is read as a step function (its value at the last logged x) and the
    grid is kept where at least half of the runs have data.
    """
    if not (len(q) == 2 and 0 <= q[0] < q[1] <= 1):
        raise ValueError(f"q must be two quantiles 0 <= low < high <= 1, got {q!r}")
    grid, Y, n = _matrix(runs, x, y)
    with _quiet():
        med = np.nanmedian(Y, axis=0)
        lo, hi = np.nanquantile(Y, q, axis=0)
    text = _band_label(q, n)
    return {"x": grid, "y": med, "y_low": lo, "y_high": hi, "n": n,
            "label": f"{label}: {text}" if label else text}


def mean_curve(runs, x: str = "batches", y: str = "risk_avg", label: str | None = None) -> dict:
    """Mean over runs of `y` vs `x` (the statistic a bound on E[F(ŵ)] − F* is about)."""
    grid, Y, n = _matrix(runs, x, y)
    with _quiet():
        mean = np.nanmean(Y, axis=0)
    which = {"risk": "last iterate", "risk_avg": "average iterate", "risk_end_avg": "average of batch ends"}[y]
    text = f"mean of the {which} over {n} seed{'s' if n != 1 else ''}"
    return {"x": grid, "y": mean, "n": n, "label": f"{label}: {text}" if label else text}


_ITERATE_COLUMN = {"last": "risk", "avg": "risk_avg", "end_avg": "risk_end_avg"}


def method_bound(method: str, hyper: dict | None = None) -> tuple[str | None, str]:
    """(the `theory` bound of a run of `method` with hyper-parameters `hyper`, or None where
    no theorem covers it; the curve column of the iterate that bound is about)."""
    from echosim.training.methods import get_method

    m = get_method(method)
    return m.bound_for(hyper or {}), _ITERATE_COLUMN[m.iterate]


def echo_counts(runs) -> tuple[float | None, np.ndarray | None, str]:
    """(K, None, "") when every run takes K steps on every fresh batch; (None, K_t, "") with
    K_t an array (runs × batches, 0 past a run's end) when the step counts vary; (None,
    None, reason) when the log does not give every batch's step count."""
    series = []
    for r in _runs_as_arrays(runs):
        if "steps" not in r or "batches" not in r or not len(r["batches"]):
            return None, None, "the runs have no step counts"
        b, st = r["batches"].astype(np.int64), r["steps"]
        last = np.r_[b[1:] != b[:-1], True]  # the last logged point of each fresh batch
        b_end, s_end = b[last], st[last]
        if b_end[0] != 0:
            b_end, s_end = np.r_[0, b_end], np.r_[0.0, s_end]
        if not np.array_equal(b_end, np.arange(b_end[-1] + 1)):
            return None, None, "the log skips fresh batches, so their step counts K_t are unknown"
        series.append(np.diff(s_end))
    if not series:
        return None, None, "no runs"
    flat = np.concatenate(series)
    if flat.size and np.all(flat == flat[0]):
        return float(flat[0]), None, ""
    K_t = np.zeros((len(series), max(len(k) for k in series)))
    for i, k in enumerate(series):
        K_t[i, :len(k)] = k
    return None, K_t, ""


def bound_curve(constants: dict, batch_size: int, T, *, lr: float, echo: float | None = 1.0, K_t=None,
                bound: str = "echoed_gd_bound", lam: float | None = None, x=None, label: str | None = None) -> dict:
    """The theory bound on E[F(ŵ)] − F* after T fresh batches, at the run's own step size.

    Parameters
    ----------
    constants : ``{"beta", "rho", "D"}`` (``problem.constants()``).
    batch_size : B.
    T : fresh batches at each point (> 0).
    lr : the run's step size η. Every bound here assumes η ≤ 1/β; above it no bound is
        drawn (``reason`` says why).
    echo : K, the steps on every fresh batch; or `K_t`: each run's steps per fresh batch
        (runs × batches), bounded with its own Σ K_t and Σ K_t² (``variable_echo_bound``,
        echoed GD only) and averaged over the runs.
    bound : the `theory` function: ``echoed_gd_bound`` (its fixed-step form),
        ``echoed_prox_bound`` (with `lam` and inner step lr) or ``echoed_agd_bound``.
    x : abscissae for the points (default T).

    Returns
    -------
    dict with ``x``, ``y``, ``label`` and ``reason`` ("" when drawn; else why no bound
    applies, and ``x``, ``y`` empty).
    """
    import theory

    T = np.asarray(T, dtype=np.float64)
    x = T if x is None else np.asarray(x, dtype=np.float64)
    ok = np.isfinite(T) & (T > 0)
    beta, rho, D = (float(constants[k]) for k in ("beta", "rho", "D"))
    base = f"{label}: " if label else ""

    def none(reason):
        return {"x": np.zeros(0), "y": np.zeros(0), "label": base + "no bound", "reason": reason}

    if lr is None or not math.isfinite(lr) or lr <= 0:
        return none("no fixed step size (a schedule): the bounds here take one step size")
    if lr > 1.0 / beta * (1 + 1e-12):
        return none(f"lr = {lr:.3g} > 1/β = {1 / beta:.3g}: outside every theorem's step range")
    kw = dict(beta=beta, rho=rho, D=D, B=float(batch_size))
    try:
        if K_t is not None:
            if bound != "echoed_gd_bound":
                return none("variable K_t: only echoed GD has a variable-echo bound")
            K_t = np.atleast_2d(np.asarray(K_t, dtype=np.float64))
            t = T[ok].astype(np.int64)
            t = t[t <= K_t.shape[1]]
            mask = np.arange(K_t.shape[1])[None, :] < t[:, None]  # horizons × batches
            y = np.mean([theory.variable_echo_bound(**kw, K_t=np.where(mask, k[None, :], 0.0), lr=lr) for k in K_t],
                        axis=0)
            xs = x[ok][: len(t)]
            form = f"η = {lr:.3g}, own K_t"
        else:
            K = max(1.0, float(echo if echo is not None else 1.0))
            kw.update(T=T[ok], K=K)
            if bound == "echoed_gd_bound":
                y = theory.echoed_gd_bound(**kw, lr=lr)
            elif bound == "echoed_prox_bound":
                y = theory.echoed_prox_bound(**kw, lam=lam, inner_lr=lr)
            elif bound == "echoed_agd_bound":
                y = theory.echoed_agd_bound(**kw, lr=lr)
            else:
                return none(f"unknown bound {bound!r}")
            xs = x[ok]
            form = f"η = {lr:.3g}"
    except ValueError as exc:  # a parameter outside the bound's assumptions
        return none(" ".join(str(exc).split()))
    text = f"bound {bound.removesuffix('_bound')}, {form}"
    return {"x": xs, "y": np.atleast_1d(np.asarray(y, dtype=np.float64)), "label": base + text, "reason": ""}


def overlay(runs, constants: dict, *, batch_size: int, lr: float, echo: float | None = None, x: str = "batches",
            y: str = "risk", q=(0.1, 0.9), method: str | None = None, hyper: dict | None = None,
            label: str | None = None, constants_kind: str = "almost sure") -> dict:
    """The runs of one setting (several seeds) and the bound that applies to them, on one x-axis.

    Returns ``{"median": median_band(y), "mean": mean_curve of the iterate the bound is
    about (None without a bound), "bound": bound_curve(...)}``. The bound is drawn only
    where one applies: a method with a derivation (`method_bound`), the run's own step
    size at most 1/β, and the run's own step counts (`echo`, else read off the runs:
    a constant K, or each run's K_t), and constants that hold almost surely (with
    `constants_kind` "mean square", a Gaussian design, the bounds' assumptions fail:
    docs/background/problems.md). Otherwise ``bound["reason"]`` says why not. `method`
    defaults to `echosim.training.methods.DEFAULT_METHOD`.
    """
    if method is None:
        from echosim.training.methods import DEFAULT_METHOD

        method = DEFAULT_METHOD
    band = median_band(runs, x=x, y=y, q=q, label=label)
    name, column = method_bound(method, hyper)
    if name is not None and constants_kind != "almost sure":
        return {"median": band, "mean": None,
                "bound": {"x": np.zeros(0), "y": np.zeros(0), "label": "no bound",
                          "reason": f"{constants_kind} constants: the bounds assume almost-sure ones"}}
    if name is None:
        return {"median": band, "mean": None,
                "bound": {"x": np.zeros(0), "y": np.zeros(0), "label": "no bound",
                          "reason": f"no theorem covers {method} with these settings"}}
    K_t, reason = None, ""
    if echo is None:
        echo, K_t, reason = echo_counts(runs)
    mean = mean_curve(runs, x=x, y=column)
    if reason:
        return {"median": band, "mean": mean, "bound": {"x": np.zeros(0), "y": np.zeros(0), "label": "no bound",
                                                        "reason": reason}}
    arrays = [r for r in _runs_as_arrays(runs) if x in r and len(r[x])]
    K_mean = echo if echo is not None else float(np.mean(K_t[K_t > 0]))
    if x == "batches":
        T = mean["x"]
    elif x == "steps":
        T = mean["x"] / K_mean
    elif x == "samples":
        T = mean["x"] / batch_size
    else:  # time: the median over runs of the fresh batches consumed by each time (interpolated)
        Ts = np.vstack([np.where(mean["x"] <= r["time"][-1], np.interp(mean["x"], r["time"], r["batches"]), np.nan)
                        for r in arrays])
        with _quiet():
            T = np.nanmedian(Ts, axis=0)
    if K_t is not None:
        T = np.floor(T)  # whole batches: the variable-echo bound sums the first T step counts
    bound = bound_curve(constants, batch_size, T, lr=lr, echo=echo, K_t=K_t, bound=name,
                        lam=(hyper or {}).get("lam"), x=mean["x"], label=label)
    return {"median": band, "mean": mean, "bound": bound}


def draw_overlay(ax, data: dict, color=None, target: float | None = None) -> None:
    """Draw an `overlay` dict on a matplotlib Axes: median line and shaded band; where a
    bound applies, the mean of the iterate it is about (thin) and the bound (dashed)."""
    m = data["median"]
    b = data.get("bound") or {}
    label = m["label"] + (" (no bound: lr > 1/β)" if "1/β" in b.get("reason", "") else "")
    line, = ax.plot(m["x"], m["y"], color=color, lw=1.6, label=label)
    ax.fill_between(m["x"], m["y_low"], m["y_high"], color=line.get_color(), alpha=0.2, lw=0)
    if b and len(b.get("x", ())):
        mean = data.get("mean")
        if mean is not None and mean is not m:
            ax.plot(mean["x"], mean["y"], color=line.get_color(), lw=0.9, ls=":", label=mean["label"])
        ax.plot(b["x"], b["y"], ls="--", lw=1.2, color=line.get_color(), label=b["label"])
    if target is not None:
        ax.axhline(target, color="0.4", ls=":", lw=1)


# --------------------------------------------------------------------------- figures from results


def convergence_vs_echo_data(tuned) -> list[dict]:
    """Per batch size B: K and, at the tuned lr, the median KT, BT, wall-clock and lr*.

    Returns a list of panels ``{"B", "K", "KT", "BT", "time", "lr", "converged"}``
    (arrays over K; inf where the target was never reached).
    """
    need = {"optimizer.batch_size", "optimizer.echo", "optimizer.lr", "conv_steps", "conv_samples"}
    missing = need - set(tuned.columns)
    if missing:
        raise ValueError(f"the tuned table lacks {sorted(missing)} (it needs batch size and echo columns)")
    panels = []
    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo")
        if len(g) > g["optimizer.echo"].nunique():  # other axes vary too: keep the first of each K
            g = g.drop_duplicates("optimizer.echo")
        panels.append({
            "B": int(B),
            "K": g["optimizer.echo"].to_numpy(dtype=float),
            "KT": g["conv_steps"].to_numpy(dtype=float),
            "BT": g["conv_samples"].to_numpy(dtype=float),
            "time": g["conv_time"].to_numpy(dtype=float) if "conv_time" in g else np.full(len(g), np.nan),
            "lr": g["optimizer.lr"].to_numpy(dtype=float),
            "converged": np.isfinite(g["conv_steps"].to_numpy(dtype=float)),
        })
    return panels


def _figure(n_panels: int, width=4.2, height=3.4):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n_panels, height), layout="constrained")
    axes = fig.subplots(1, n_panels, squeeze=False)[0]
    return fig, axes


def _save(fig, stem: Path, formats) -> list[Path]:
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = stem.with_suffix(f".{fmt}")
        fig.savefig(p, dpi=130)
        paths.append(p)
    return paths


def draw_echo_panel(ax, K, series, lr, never, title):
    """One Figure-2 panel: convergence times vs K on log axes, the tuned lr on a right axis.

    `series`: (values, low, high, color, label) tuples, low/high None for no band;
    `never`: the K never converged, listed in the panel. Returns the right axis.
    """
    for values, low, high, color, label in series:
        ok = np.isfinite(values)
        if ok.any():
            ax.plot(K[ok], values[ok], "o-", color=color, label=label, ms=4)
        if low is not None:
            hi = np.where(np.isfinite(high), high, np.nan)
            ax.fill_between(K[ok], low[ok], hi[ok], color=color, alpha=0.2, lw=0)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(K.min() / 1.3, K.max() * 1.3)
    if not any(np.isfinite(values).any() for values, *_ in series):
        ax.set_ylim(1, 10)  # nothing converged: an empty log axis needs a range
    ax.set_xticks(K, [f"{k:g}" for k in K])
    ax.set_xlabel("echo factor K")
    ax.set_title(title, fontsize=10)
    if len(never):
        ax.text(0.02, 0.02, "never converged: K = " + ", ".join(f"{k:g}" for k in never),
                transform=ax.transAxes, fontsize=7)
    ax2 = ax.twinx()
    ok = np.isfinite(lr)
    ax2.plot(K[ok], lr[ok], "s--", color="tab:orange", ms=3, label="tuned lr")
    ax2.set_yscale("log")
    if not ok.any():
        ax2.set_ylim(0.01, 10)
    return ax2


def draw_convergence_vs_echo(panels: list[dict]):
    """Figure-2 style: per B, convergence time vs K in KT (blue), BT (red) and wall-clock
    (green), with the tuned lr (orange, right axis). Points never converged are omitted
    and listed in the panel. Returns the matplotlib Figure."""
    fig, axes = _figure(len(panels))
    for ax, p in zip(axes, panels):
        series = [(p[key], None, None, color, name) for key, color, name in (
            ("KT", "tab:blue", "steps KT"), ("BT", "tab:red", "samples BT"), ("time", "tab:green", "wall-clock"))]
        ax2 = draw_echo_panel(ax, p["K"], series, p["lr"], p["K"][~p["converged"]], f"B = {p['B']}")
        ax2.set_ylabel("tuned learning rate", color="tab:orange")
        if ax is axes[0]:
            lr_handles = ax2.get_legend_handles_labels()
    axes[0].set_ylabel("convergence time")
    h1, l1 = axes[0].get_legend_handles_labels()
    axes[0].legend(h1 + lr_handles[0], l1 + lr_handles[1], fontsize=7, loc="best")
    fig.suptitle("convergence time vs echo factor (lr tuned per (B, K))", fontsize=10)
    return fig


def risk_vs_time_data(summary, curves, tuned, *, x: str | None = None, y: str | None = None, q=(0.1, 0.9),
                      max_curves: int = 3, echoes=None) -> list[dict]:
    """Per B, overlays (median, band, bound) at the tuned lr for up to `max_curves` echo factors.

    The echo factors shown are `echoes` if given (every one of them the sweep has; an
    unknown K is an error naming the ones there are), else the smallest, the largest and
    the one with the shortest wall-clock (or fewest fresh batches) to target. `x`
    defaults to "time" when the runs have a pipeline, else "batches".
    """
    if echoes is not None:
        have = set(tuned["optimizer.echo"].dropna()) if "optimizer.echo" in tuned.columns else set()
        missing = [k for k in echoes if k not in have]
        if missing:
            raise ValueError(f"echo: the sweep has no K = {', '.join(f'{k:g}' for k in missing)}; it has K = "
                             f"{', '.join(f'{k:g}' for k in sorted(have)) or 'none'}")
    if x is None:
        x = "time" if "conv_time" in tuned.columns and tuned["conv_time"].notna().any() else "batches"
    if y is None:  # the iterate the convergence target tracks
        iterate = summary["target.iterate"].iloc[0] if "target.iterate" in summary.columns else "last"
        y = {"last": "risk", "avg": "risk_avg", "end_avg": "risk_end_avg"}.get(iterate, "risk")
    panels = []
    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[np.isfinite(g["optimizer.lr"].to_numpy(dtype=float))]
        if "optimizer.echo" in g.columns:
            g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo").drop_duplicates("optimizer.echo")
        if not len(g):
            continue
        unit = "conv_time" if x == "time" else "conv_batches"
        if echoes is not None:
            picks = [i for i, k in enumerate(g["optimizer.echo"]) if k in set(echoes)]
        else:
            picks = [0, len(g) - 1, int(np.argmin(g[unit].to_numpy(dtype=float)))]
            picks = list(dict.fromkeys(picks))[:max_curves]
        overlays = []
        for i in picks:
            row = g.iloc[i]
            sel = (summary["optimizer.batch_size"] == B) & (summary["optimizer.lr"] == row["optimizer.lr"])
            if "optimizer.echo" in g.columns:
                sel &= summary["optimizer.echo"] == row["optimizer.echo"]
            ids = set(summary.loc[sel & (summary["status"] != "failed"), "run_id"])
            sub = curves[curves["run_id"].isin(ids)]
            if not len(sub):
                continue
            srow = summary.loc[sel].iloc[0]
            K = float(row["optimizer.echo"]) if "optimizer.echo" in g.columns else None
            label = f"K={K:g}, lr={row['optimizer.lr']:.3g}" if K is not None else f"lr={row['optimizer.lr']:.3g}"
            hyper = {k.split(".", 1)[1]: v for k, v in srow.items()
                     if k.startswith("optimizer.") and k not in ("optimizer.lr", "optimizer.method", "optimizer.batch_size",
                                                              "optimizer.echo", "optimizer.lr_rule")
                     and v is not None and not (isinstance(v, float) and math.isnan(v))}
            kind = srow.get("constants_kind", "almost sure")
            ov = overlay(sub, {"beta": srow["beta"], "rho": srow["rho"], "D": srow["D"]}, batch_size=int(B),
                         x=x, y=y, q=q, method=str(srow["optimizer.method"]), hyper=hyper,
                         lr=float(row["optimizer.lr"]), label=label,
                         constants_kind=kind if isinstance(kind, str) and kind else "almost sure")
            overlays.append(ov)
        srow = summary[summary["optimizer.batch_size"] == B].iloc[0]
        target = _target_excess(srow)
        panels.append({"B": int(B), "x": x, "y": y, "overlays": overlays, "target": target})
    return panels


def _target_excess(row) -> float | None:
    """The excess-risk level of the convergence target of a summary row."""
    atol, rtol = row.get("target.atol"), row.get("target.rtol")
    if atol is not None and np.isfinite(atol):
        return float(atol)
    if rtol is not None and np.isfinite(rtol):
        return float(rtol) * float(row["F_star"])
    return None


def draw_risk_vs_time(panels: list[dict]):
    """Excess risk vs x per B: median and band of the runs; where a bound applies, the mean
    of the iterate it is about and the bound, dashed; the target dotted. Returns the Figure."""
    fig, axes = _figure(len(panels), width=4.8, height=3.6)
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, p in zip(axes, panels):
        for ov, c in zip(p["overlays"], colors):
            draw_overlay(ax, ov, color=c)
        if p["target"] is not None:
            ax.axhline(p["target"], color="0.3", ls=":", lw=1, label="target")
        ax.set_yscale("log")
        ax.set_xscale("log")
        ax.set_xlabel(X_LABELS[p["x"]] + " (log)")
        ax.set_title(f"B = {p['B']}")
        ax.legend(fontsize=6, loc="lower left")
    which = {"risk": "last iterate", "risk_avg": "average iterate", "risk_end_avg": "average of batch ends"}
    axes[0].set_ylabel(f"excess risk F(w) − F* ({which[panels[0].get('y', 'risk')]})")
    drawn = any(len(ov["bound"]["x"]) for p in panels for ov in p["overlays"])
    reasons = sorted({_short_reason(ov["bound"]["reason"]) for p in panels for ov in p["overlays"]
                      if ov["bound"]["reason"]})
    fig.suptitle("excess risk at the tuned lr (median and 10–90% band over seeds), target dotted\n"
                 + ("where a bound applies: the mean of the iterate it bounds (thin) and the bound at the run's own "
                    "step (dashed)" if drawn else "no bound drawn: " + "; ".join(reasons)), fontsize=9)
    return fig


def _short_reason(reason: str) -> str:
    if "1/β" in reason:
        return "steps above 1/β"
    if "constants" in reason:
        return reason.split(":")[0] + " (the bounds assume almost-sure ones)"
    return reason


def plot_results(path, out=None, formats=("png", "pdf"), echoes=None) -> list[Path]:
    """The standard figures of a results directory; returns the files written.

    `echoes`: the echo factors K whose risk curves to draw (default: the smallest, the
    largest and the fastest of each batch size).

    ``convergence_vs_echo``: convergence time vs K per B in KT, BT and wall-clock, tuned
    lr on the right axis (needs batch size and echo columns). ``risk_vs_time``: excess
    risk vs wall-clock (fresh batches without a pipeline) at the tuned lr, median and
    10–90% band over seeds, with the theory bound.
    """
    from echosim.experiments.tables import load

    for f in formats:
        if f not in ("png", "pdf", "svg"):
            raise ValueError(f"format must be png, pdf or svg, got {f!r}")
    res = load(path)
    out = Path(out) if out is not None else Path(path)
    written = []
    if len(res.tuned) and {"optimizer.batch_size", "optimizer.echo"} <= set(res.tuned.columns):
        written += _save(draw_convergence_vs_echo(convergence_vs_echo_data(res.tuned)), out / "convergence_vs_echo",
                         formats)
    if len(res.tuned) and "optimizer.batch_size" in res.tuned.columns and res.curves is not None and len(res.curves):
        panels = [p for p in risk_vs_time_data(res.summary, res.curves, res.tuned, echoes=echoes) if p["overlays"]]
        if panels:
            written += _save(draw_risk_vs_time(panels), out / "risk_vs_time", formats)
    if not written:
        raise ValueError(f"{str(path)!r}: nothing to plot (no run converged, or no batch-size column)")
    return written
