"""The docs figures' views: a figure sweep's tables (one row per run, one row per
logged point, the tuned table) turned into plain plot data, one function per figure.

Each ``<name>_view(summary, curves, tuned)`` returns a dict of NumPy arrays, numbers and
labels that `echosim.plots.figure_drawing` draws and `echosim.plots.figure_captions`
reads its facts from; nothing here draws. A run that diverges or never reaches the target
is a result (time +inf, "never"), never a NaN. The registry of figures is
`echosim.plots.figures.FIGURES`.

Rows are selected by the policy names the figure's config wrote (``pipeline.policy``:
"sync", "fixed", "greedy"): a figure compares those policies one by one, which the flags
of `echosim.pipeline.model.POLICIES` cannot say (``capped`` holds greedy and auto alike).
"""

from __future__ import annotations

import itertools
import math
import re

import numpy as np

__all__ = [
    "BAND",
    "bounds_vs_simulation_view",
    "convergence_vs_echo_view",
    "greedy_vs_fixed_view",
    "predicted_vs_simulated_view",
    "speedup_vs_R_view",
]

BAND = (0.1, 0.9)
"""The quantile band drawn around each median (10–90% over seeds)."""


def _quantiles(values, band=BAND) -> tuple[float, float, float]:
    """(median, low, high) of `values` (inf allowed: a never-converged seed counts as slowest)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return math.inf, math.inf, math.inf
    v = np.where(np.isnan(v), np.inf, v)
    lo, med, hi = np.quantile(v, [band[0], 0.5, band[1]], method="lower")
    return float(med), float(lo), float(hi)


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
