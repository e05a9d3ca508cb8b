"""The advisor: loader timing + step time + the problem's response to echoing →
candidates (sync, fixed K, greedy; batch sizes; loader workers) → wall-clock to target
for each, and one recommendation with its reason.

`plan` validates every input before any work, then evaluates the candidates in one of
two ways:

(a) ``problem=`` an echosim problem: every candidate is simulated end to end through
    the sweep machinery (the loader and the step time in the pipeline, the learning
    rate tuned per candidate by wall-clock to target, several seeds). This is the
    trustworthy path.
(b) ``steps_to_target=`` measurements without echoing at two or more batch sizes: a
    T(K, B) model (`echosim.plan.response`) predicts the fresh batches each candidate
    needs, and the pipeline simulator turns them into wall-clock.

Times are in seconds throughout.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from echosim.plan.timing import LoaderModel, as_loader, format_duration, parse_service_time

__all__ = ["plan", "Plan", "POLICIES"]

POLICIES = ("sync", "fixed", "greedy")
_BAND = (0.1, 0.9)


# --------------------------------------------------------------------------- validation


def _int_list(value, name: str, lo: int = 1) -> list[int]:
    vals = value if isinstance(value, (list, tuple, range, np.ndarray)) else [value]
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"{name}: expected integers >= {lo}, got {v!r}")
        out.append(int(v))
    if not out:
        raise ValueError(f"{name}: expected at least one value")
    return sorted(set(out))


def _price(value, name: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: expected a price per hour >= 0, got {value!r}")
    return float(value)


def _default_echoes(R: float) -> list[int]:
    """Powers of two from 2 to the first one >= 2R (at most 64): they bracket K = R."""
    out, k = [], 2
    while k <= 64:
        out.append(k)
        if k >= 2 * R:
            break
        k *= 2
    return out


# --------------------------------------------------------------------------- the result


@dataclass
class Plan:
    """What `plan` found: one row per candidate, the recommended one and why.

    ``candidates`` is a list of dicts with ``policy``, ``echo`` (K; the mean K̄ for
    greedy), ``batch_size``, ``workers``, ``batches_to_target``, ``steps_to_target``,
    ``wall_clock_to_target`` (seconds, median) with ``wall_clock_low``/``_high`` (10% and
    90% quantiles), ``speedup`` (over sync at the same B with the first workers value),
    ``speedup_ceiling`` (the theory's: every echoed step worth a fresh one),
    ``utilization`` (accelerator busy fraction until the target), ``cost`` (if prices).
    """

    candidates: list
    recommended: dict
    reason: str
    source: str
    inputs: dict
    notes: list = field(default_factory=list)

    # ---- output

    def to_dict(self) -> dict:
        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, (np.floating, np.integer)):
                return clean(v.item())
            return v

        rec = {k: clean(v) for k, v in self.recommended.items()}
        return {"recommended": {"policy": rec["policy"], "echo": rec["echo"], "batch_size": rec["batch_size"],
                                "workers": rec["workers"], "reason": self.reason},
                "candidates": [{k: clean(v) for k, v in c.items()} for c in self.candidates],
                "source": self.source, "inputs": self.inputs, "notes": list(self.notes),
                "units": {"wall_clock_to_target": "s", "cost": "currency per run", "utilization": "fraction",
                          "speedup": "x over sync"}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def table(self) -> str:
        """The candidates as aligned text, then the recommendation."""
        many_b = len({c["batch_size"] for c in self.candidates}) > 1
        many_w = len({c["workers"] for c in self.candidates}) > 1
        has_cost = any(c.get("cost") is not None for c in self.candidates)
        head = ["candidate"] + (["B"] if many_b else []) + (["workers"] if many_w else []) + [
            "fresh batches", "steps", "wall-clock to target (10-90%)", "utilization", "speedup",
            "theory ceiling"] + (["cost/run"] if has_cost else [])
        rows = []
        for c in self.candidates:
            name = self._name(c)
            mark = " *" if c is self.recommended else ""
            wall = c["wall_clock_to_target"]
            band = (f"{format_duration(wall)} ({format_duration(c['wall_clock_low'])}-"
                    f"{format_duration(c['wall_clock_high'])})") if math.isfinite(wall) else "never"
            row = [name + mark] + ([str(c["batch_size"])] if many_b else []) + (
                [str(c["workers"])] if many_w else []) + [
                _num(c["batches_to_target"]), _num(c["steps_to_target"]), band,
                f"{c['utilization']:.0%}" if math.isfinite(c["utilization"]) else "-",
                f"{c['speedup']:.2f}x" if math.isfinite(c["speedup"]) else "-",
                f"{c['speedup_ceiling']:.2f}x"]
            if has_cost:
                row.append("-" if c.get("cost") is None or not math.isfinite(c["cost"]) else f"{c['cost']:.4g}")
            rows.append(row)
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
        lines = [fmt.format(*head), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in rows]
        lines.append("")
        lines.append(f"recommended: {self._name(self.recommended)} at B = {self.recommended['batch_size']}"
                     f"{', ' + str(self.recommended['workers']) + ' loader worker(s)' if many_w else ''}: "
                     f"{self.reason}")
        lines.append("")
        lines.append(f"how: {self.source}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    @staticmethod
    def _name(c) -> str:
        if c["policy"] == "sync":
            return "sync (no echo)"
        if c["policy"] == "fixed":
            return f"fixed K={_num(c['echo'])}"
        return f"greedy (mean K={c['echo']:.2g}, max {c['max_echo']})"

    def plot_data(self) -> list[dict]:
        """Wall-clock to target against K, one series per (B, workers): {x, y, y_low, y_high, label}."""
        series = []
        keys = sorted({(c["batch_size"], c["workers"]) for c in self.candidates})
        for B, W in keys:
            cs = [c for c in self.candidates if (c["batch_size"], c["workers"]) == (B, W)
                  and c["policy"] in ("sync", "fixed")]
            cs.sort(key=lambda c: c["echo"])
            label = f"sync/fixed K, B={B}" + (f", {W} workers" if len(keys) > 1 else "")
            series.append({"x": [c["echo"] for c in cs], "y": [c["wall_clock_to_target"] for c in cs],
                           "y_low": [c["wall_clock_low"] for c in cs], "y_high": [c["wall_clock_high"] for c in cs],
                           "label": label, "kind": "line"})
            for c in self.candidates:
                if (c["batch_size"], c["workers"]) == (B, W) and c["policy"] == "greedy":
                    series.append({"x": [c["echo"]], "y": [c["wall_clock_to_target"]], "y_low": [c["wall_clock_low"]],
                                   "y_high": [c["wall_clock_high"]], "label": label.replace("sync/fixed K", "greedy"),
                                   "kind": "point"})
        return series

    def plot(self, path) -> str:
        """Draw `plot_data` (median, 10–90% band) to `path` (PNG, PDF or SVG)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for s in self.plot_data():
            x, y = np.asarray(s["x"], float), np.asarray(s["y"], float)
            lo, hi = np.asarray(s["y_low"], float), np.asarray(s["y_high"], float)
            if s["kind"] == "line":
                line, = ax.plot(x, y, "o-", label=s["label"] + " (median)")
                ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color(), label="10-90% band")
            else:
                ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="s", capsize=3, label=s["label"] + " (10-90%)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("echo factor K (mean K for greedy)")
        ax.set_ylabel("wall-clock to target (s)")
        ax.set_title("echosim plan: wall-clock to target")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
        return str(path)


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "never"
    v = float(v)
    return str(int(round(v))) if abs(v - round(v)) < 1e-9 or v >= 100 else f"{v:.3g}"


# --------------------------------------------------------------------------- plan


def plan(loader, step_time, *, batch_size, problem=None, steps_to_target=None, model: str | None = None,
         workers=1, prefetch: int = 2, policies=POLICIES, echoes=None, max_echo: int = 64,
         target: float = 0.002, seeds: int = 5, accelerator_price=None, worker_price=None, seed: int = 0,
         processes: int = 2, results=None) -> Plan:
    """Should I echo, with which K, and what will it save me?

    Parameters
    ----------
    loader : text, number, ServiceTime, Trace, or mapping B -> profile
        Time one loader worker needs per fresh batch (seconds): ``"gamma(mean=80ms,
        cv=0.5)"``, ``"trace(times.csv, unit=ms)"``, a `Trace` from `echosim.profile`,
        or profiles at two or more batch sizes (time per batch = a + b·B is fitted).
    step_time : text, number, ServiceTime or Trace
        Time of one optimizer step (seconds), e.g. ``"10ms"``.
    batch_size : int or list of int
        B; several values make several candidates.
    problem : str or dict, optional
        Form (a): ``"logistic"``, ``"least_squares"``, ``"dataset:NAME"`` or a
        ``[problem]`` table. T(K) is simulated with tuned learning rates.
    steps_to_target : mapping B -> steps, optional
        Form (b): optimizer steps to the target without echoing, at two or more B.
    model : "bound" (default) or "mccandlish"
        Form (b): the T(K, B) model (see `echosim.plan.response`; their measured accuracy is
        in docs/background/plan-model.md).
    workers : int or list of int
        Loader workers W; several values compare echoing with adding workers.
    prefetch : int
        Prefetch buffer capacity C.
    policies : subset of ("sync", "fixed", "greedy")
    echoes : list of int, optional
        K for "fixed" (default: powers of two bracketing R = t_load/(W t_step)).
    max_echo : int
        Bound on K_t under "greedy".
    target : float
        Form (a): reach a loss <= (1 + target)·F* (trailing mean of 5 logged losses).
    seeds : int
        Repetitions (loader randomness and data seeds) behind the 10–90% bands.
    accelerator_price, worker_price : float, optional
        Price per hour of the accelerator and of one loader worker; adds a cost column
        and makes the recommendation the cheapest run instead of the fastest.
    seed : base seed.
    processes : worker processes for form (a)'s simulations.
    results : the run store for form (a)'s runs (default ``$ECHOSIM_STORE``, else
        ``echosim-results/store``): runs it holds, from any sweep or plan, are reused.
    """
    # ---- validate everything first: nothing runs, nothing is written on bad input
    load = as_loader(loader)
    step = parse_service_time(step_time, "step_time")
    Bs = _int_list(batch_size, "batch_size")
    Ws = _int_list(workers, "workers")
    if isinstance(prefetch, bool) or not isinstance(prefetch, numbers.Integral) or prefetch < 1:
        raise ValueError(f"prefetch: expected an integer >= 1, got {prefetch!r}")
    if isinstance(max_echo, bool) or not isinstance(max_echo, numbers.Integral) or max_echo < 1:
        raise ValueError(f"max_echo: expected an integer >= 1, got {max_echo!r}")
    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",") if p.strip()]
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        raise ValueError(f"policies: allowed {', '.join(POLICIES)}, got {', '.join(map(str, policies)) or 'none'}")
    if "sync" not in policies:
        policies.insert(0, "sync")  # the baseline every speedup is measured against
    if echoes is not None:
        echoes = [k for k in _int_list(echoes, "echo") if k > 1]
    if isinstance(seeds, bool) or not isinstance(seeds, numbers.Integral) or not 1 <= seeds <= 100:
        raise ValueError(f"seeds: expected an integer in 1..100, got {seeds!r}")
    if not (isinstance(target, numbers.Real) and math.isfinite(target) and target > 0):
        raise ValueError(f"target: expected a relative tolerance > 0 (loss <= (1 + target) F*), got {target!r}")
    if isinstance(processes, bool) or not isinstance(processes, numbers.Integral) or processes < 1:
        raise ValueError(f"processes: expected an integer >= 1, got {processes!r}")
    acc_price = _price(accelerator_price, "accelerator_price")
    wrk_price = _price(worker_price, "worker_price")
    if (problem is None) == (steps_to_target is None):
        raise ValueError("problem: give exactly one of problem (an echosim problem, simulated) or "
                         "steps_to_target (measured steps without echoing at two or more batch sizes)")
    for B in Bs:
        load.at(B)  # a fitted a + b·B must be positive at every candidate B
    response = None
    pconf = None
    if steps_to_target is not None:
        from echosim.plan.response import fit_response

        from echosim.plan.response import DEFAULT_MODEL

        response = fit_response(steps_to_target, model=DEFAULT_MODEL if model is None else model, seed=seed)
    else:
        from echosim.plan.simulated import problem_config, validate_problem

        pconf = problem_config(problem)
        validate_problem(pconf)

    # ---- candidates
    cands = []
    for B in Bs:
        for W in Ws:
            R = load.mean_at(B) / (W * step.mean)
            ks = echoes if echoes is not None else _default_echoes(R)
            for p in policies:
                if p == "sync":
                    cands.append({"policy": "sync", "echo": 1, "batch_size": B, "workers": W})
                elif p == "fixed":
                    cands.extend({"policy": "fixed", "echo": k, "batch_size": B, "workers": W} for k in ks)
                else:
                    cands.append({"policy": "greedy", "echo": math.nan, "max_echo": int(max_echo),
                                  "batch_size": B, "workers": W})
    ctx = {"load": load, "step": step, "prefetch": int(prefetch), "max_echo": int(max_echo), "seeds": int(seeds),
           "seed": int(seed)}
    notes = []
    if response is not None:
        _evaluate_model(cands, response, ctx)
        source = (f"form (b): fresh batches from the {response.describe()}, fitted to steps to target without "
                  f"echoing; wall-clock from {seeds} simulated loader runs per candidate")
        from echosim.plan.response import ACCURACY

        notes.append("the T(K) model extrapolates from runs without echoing; " + ACCURACY + "; one prediction "
                     "in ten misses by half or more, in either direction, more often at large K: simulate an echosim problem (problem=) or run the recommended setting for real "
                     "to confirm")
    else:
        source, more = _evaluate_simulated(cands, pconf, ctx, target, processes, results)
        notes.extend(more)

    # ---- speedups, ceilings, costs
    base_w = Ws[0]
    for c in cands:
        base = next(b for b in cands if b["policy"] == "sync" and b["batch_size"] == c["batch_size"]
                    and b["workers"] == base_w)
        c["speedup"] = base["wall_clock_to_target"] / c["wall_clock_to_target"] \
            if math.isfinite(c["wall_clock_to_target"]) and math.isfinite(base["wall_clock_to_target"]) else math.nan
        c["speedup_ceiling"] = float(c["mean_echo"] * c["throughput"] / base["throughput"])
        if acc_price is not None or wrk_price is not None:
            rate = (acc_price or 0.0) + c["workers"] * (wrk_price or 0.0)
            c["cost"] = c["wall_clock_to_target"] * rate / 3600.0
    reachable = [c for c in cands if math.isfinite(c["wall_clock_to_target"])]
    if not reachable:
        raise ValueError(f"target: no candidate reaches the target (loss <= (1 + {target:g}) F*) within the budget; "
                         "loosen --target or try larger batch sizes")
    priced = acc_price is not None or wrk_price is not None
    rec, reason = _recommend(cands, reachable, priced, load, step)
    inputs = {"loader": load.describe(), "step_time": repr(step), "batch_size": Bs, "workers": Ws,
              "prefetch": int(prefetch), "policies": policies, "max_echo": int(max_echo), "seeds": int(seeds),
              "seed": int(seed), "problem": pconf if pconf is not None else None,
              "steps_to_target": None if response is None else
              {str(int(b)): float(t) for b, t in zip(response.batch_sizes, response.steps)},
              "model": None if response is None else response.model, "target": float(target) if pconf else None,
              "accelerator_price": acc_price, "worker_price": wrk_price}
    return Plan(candidates=cands, recommended=rec, reason=reason, source=source, inputs=inputs, notes=notes)


def _pipeline(c, ctx, load: LoaderModel):
    from echosim.pipeline.model import Pipeline

    kw = {"echo": float(c["echo"])} if c["policy"] == "fixed" else {}
    if c["policy"] == "greedy":
        kw["max_echo"] = ctx["max_echo"]
    return Pipeline(load.at(c["batch_size"]), workers=c["workers"], prefetch=ctx["prefetch"],
                    step_time=ctx["step"], policy=c["policy"], **kw)


def _evaluate_model(cands, response, ctx) -> None:
    """Form (b): T from the fitted model at the simulated mean echo; wall-clock from the pipeline."""
    from echosim.pipeline.schedule import simulate

    n_probe = 2000
    step_mean = ctx["step"].mean
    for c in cands:
        p = _pipeline(c, ctx, ctx["load"])
        seqs = np.random.SeedSequence([ctx["seed"], 7, c["batch_size"], c["workers"]]).spawn(ctx["seeds"])
        probe = simulate(p, n_probe, seed=seqs[0])
        sm = probe.summary()
        kbar = sm["mean_echo"]
        T_draws = np.maximum(1.0, response.predict_draws(kbar, c["batch_size"]))
        T_med = max(1.0, response.predict(kbar, c["batch_size"]))
        n_sim = int(min(max(np.quantile(T_draws, 0.95), T_med), 200_000)) + 2
        walls, steps, utils, med_steps = [], [], [], []
        draws = T_draws[:: max(1, len(T_draws) // 100)]
        for s in seqs:
            sch = simulate(p, n_sim, seed=s)
            last_step = np.concatenate([np.flatnonzero(np.diff(sch.step_batch)), [sch.n_steps - 1]])
            end = sch.step_end[last_step]  # end of batch t's last step
            cum = np.cumsum(sch.steps_per_batch)
            rate = sch.n_batches / sch.makespan
            for T in np.append(draws, T_med):
                t = int(math.ceil(T))
                if t <= sch.n_batches:
                    w, k = float(end[t - 1]), float(cum[t - 1])
                else:  # beyond the simulated horizon: extend at the steady rate
                    w = float(end[-1]) + (t - sch.n_batches) / rate
                    k = float(cum[-1]) * t / sch.n_batches
                walls.append(w)
                steps.append(k)
                utils.append(k * step_mean / w)
            med_steps.append(steps[-1])  # at the median T
        walls = np.array(walls)
        c.update(echo=float(kbar) if c["policy"] == "greedy" else c["echo"], mean_echo=float(kbar),
                 batches_to_target=float(math.ceil(T_med)), steps_to_target=float(np.median(med_steps)),
                 wall_clock_to_target=float(np.median(walls)),
                 wall_clock_low=float(np.quantile(walls, _BAND[0])),
                 wall_clock_high=float(np.quantile(walls, _BAND[1])),
                 utilization=float(np.median(utils)), throughput=float(sm["throughput"]))


def _evaluate_simulated(cands, pconf, ctx, target, processes, results):
    """Form (a): every candidate simulated end to end, lr tuned by wall-clock to target."""
    from echosim.plan.simulated import run_candidates

    return run_candidates(cands, pconf, ctx, target, processes, results)


def _recommend(cands, reachable, priced: bool, load, step):
    key = (lambda c: c["cost"]) if priced else (lambda c: c["wall_clock_to_target"])
    best = min(key(c) for c in reachable)
    # within 3% of the best, prefer the candidate that spends the fewest accelerator steps
    near = [c for c in reachable if key(c) <= 1.03 * best]
    rec = min(near, key=lambda c: (c["steps_to_target"], key(c)))
    B, W = rec["batch_size"], rec["workers"]
    R = load.mean_at(B) / (W * step.mean)
    what = "cheapest" if priced else "fastest"
    wall = format_duration(rec["wall_clock_to_target"])
    band = f"{format_duration(rec['wall_clock_low'])}-{format_duration(rec['wall_clock_high'])}"
    base = next(c for c in cands if c["policy"] == "sync" and c["batch_size"] == B and c["workers"] == W)
    if rec["policy"] == "sync":
        echo = [c for c in reachable if c["policy"] != "sync" and c["batch_size"] == B and c["workers"] == W]
        if R <= 1.0:
            why = (f"the loader keeps up (it needs {R:.2g}x a step per batch with {W} worker(s)), so the "
                   "accelerator never waits and echoing has nothing to fill")
        elif echo:
            b = min(echo, key=key)
            why = (f"the best echoing candidate ({Plan._name(b)}) reaches the target in "
                   f"{format_duration(b['wall_clock_to_target'])}, no better than without echoing: repeated "
                   "batches are worth little here (the run is noise-dominated)")
        else:
            why = "no echoing candidate reached the target"
        reason = f"do not echo: {why}; {wall} to target (10-90%: {band})"
    else:
        sp = rec["speedup"]
        reason = (f"{what}: {wall} to target (10-90%: {band}), {sp:.2g}x sooner than without echoing "
                  f"({format_duration(base['wall_clock_to_target'])})")
        if rec["policy"] == "fixed":
            K = rec["echo"]
            if K >= R:
                reason += (f"; the loader is R = {R:.2g}x slower than a step, and K = {_num(K)} >= R already fills "
                           "the accelerator's idle time (larger K costs wall-clock per batch)")
            else:
                reason += (f"; K = {_num(K)} < R = {R:.2g}: larger K would be free, but the fresh batches needed "
                           "stop falling (echoed steps are worth less than fresh ones)")
        else:
            reason += (f"; greedy echoes exactly while the next batch loads (mean K = {rec['echo']:.2g}, "
                       f"R = {R:.2g}), so it adapts to the loader's variability without choosing K")
        if rec["speedup_ceiling"] > 0:
            reason += f"; the theory's ceiling for it is {rec['speedup_ceiling']:.2g}x"
        if rec["wall_clock_high"] >= base["wall_clock_to_target"]:
            reason += ("; but its 90% quantile is no better than the median without echoing, so the gain is "
                       "within the run-to-run spread (more seeds would tell)")
    if priced:
        reason += f"; cost {rec['cost']:.4g} per run (sync at 1x: {base.get('cost', math.nan):.4g})"
    return rec, reason
