"""Every docs figure is a sweep plus a view (``python -m echosim figures``).

A figure is a config in the sweep's own schema (``figure_configs/<name>.toml``, each
with a ``[quick]`` variant), run by `echosim.experiments.sweep.run_sweep` into the
shared run store, so figures resume and reuse finished runs; its view turns the
sweep's tables (one row per run, one row per logged point, the tuned table) into plot
data, and its drawing function turns that into a matplotlib Figure (imported only
there, with the Agg backend).

====================  ====================================================================
figure                what it shows
====================  ====================================================================
convergence_vs_echo   the paper's Figure 2 on real data: convergence time vs K per B, in
                      steps KT and samples BT, with the learning rate tuned per (B, K)
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
import math
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


def _per_seed(summary, by: list[str], value: str) -> dict:
    """{setting tuple: array over repetitions (in repetition order)} of column `value`."""
    out = {}
    for key, g in summary.sort_values("repetition").groupby(by, sort=True, dropna=False):
        out[key if isinstance(key, tuple) else (key,)] = g[value].to_numpy(dtype=np.float64)
    return out


# --------------------------------------------------------------------------- figure 1


def convergence_vs_echo_view(summary, curves, tuned) -> dict:
    """Per B: KT and BT to target (median and band over seeds) at the tuned lr per K."""
    panels = []
    for B, g in tuned.sort_values(["optimizer.batch_size", "optimizer.echo"]).groupby("optimizer.batch_size"):
        K = g["optimizer.echo"].to_numpy(dtype=float)
        p = {"B": int(B), "K": K, "lr": g["optimizer.lr"].to_numpy(dtype=float),
             "lr_edge": list(g["lr_edge"]), "converged": np.zeros(len(K), dtype=int)}
        for key in ("KT", "BT"):
            for part in ("", "_low", "_high"):
                p[key + part] = np.full(len(K), np.inf)
        for j, (k, lr) in enumerate(zip(K, p["lr"])):
            if not math.isfinite(lr):
                continue  # no lr converged on a majority of seeds: "never"
            rows = summary[(summary["optimizer.batch_size"] == B) & (summary["optimizer.echo"] == k)
                           & (summary["optimizer.lr"] == lr)]
            p["converged"][j] = int(rows["converged"].sum())
            p["KT"][j], p["KT_low"][j], p["KT_high"][j] = _quantiles(rows["conv_steps"])
            p["BT"][j], p["BT_low"][j], p["BT_high"][j] = _quantiles(B * rows["conv_batches"].to_numpy(float))
        panels.append(p)
    first = summary.iloc[0]
    return {"panels": panels, "F_star": float(first["F_star"]), "name": f"Dataset(name='{first['problem.name']}', "
            f"l2={first['problem.l2']})", "n_seeds": int(summary["repetition"].nunique()), "band": BAND,
            "rtol": float(first["target.rtol"]), "edge": any(e for p in panels for e in p["lr_edge"])}


def draw_convergence_vs_echo(data: dict):
    """Per B: KT (blue) and BT (red) vs K with bands, tuned lr (orange, right axis)."""
    from echosim.plots.views import draw_echo_panel

    fig, axes = _figure(len(data["panels"]), 4.0, 3.4)
    for ax, p in zip(axes, data["panels"]):
        K = p["K"]
        series = [(p[key], p[key + "_low"], p[key + "_high"], color, name)
                  for key, color, name in (("KT", "tab:blue", "steps KT"), ("BT", "tab:red", "samples BT"))]
        ax2 = draw_echo_panel(ax, K, series, p["lr"], K[~np.isfinite(p["KT"])], f"B = {p['B']}")
        for k, lr, edge in zip(K, p["lr"], p["lr_edge"]):
            if edge:
                ax2.annotate("^" if edge == "high" else "_", (k, lr), fontsize=9, color="tab:orange",
                             xytext=(0, 4), textcoords="offset points", ha="center")
        lr_ok = p["lr"][np.isfinite(p["lr"])]
        ax2.set_ylim(min(0.008, lr_ok.min() / 1.5) if lr_ok.size else 0.008, 12)
        ax2.tick_params(axis="y", colors="tab:orange", labelsize=7)
        if ax is axes[-1]:
            ax2.set_ylabel("tuned learning rate", color="tab:orange")
    axes[0].set_ylabel("convergence time")
    h, lab = axes[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    h.append(Line2D([], [], color="tab:orange", ls="--", marker="s", ms=3))
    lab.append("tuned lr (right axis)")
    fig.legend(h, lab, fontsize=7, loc="outside lower center", ncols=3,
               title=_band_label(data["band"], data["n_seeds"]) + " at the tuned lr", title_fontsize=7)
    fig.suptitle(f"{data['name'].split('(')[0]} {_short_name(data['name'])}: convergence time vs K "
                 f"(within {100 * data['rtol']:g}% of F* = {data['F_star']:.4f}; lr tuned per (B, K)"
                 + ("; ^ tuned lr at the edge of its grid" if data["edge"] else "") + ")", fontsize=9)
    return fig


def _short_name(name: str) -> str:
    import re

    m = re.search(r"name='([^']*)'.*l2=([0-9.e-]+)", name)
    return f"{m.group(1)}, l2 = {m.group(2)}" if m else name


def _figure(n: int, width: float, height: float, rows: int = 1):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height * rows), layout="constrained")
    axes = fig.subplots(rows, n, squeeze=False)
    return fig, (axes[0] if rows == 1 else axes)


# --------------------------------------------------------------------------- figure 2


_ITERATE = {"last": ("risk", "last iterate"), "avg": ("risk_avg", "average iterate"),
            "end_avg": ("risk_end_avg", "average of batch ends")}
"""A method's reported iterate (its row's ``iterate``): the curve column and its words."""


def _bound(row, t):
    """The bound of the run `row` (its method's row names it; constants, step size) at horizons `t`."""
    import theory

    from echosim.training.methods import METHODS

    kw = dict(beta=row["beta"], rho=row["rho"], D=row["D"], B=float(row["optimizer.batch_size"]), T=t,
              K=float(row["optimizer.echo"]))
    name = METHODS[row["optimizer.method"]].bound
    if name == "echoed_prox_bound":  # the prox bound takes the weight λ and the inner step
        return theory.echoed_prox_bound(**kw, lam=row["optimizer.lam"], inner_lr=row["optimizer.lr"])
    return getattr(theory, name)(**kw, lr=row["optimizer.lr"])


def _at_theory_step(rows) -> np.ndarray:
    """Which runs took their bound's own step size (lr = "theory")."""
    rule = rows.get("optimizer.lr_rule")
    return np.zeros(len(rows), dtype=bool) if rule is None else (rule == "theory").to_numpy()


def bounds_vs_simulation_view(summary, curves, tuned) -> dict:
    """Per method (and batch size): the mean excess risk over seeds (and a 10–90% band)
    of the iterate its bound is about, next to the bound with the run's own parameters
    at every t. Minibatch SGD varies B, the echoed methods K."""
    from echosim.training.methods import METHODS

    panels = []
    for method in (m.name for m in METHODS.values() if m.bound is not None):
        rows_m = summary[summary["optimizer.method"] == method]
        column, words = _ITERATE[METHODS[method].iterate]
        by_B = [(None, rows_m)] if METHODS[method].one_step else list(rows_m.groupby("optimizer.batch_size"))
        for (B, rows_B), theory_step in itertools.product(by_B, (True, False)):
            rows = rows_B[_at_theory_step(rows_B) == theory_step]
            if not len(rows):
                continue
            vary = "optimizer.batch_size" if METHODS[method].one_step else "optimizer.echo"
            items = []
            for value, g in rows.groupby(vary, sort=True):
                c = curves[curves["run_id"].isin(set(g["run_id"]))]
                by_run = [c[c["run_id"] == rid] for rid in g["run_id"]]
                x = by_run[0]["batches"].to_numpy(dtype=float)
                Y = np.vstack([r[column].to_numpy(dtype=float) for r in by_run])
                keep = x > 0
                label = f"B={int(value)}" if vary == "optimizer.batch_size" else f"K={int(value)}"
                lo, hi = np.quantile(Y, BAND, axis=0)
                item = {"median": {"x": x[keep], "y": Y.mean(axis=0)[keep], "y_low": lo[keep], "y_high": hi[keep],
                                   "n": len(by_run), "label": f"{label}: mean"}}
                if theory_step:
                    item["bound"] = {"x": x[keep], "y": np.asarray(_bound(g.iloc[0], x[keep]), dtype=float),
                                     "label": f"{label}: bound"}
                items.append(item)
            lr = float(rows["optimizer.lr"].iloc[0])
            step = "bound's step" if theory_step else f"step {lr:g} (no bound)"
            title = f"{METHODS[method].title}, {words}" + ("" if B is None else f", B = {int(B)}") + f"\n{step}"
            panels.append({"title": title, "curves": items, "theory_step": theory_step})
    return {"panels": panels, "T": int(summary["sweep.n_batches"].max()),
            "n_seeds": int(summary["repetition"].nunique()), "band": BAND}


def draw_bounds_vs_simulation(data: dict):
    """Four panels: median and band of the excess risk vs T, dashed bound in the same colour."""
    from echosim.plots.views import draw_overlay

    fig, axes = _figure(len(data["panels"]), 3.4, 3.3)
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, p in zip(axes, data["panels"]):
        for c, color in zip(p["curves"], colors):
            draw_overlay(ax, c, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("fresh batches T")
        ax.set_title(p["title"], fontsize=8)
        ax.legend(fontsize=6, loc="lower left")
    axes[0].set_ylabel("excess risk F(ŵ) − F*")
    fig.suptitle(f"simulation (mean, band {round(100 * data['band'][0])}–{round(100 * data['band'][1])}% over "
                 f"{data['n_seeds']} seeds) vs theory bound on the mean (dashed), at the step size each bound is "
                 f"tuned with for its horizon T; AGD also at the practical step 1/β", fontsize=9)
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
    return {"R": R, "echoes": echoes, "loaders": families, "speedup": speed, "model": model,
            "fresh_ratio": fresh_ratio, "n_seeds": int(summary["repetition"].nunique()), "band": BAND,
            "B": int(first["optimizer.batch_size"]), "workers": int(first["pipeline.workers"]),
            "prefetch": int(first["pipeline.prefetch"])}


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
    return {"B": Bs, "K": Ks, "predicted": predicted, "simulated": sim, "eps": eps,
            "R": np.asarray(t_ups) / t_down,
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


# --------------------------------------------------------------------------- entry point


FIGURES = {
    "convergence_vs_echo": (convergence_vs_echo_view, draw_convergence_vs_echo),
    "bounds_vs_simulation": (bounds_vs_simulation_view, draw_bounds_vs_simulation),
    "speedup_vs_R": (speedup_vs_R_view, draw_speedup_vs_R),
    "greedy_vs_fixed": (greedy_vs_fixed_view, draw_greedy_vs_fixed),
    "predicted_vs_simulated": (predicted_vs_simulated_view, draw_predicted_vs_simulated),
}
"""The registry of docs figures: name → (view over the sweep's tables, drawing)."""


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
    docs : also write the PNGs into ``docs/figures`` (maintainers regenerating the docs).

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
    for n in names:
        t0 = time.perf_counter()
        try:
            conf = figure_config(n, quick=quick)
        except ValueError as exc:  # e.g. a data set whose optional dependency is missing
            failed[n] = " ".join(str(exc).split())
            _log(f"{n}: skipped: {failed[n]}")
            continue
        report = run_sweep(conf, out=out / n, workers=workers, store_dir=store_dir, progress=progress)
        view, draw = FIGURES[n]
        fig = draw(view(report.summary, report.curves, report.tuned))
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
