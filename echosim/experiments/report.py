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
    header += ["wall-clock"] if has_time else []
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
    target = (f"trailing mean of the last {s['window']} logged losses <= (1 + {s['rtol']:g}) F*"
              if s.get("rtol") is not None else f"trailing mean of {s['window']} excess risks <= {s['atol']:g}")
    notes = [f"median over {config.settings['repetitions']} seed(s) at the tuned lr; target: {target} "
             f"({s['iterate']} iterate); lr tuned by {s['tune_by']}; 'never': not reached within the budget"]
    if (tuned["lr_edge"] != "").any():
        notes.append("^/_: the tuned lr is the largest/smallest of the grid (widen the lr grid to be sure)")
    return "\n".join(text + notes)


def regime_check(tuned, summary=None, rtol: float | None = 0.01) -> str:
    """Per batch size: fit T(K) ≈ a/K + c to the tuned times, K_sat = a/c, next to the theory's K_sat.

    The theory's K_sat = βBε/(16ρ²) (``theory.saturation_echo``, digest §3.7) is
    evaluated with the problem's worst-case constants, ε = rtol·F*, and β replaced by
    1/η_max when the grid's largest lr is below 1/β (the step, not the smoothness,
    then limits progress). Both grow linearly in B; the fitted values say where the
    simulation actually puts the boundary.
    """
    import theory
    from echosim.experiments.analysis import fit_saturation, regime

    need = {"optimizer.batch_size", "optimizer.echo", "conv_batches"}
    if tuned is None or not need <= set(tuned.columns):
        return ""
    lines, fitted, predicted = [], {}, {}

    def num(v):
        return "0" if abs(v) < 1e-6 else f"{v:.3g}"

    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo").drop_duplicates("optimizer.echo")
        if len(g) < 3:
            continue
        K = g["optimizer.echo"].to_numpy(dtype=float)
        T = g["conv_batches"].to_numpy(dtype=float)
        fit = fit_saturation(K, T)
        fitted[B] = fit["K_sat"]
        j = min(3, len(K) - 1)
        ratio = _fmt(T[-1] / T[0], 3) if np.isfinite(T[[0, -1]]).all() else "-"
        kt = _fmt(K[j] * T[j] / (K[0] * T[0]), 3) if np.isfinite(T[[0, j]]).all() else "-"
        lines.append(f"  B={int(B)}: T(K={K[-1]:g})/T(K={K[0]:g}) = {ratio}, KT(K={K[j]:g})/KT(K={K[0]:g}) = {kt}; "
                     f"fit T ≈ {num(fit['a'])}/K + {num(fit['c'])}, K_sat = {num(fit['K_sat'])} "
                     f"-> {regime(fit['K_sat'], K[-1])}")
        if summary is not None and len(summary) and {"beta", "rho", "F_star"} <= set(summary.columns):
            rows = summary[(summary["optimizer.batch_size"] == B) & summary["beta"].notna()]
            if len(rows):
                r0 = rows.iloc[0]
                lr_max = float(summary["optimizer.lr"].max())
                beta = max(float(r0["beta"]), 1.0 / lr_max) if lr_max > 0 else float(r0["beta"])
                eps = (rtol if rtol is not None else 0.01) * float(r0["F_star"])
                predicted[B] = float(theory.saturation_echo(eps=eps, beta=beta, rho=float(r0["rho"]), B=float(B)))
    if not lines:
        return ""
    head = "regime check (digest §3.7: fit T(K) ≈ a/K + c per B; K_sat = a/c, where the curvature and noise terms are equal):"
    if predicted:
        th = ", ".join(f"{v:.2g} (B={int(b)})" for b, v in predicted.items())
        lines.append(f"  theory.saturation_echo(ε = rtol·F*, β_eff = max(β, 1/η_max), ρ): K_sat = {th}")
        big = max(predicted)
        if big in fitted and math.isfinite(fitted[big]) and predicted[big] > 0:
            lines.append(f"  both grow with B; at B={int(big)} the simulation's K_sat is {fitted[big] / predicted[big]:.3g}x "
                         "the theory's (worst-case ρ and D make the bound's noise term pessimistic)")
    return head + "\n" + "\n".join(lines)
