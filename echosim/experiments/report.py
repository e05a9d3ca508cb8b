"""Text reports of a sweep: the tuned table and the regime check."""

from __future__ import annotations

import math

import numpy as np

from echosim.experiments.specs import SweepConfig

__all__ = ["format_tuned", "regime_check"]


# --------------------------------------------------------------------------- reporting


def _fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if math.isinf(v):
            return "never"
        if v == int(v) and abs(v) < 1e9:
            return str(int(v))
        return f"{v:.{digits}g}"
    return str(v)


def format_tuned(tuned, config: SweepConfig) -> str:
    """The tuned table as aligned text: per setting, lr* and the median times to target."""
    if tuned is None or len(tuned) == 0:
        return "(no results)"
    vary = []
    for a in config.axes:  # an axis inside a service-time table shows as its table's column
        col = a if a in tuned.columns else ".".join(a.split(".")[:2])
        if a != "optimizer.lr" and col in tuned.columns and col not in vary:
            vary.append(col)
    # batch size first, echo factor last: the rows read like the paper's Figure 2 panels
    vary.sort(key=lambda c: (c != "optimizer.batch_size", c == "optimizer.echo"))
    if vary:
        tuned = tuned.sort_values(vary, kind="stable", na_position="last")
    short = {"optimizer.batch_size": "B", "optimizer.echo": "K", "sweep.n_batches": "T_max",
             "sweep.time_budget": "budget", "optimizer.method": "method", "pipeline.policy": "policy"}
    cols = [(short.get(a, a.split(".", 1)[1]), a) for a in vary]
    has_time = "conv_time" in tuned.columns and tuned["conv_time"].notna().any()
    header = [c for c, _ in cols] + ["lr*", "T to target", "KT steps", "BT samples"]
    header += ["wall-clock (time units)"] if has_time else []
    header += ["converged"]
    lines = []
    for _, r in tuned.iterrows():
        lr = r["optimizer.lr"]
        lr_s = _fmt(lr, 3) + ("^" if r.get("lr_edge") == "high" else "_" if r.get("lr_edge") == "low" else "")
        if isinstance(lr, float) and math.isnan(lr):
            lr_s = "none"
        row = [_fmt(r[a]) for _, a in cols] + [lr_s, _fmt(r["conv_batches"]), _fmt(r["conv_steps"]),
                                                 _fmt(r["conv_samples"])]
        row += [_fmt(r["conv_time"])] if has_time else []
        row += [f"{r['n_converged']}/{r['n_seeds']}"]
        lines.append(row)
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
    fmt = "  ".join("{:>%d}" % w for w in widths)
    text = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    text += [fmt.format(*l) for l in lines]
    s = config.settings
    kind = "stays" if s.get("rule", "first") == "stable" else "first gets"
    if s.get("rtol") is not None:
        goal = f"<= (1 + {s['rtol']:g}) F*"
    elif s.get("atol") is not None:
        goal = f"<= F* + {s['atol']:g}"
    else:
        goal = f"<= F* + {s['fraction']:g} (F(w0) - F*)"
    target = f"the trailing mean of the last {s['window']} logged losses {kind} {goal}"
    notes = [f"median over {config.settings['repetitions']} seed(s) at the tuned lr; target: {target} "
             f"({s['iterate']} iterate); lr tuned by {s['tune_by']}; 'never': not reached within the budget"]
    if has_time:
        notes.append("wall-clock: simulated, in the config's time unit (an optimizer step takes pipeline.step_time, "
                     "1 by default)")
    if (tuned["lr_edge"] != "").any():
        notes.append("^/_: the tuned lr is still the largest/smallest of its grid after the extension rounds, so it "
                     "is not a tuned value and its times are upper bounds (widen the grid or raise sweep.lr_extend)")
    return "\n".join(text + notes)


def regime_check(tuned, summary=None, rtol: float | None = 0.01) -> str:
    """Per batch size, in plain words: does echoing save fresh batches (and so wall-clock
    behind a slow loader), and up to which K? Every number is labelled with its unit.

    The fitted model is T(K) ≈ a/K + c (fresh batches to the target): the a/K part is
    what echoing removes (optimisation progress), c what it cannot (the noise of B·T
    fresh samples); K_sat = a/c is where the two are equal. The theory's K_sat =
    βBε/(16ρ²) (``theory.saturation_echo``, docs/background/bounds.md) uses the
    problem's worst-case constants and ε = rtol·F*, so it is a conservative reference.
    """
    import theory
    from echosim.experiments.analysis import fit_saturation, regime

    need = {"optimizer.batch_size", "optimizer.echo", "conv_batches"}
    if tuned is None or not need <= set(tuned.columns):
        return ""
    lines = []
    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo").drop_duplicates("optimizer.echo")
        if len(g) < 2:
            continue
        K = g["optimizer.echo"].to_numpy(dtype=float)
        T = g["conv_batches"].to_numpy(dtype=float)
        never = [f"{k:g}" for k, t in zip(K, T) if not math.isfinite(t)]
        lines.append(f"  B = {int(B)}:")
        if np.isfinite(T[0]) and np.isfinite(T[-1]):
            lines.append(f"    fresh batches to target: {_fmt(T[0])} at K = {K[0]:g}, {_fmt(T[-1])} at K = {K[-1]:g} "
                         f"({T[0] / T[-1]:.3g}x fewer with echoing)")
        if never:
            lines.append(f"    K = {', '.join(never)} never reached the target within the budget (left out of the fit)")
        edge = g.get("lr_edge", None)
        if edge is not None and (edge != "").any():
            ks = ", ".join(f"{k:g}" for k, e in zip(K, edge) if e)
            lines.append(f"    K = {ks}: the tuned lr is still at the edge of its grid, so these times are upper "
                         "bounds (widen the lr grid or raise sweep.lr_extend)")
        fit = fit_saturation(K, T)
        if math.isfinite(fit["K_sat"]):
            lines.append(f"    fit T(K) ≈ {fit['a']:.3g}/K + {fit['c']:.3g} fresh batches: K_sat = {fit['K_sat']:.3g} "
                         f"-> {regime(fit['K_sat'], K[-1])}")
        elif math.isinf(fit["K_sat"]):
            lines.append("    fit T(K) ≈ a/K with no plateau within these K -> curvature-dominated throughout: "
                         "every K tried still saves fresh batches")
        else:
            lines.append("    too few settings reached the target to fit T(K) (at least two are needed)")
        if summary is not None and len(summary) and {"beta", "rho", "F_star"} <= set(summary.columns):
            rows = summary[(summary["optimizer.batch_size"] == B) & summary["beta"].notna()]
            if len(rows) and rtol is not None:
                r0 = rows.iloc[0]
                eps = rtol * float(r0["F_star"])
                k_th = float(theory.saturation_echo(eps=eps, beta=float(r0["beta"]), rho=float(r0["rho"]), B=float(B)))
                lines.append(f"    the theory's worst-case K_sat (β = {float(r0['beta']):.3g}, ρ = {float(r0['rho']):.3g}, "
                             f"ε = {eps:.3g}): {k_th:.3g}")
    if not lines:
        return ""
    head = ("regime check: echoing pays while extra steps on a batch still make progress (curvature-dominated); "
            "once the noise of the fresh samples dominates, more K stops saving fresh batches:")
    return head + "\n" + "\n".join(lines)
