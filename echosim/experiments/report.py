"""Text reports of a sweep: the tuned table and the regime check."""

from __future__ import annotations

import math

import numpy as np

from echosim.experiments.analysis import analysis_settings
from echosim.experiments.specs import SweepConfig

__all__ = ["format_tuned", "regime_check", "in_words", "target_words"]


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


def target_words(s: dict) -> str:
    """The convergence target and rule of analysis settings `s`, in words."""
    if s.get("rtol") is not None:
        goal = f"<= (1 + {s['rtol']:g}) F*"
    elif s.get("atol") is not None:
        goal = f"<= F* + {s['atol']:g}"
    else:
        goal = f"<= F* + {s['fraction']:g} (F(w0) - F*)"
    loss = "the loss" if s["window"] == 1 else f"the trailing mean of the last {s['window']} logged losses"
    if s["rule"] == "hold":
        return (f"the first logged point where {loss} is {goal} and stays so for the next {s['hold']} fresh "
                f"batches ({s['iterate']} iterate)")
    if s["rule"] == "stable":
        return f"the point from which {loss} stays {goal} to the end of the budget ({s['iterate']} iterate)"
    return f"the first logged point where {loss} is {goal} ({s['iterate']} iterate)"


def _vary_columns(tuned, config):
    vary = []
    for a in config.axes:  # an axis inside a service-time table shows as its table's column
        col = a if a in tuned.columns else ".".join(a.split(".")[:2])
        if a != "optimizer.lr" and col in tuned.columns and col not in vary:
            vary.append(col)
    # batch size first, echo factor last: the rows read like the paper's Figure 2 panels
    vary.sort(key=lambda c: (c != "optimizer.batch_size", c == "optimizer.echo"))
    return vary


_UNIT_WORDS = {"batches": "T (fresh batches)", "steps": "KT (steps)", "samples": "BT (samples)",
               "time": "wall-clock"}

_SHORT = {"optimizer.batch_size": "B", "optimizer.echo": "K", "sweep.n_batches": "T_max",
          "sweep.time_budget": "budget", "optimizer.method": "method", "pipeline.policy": "policy"}


def _step_cap(tuned, summary) -> np.ndarray:
    """1/β of each tuned row's problem (NaN where unknown): the largest step any theorem here covers."""
    cap = np.full(len(tuned), np.nan)
    if summary is None or not len(summary) or "beta" not in summary.columns:
        return cap
    beta = summary["beta"].dropna()
    if beta.nunique() == 1:
        return np.full(len(tuned), 1.0 / float(beta.iloc[0]))
    if "optimizer.batch_size" in tuned.columns and "optimizer.batch_size" in summary.columns:
        by_B = summary.groupby("optimizer.batch_size")["beta"].first()
        return np.array([1.0 / by_B.get(B, np.nan) for B in tuned["optimizer.batch_size"]], dtype=float)
    return cap


def format_tuned(tuned, config: SweepConfig, summary=None) -> str:
    """The tuned table as aligned text: per setting, lr*, the median times to target with a
    90% interval for the median T, each seed's T, and what the numbers mean."""
    if tuned is None or len(tuned) == 0:
        return "(no results)"
    s = analysis_settings(config.settings)
    vary = _vary_columns(tuned, config)
    if vary:
        tuned = tuned.sort_values(vary, kind="stable", na_position="last")
    cols = [(_SHORT.get(a, a.split(".", 1)[1]), a) for a in vary]
    has_time = "conv_time" in tuned.columns and tuned["conv_time"].notna().any()
    cap = _step_cap(tuned, summary)
    header = [c for c, _ in cols] + ["lr*", "T to target", "T 90% interval", "KT steps", "BT samples"]
    header += ["wall-clock"] if has_time else []
    header += ["converged"]
    lines, seeds, past_cap = [], [], []
    for (_, r), c in zip(tuned.iterrows(), cap):
        lr = r["optimizer.lr"]
        lr_s = _fmt(lr, 3) + ("^" if r.get("lr_edge") == "high" else "_" if r.get("lr_edge") == "low" else "")
        if isinstance(lr, float) and math.isnan(lr):
            lr_s = "none"
        elif math.isfinite(c) and lr > c * (1 + 1e-9):
            lr_s += "*"
            past_cap.append(r)
        low, high = r.get("conv_batches_low", math.nan), r.get("conv_batches_high", math.nan)
        interval = "-" if not np.isfinite(low) and not np.isfinite(high) and math.isinf(r["conv_batches"]) \
            else f"{_fmt(low)}-{_fmt(high)}"
        row = [_fmt(r[a]) for _, a in cols] + [lr_s, _fmt(r["conv_batches"]), interval, _fmt(r["conv_steps"]),
                                                 _fmt(r["conv_samples"])]
        row += [_fmt(r["conv_time"])] if has_time else []
        row += [f"{r['n_converged']}/{r['n_seeds']}"]
        lines.append(row)
        per_seed = r.get("seeds_batches")
        if per_seed is not None and len(per_seed):
            label = ", ".join(f"{name} = {_fmt(r[a])}" for name, a in cols if name != "T_max")
            seeds.append(f"  {label or 'all'}: " + " ".join(_fmt(float(v)) for v in per_seed))
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
    fmt = "  ".join("{:>%d}" % w for w in widths)
    text = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    text += [fmt.format(*l) for l in lines]
    n = config.settings["repetitions"]
    notes = [f"T: fresh batches to {target_words(s)}; 'never': not reached within the budget.",
             f"Each cell: the median over {n} seed(s) at the tuned lr*, the lr with the smallest median "
             f"{_UNIT_WORDS[s['tune_by']]} (ties: fewer slow seeds, then the middle of the tied lrs); "
             "the interval is a 90% distribution-free interval for the median T."]
    if has_time:
        notes.append("wall-clock: simulated, in the config's time unit (an optimizer step takes pipeline.step_time, "
                     "1 by default).")
    if past_cap:
        c = float(np.nanmax(cap))
        notes.append(f"*: lr* above 1/β = {c:.3g}, the largest step any theorem here covers: no bound applies to "
                     "these runs.")
    if (tuned["lr_edge"] != "").any():
        notes.append("^/_: the tuned lr (or the plateau of lrs tying with it) still reaches the largest/smallest "
                     "lr of its grid after the extension rounds, so it is not a tuned value and its times are "
                     "upper bounds (widen the grid or raise sweep.lr_extend).")
    if seeds and n > 1:
        notes.append("T of each seed at lr* (repetition order):")
        notes += seeds
    return "\n".join(text + notes)


def _per_seed(summary, B, K, lr, unit: str) -> np.ndarray:
    """Each seed's convergence time in `unit` at (B, K, lr), in repetition order (inf: never)."""
    rows = summary[(summary["optimizer.batch_size"] == B) & (summary["optimizer.echo"] == K)
                   & (summary["optimizer.lr"] == lr)].sort_values("repetition")
    t = rows[f"conv_{unit}"].to_numpy(dtype=float)
    return np.where(np.isnan(t), np.inf, t)


def _bootstrap(matrix: np.ndarray, stat, n: int = 400, seed: int = 0) -> np.ndarray:
    """`stat` of the per-K medians over `n` resamples of the seeds (columns), the same seeds
    for every K (they share their fresh batches)."""
    rng = np.random.default_rng(seed)
    m = matrix.shape[1]
    out = []
    for _ in range(n):
        idx = rng.integers(0, m, size=m)
        with np.errstate(invalid="ignore"):
            out.append(stat(np.median(matrix[:, idx], axis=1)))
    return np.asarray(out, dtype=float)


def _interval(samples: np.ndarray, digits: int = 2) -> str:
    ok = samples[np.isfinite(samples)]
    if ok.size < 0.9 * samples.size:
        return "interval: not determined (too many resamples without a fit)"
    lo, hi = np.quantile(ok, [0.1, 0.9])
    return f"10-90% over resampled seeds: {lo:.{digits}g}-{hi:.{digits}g}"


def _panels(tuned, summary):
    """Per batch size: K, the tuned lr, the median T and wall-clock per K, and the per-seed
    matrices (K × seeds) at the tuned lr; only where every K has a tuned lr."""
    need = {"optimizer.batch_size", "optimizer.echo", "conv_batches"}
    if tuned is None or not need <= set(tuned.columns):
        return []
    out = []
    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo").drop_duplicates("optimizer.echo")
        if len(g) < 2:
            continue
        p = {"B": int(B), "K": g["optimizer.echo"].to_numpy(dtype=float), "lr": g["optimizer.lr"].to_numpy(dtype=float),
             "T": g["conv_batches"].to_numpy(dtype=float), "edge": list(g.get("lr_edge", [""] * len(g))),
             "time": g["conv_time"].to_numpy(dtype=float) if "conv_time" in g else np.full(len(g), np.nan)}
        if summary is not None and len(summary) and np.all(np.isfinite(p["lr"])):
            mats = {u: [_per_seed(summary, B, k, lr, u) for k, lr in zip(p["K"], p["lr"])] for u in ("batches", "time")}
            if len({len(v) for v in mats["batches"]}) == 1 and len(mats["batches"][0]) > 1:
                p["T_seeds"] = np.vstack(mats["batches"])
                p["time_seeds"] = np.vstack(mats["time"])
        out.append(p)
    return out


def _choice(p):
    """`echosim.experiments.choice.choose` over the K of a panel: each K's wall-clock per seed
    (fresh batches without a clock), its steps K·T per seed."""
    from echosim.experiments.choice import choose

    has_time = bool(np.isfinite(p["time"]).any())
    if "T_seeds" in p:
        times = list(p["time_seeds"] if has_time else p["T_seeds"])
        steps = [k * row for k, row in zip(p["K"], p["T_seeds"])]
    else:
        times = list(p["time"] if has_time else p["T"])
        steps = list(p["K"] * p["T"])
    return choose(times, steps)


def _best_k(p) -> int:
    """Index of the chosen K: the rule shared with the planner (`echosim.experiments.choice`):
    robust over seeds, the fastest within the noise, then the fewest steps."""
    return _choice(p).index


def regime_check(tuned, summary=None, settings: dict | None = None) -> str:
    """Per batch size, in plain words: does echoing save fresh batches (and so wall-clock
    behind a slow loader), up to which K, and how sure each number is.

    The fitted model is T(K) ≈ a/K + c (fresh batches to the target): the a/K part is
    what echoing removes (optimisation progress), c what it cannot; K_sat = a/c is where
    the two are equal. Its interval comes from resampling the seeds (the same seeds for
    every K, as they share their fresh batches). A plateau c of about one or two batches
    is the floor of whole fresh batches, not noise. The theory's K_sat = βBε/(16ρ²)
    (``theory.saturation_echo``, docs/background/bounds.md) is printed next to it, with
    why the two differ and which to act on; so is the theory's step range (η ≤ 1/β).
    """
    import theory
    from echosim.experiments.analysis import fit_saturation, regime

    s = analysis_settings(settings)
    panels = _panels(tuned, summary)
    if not panels:
        return ""
    lines = []
    theory_lines = []
    past_cap = []
    for p in panels:
        K, T = p["K"], p["T"]
        never = [f"{k:g}" for k, t in zip(K, T) if not math.isfinite(t)]
        lines.append(f"  B = {p['B']}:")
        if np.isfinite(T).all():
            ratio = T.max() / T.min()
            if ratio <= 1.1:
                lines.append(f"    fresh batches to target: {_fmt(T[0])} at K = {K[0]:g}, and within 10% of it at "
                             "every K (flat in K)")
            else:
                lines.append(f"    fresh batches to target: {_fmt(T[0])} at K = {K[0]:g}, {_fmt(T.min())} at best "
                             f"(K = {K[int(np.argmin(T))]:g}), {_fmt(T[-1])} at K = {K[-1]:g}")
        if never:
            lines.append(f"    K = {', '.join(never)} never reached the target within the budget (left out of the fit)")
        if any(p["edge"]):
            ks = ", ".join(f"{k:g}" for k, e in zip(K, p["edge"]) if e)
            lines.append(f"    K = {ks}: the tuned lr is still at the edge of its grid, so these times are upper "
                         "bounds (widen the lr grid or raise sweep.lr_extend)")
        fit = fit_saturation(K, T)
        boot = _bootstrap(p["T_seeds"], lambda m: fit_saturation(K, m)["K_sat"]) if "T_seeds" in p else None
        sure = f" ({_interval(boot, 2)})" if boot is not None else ""
        if math.isfinite(fit["K_sat"]):
            lines.append(f"    fit T(K) ≈ {fit['a']:.3g}/K + {fit['c']:.3g} fresh batches: K_sat = {fit['K_sat']:.3g}"
                         f"{sure} -> {regime(fit['K_sat'], K[-1])}")
            if fit["K_sat"] >= 1.5 and fit["c"] <= 2.5 and np.nanmin(T) <= 2:
                lines.append(f"    the plateau c = {fit['c']:.2g} is the floor of whole fresh batches (one or two "
                             "batches already reach the target): K_sat marks where that floor is reached, not where "
                             "the noise of the samples takes over")
        elif math.isinf(fit["K_sat"]):
            lines.append("    fit T(K) ≈ a/K with no plateau within these K -> curvature-dominated throughout: "
                         "every K tried still saves fresh batches")
        else:
            lines.append("    too few settings reached the target to fit T(K) (at least two are needed)")
        cap = _step_cap_of(summary, p["B"])
        if math.isfinite(cap):
            over = [f"{k:g}" for k, lr in zip(K, p["lr"]) if np.isfinite(lr) and lr > cap * (1 + 1e-9)]
            if over:
                past_cap.append(p["B"])
                lines.append(f"    the tuned lr exceeds 1/β = {cap:.3g} at K = {', '.join(over)}: outside the step "
                             "range of every theorem here, so no bound covers these cells")
        k_th = _theory_k_sat(summary, p["B"], s)
        if k_th is not None:
            theory_lines.append((p["B"], k_th, fit["K_sat"]))
    head = ("regime check (echoing pays while extra steps on a batch still make progress; once the noise of the "
            "fresh samples dominates, or one fresh batch is enough, more K stops saving fresh batches):")
    out = [head, *lines]
    if theory_lines:
        beta, rho, eps = theory_lines[0][1][1:]
        ks = ", ".join(f"{k[0]:.3g} at B = {B}" for B, k, _ in theory_lines)
        out.append(f"  the theory's worst-case K_sat = βBε/(16ρ²) (β = {beta:.3g}, ρ = {rho:.3g}, ε = {eps:.3g}): {ks}.")
        out.append("    It balances the two terms of the bound (Theorem 7) for the worst problem with these β and ρ, "
                   "at steps η ≤ 1/β; this problem's gradient noise is far below the worst case ρ²"
                   + (" and its tuned steps lie outside that range" if past_cap else "")
                   + ", so it echoes profitably well past the bound's K_sat. The bound's K_sat guarantees "
                   "something for every problem with these constants; to choose K for this one, act on the "
                   "simulated K_sat and on what echoing buys in wall-clock (below).")
    return "\n".join(out)


def _step_cap_of(summary, B) -> float:
    if summary is None or not len(summary) or "beta" not in summary.columns:
        return math.nan
    rows = summary[(summary["optimizer.batch_size"] == B) & summary["beta"].notna()]
    return 1.0 / float(rows["beta"].iloc[0]) if len(rows) else math.nan


def _theory_k_sat(summary, B, s):
    """(K_sat, β, ρ, ε) of ``theory.saturation_echo`` for batch size B, or None."""
    import theory

    if summary is None or not len(summary) or not {"beta", "rho", "F_star"} <= set(summary.columns):
        return None
    rows = summary[(summary["optimizer.batch_size"] == B) & summary["beta"].notna()]
    if not len(rows):
        return None
    r0 = rows.iloc[0]
    if s.get("rtol") is not None:
        eps = s["rtol"] * float(r0["F_star"])
    elif s.get("atol") is not None:
        eps = float(s["atol"])
    else:
        return None
    beta, rho = float(r0["beta"]), float(r0["rho"])
    return float(theory.saturation_echo(eps=eps, beta=beta, rho=rho, B=float(B))), beta, rho, eps


def _choice_words(p, choice) -> str:
    """Why this K and not the median's fastest, and its spread over seeds."""
    K, t = p["K"], p["time"] if np.isfinite(p["time"]).any() else p["T"]
    i, j = choice.index, choice.fastest_median
    out = ""
    if j != i and choice.why in ("fewer steps", "simpler"):
        more = "more" if choice.why == "fewer steps" else "as many"
        out += (f"; K = {K[j]:g} is as fast within the noise ({_fmt(t[j])} against {_fmt(t[i])}) with {more} steps")
    elif j != i:
        out += (f"; K = {K[j]:g} is faster in the median ({_fmt(t[j])}) but slower on a quarter of the seeds")
    if "T_seeds" in p:
        seeds = p["T_seeds"]
        lo, hi = np.quantile(np.where(np.isinf(seeds[i]), np.nan, seeds[i]), [0.1, 0.9]) \
            if np.isfinite(seeds[i]).all() else (math.nan, math.nan)
        bad = int(np.sum(seeds[i] >= seeds[0]))
        if math.isfinite(lo):
            out += f"; its fresh batches over seeds: {_fmt(lo)}-{_fmt(hi)} (10-90%)"
        if bad:
            out += f", no fewer than K = 1 on {bad} of {seeds.shape[1]} seeds"
    return out


def in_words(tuned, summary=None) -> list[str]:
    """One plain sentence per batch size: what echoing buys, and at which K."""
    out = []
    for p in _panels(tuned, summary):
        K, T, t = p["K"], p["T"], p["time"]
        choice = _choice(p)
        i = choice.index
        has_time = bool(np.isfinite(t).any())
        B = p["B"]
        if not np.isfinite(T[0]) and not np.isfinite(T[i]):
            out.append(f"B = {B}: no echo factor reached the target within the budget.")
            continue
        if i == 0:
            flat = np.isfinite(T).all() and T.max() <= 1.1 * T.min()
            why = (f"every K needs about the same {_fmt(T[0])} fresh batches"
                   if flat else f"no K reaches the target in fewer fresh batches per unit of time than K = 1")
            cost = (f", and more K only adds steps ({_fmt(t[0])} time units to target at K = 1, {_fmt(t[-1])} at "
                    f"K = {K[-1]:g})" if has_time and np.isfinite(t[-1]) and t[-1] > 1.05 * t[0] else "")
            out.append(f"B = {B}: echoing buys nothing here: {why}{cost}.")
            continue
        fresh = (f"{T[0] / T[i]:.2g}× fewer fresh batches ({_fmt(T[0])} → {_fmt(T[i])})" if np.isfinite(T[0])
                 else f"{_fmt(T[i])} fresh batches, where K = 1 never reaches the target")
        if has_time and np.isfinite(t[0]):
            sure = ""
            if "time_seeds" in p:
                boot = _bootstrap(p["time_seeds"], lambda m: m[0] / m[i])
                ok = boot[np.isfinite(boot)]
                if ok.size >= 0.9 * boot.size:
                    lo, hi = np.quantile(ok, [0.1, 0.9])
                    sure = f"; {lo:.2g}–{hi:.2g}× over resampled seeds"
            gain = (f"reaches the target {t[0] / t[i]:.2g}× sooner in wall-clock ({_fmt(t[0])} → {_fmt(t[i])} time "
                    f"units{sure}), with {fresh}")
        else:
            gain = f"needs {fresh}"
        rest = _choice_words(p, choice)
        if i < len(K) - 1 and choice.index == choice.fastest_median:
            more_T = np.nanmin(T[i + 1:]) if np.isfinite(T[i + 1:]).any() else math.inf
            rest += ("; more K saves no more fresh batches" if more_T >= 0.9 * T[i]
                    else "; more K saves fresh batches but costs more in steps than it saves in waiting")
        out.append(f"B = {B}: echoing at K = {K[i]:g} {gain}{rest}.")
    return out
