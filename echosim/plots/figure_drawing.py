"""The docs figures' drawing: each figure's plot data (`echosim.plots.figure_views`)
turned into a matplotlib ``Figure``, one function per figure.

matplotlib is imported only inside these functions, and only its object-oriented
``Figure`` (not pyplot): no backend is set or switched, and importing this module
stays cheap. Never-converged settings ("never", time +inf) are marked, not drawn as numbers.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "draw_bounds_vs_simulation",
    "draw_convergence_vs_echo",
    "draw_greedy_vs_fixed",
    "draw_predicted_vs_simulated",
    "draw_speedup_vs_R",
]


def _figure(n: int, width: float, height: float, rows: int = 1):
    """A matplotlib Figure (not pyplot's: no backend is touched) and its axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height * rows), layout="constrained")
    axes = fig.subplots(rows, n, squeeze=False)
    return fig, (axes[0] if rows == 1 else axes)


def _band_label(band, n) -> str:
    return f"median, {round(100 * band[0])}–{round(100 * band[1])}% over {n} seeds"


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
