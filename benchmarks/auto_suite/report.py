"""Scoring and reporting: the target rule (bench_auto.py's), per-case tables, the checks of
issue 26, JSON. Torch-free."""

from __future__ import annotations

import math

import bench_auto
import numpy as np

from .loop import WINDOW

RATIO_BEST = 1.15       # auto within 15% of the best fixed policy
RATIO_SYNC = 1.05       # auto within 5% of sync where echoing never pays
PAYS = 1.05             # echoing "pays" when sync's median is more than 5% above the best fixed policy's
NO_STEP_DOWN = 0.90     # scripted streams that pay throughout: no step-down in >= 90% of runs
HURTS_WINDOWS = 3       # scripted stream "hurts": K = 1 within 3 windows


def score(task, run) -> dict:
    """The metric after every fresh batch and the training clock at which it reaches the
    target and stays there (smoothed as bench_auto.py does, for noisy metrics; raw beside it)."""
    metric = run.extra["metric"] if run.checkpoints is None else task.evaluate(run.checkpoints)
    metric = np.asarray(metric, dtype=float)
    curve = bench_auto.smoothed(metric) if task.smooth else metric
    T = bench_auto.reaches_and_stays(curve, task.target)
    T_raw = bench_auto.reaches_and_stays(metric, task.target)
    return {"metric": metric, "T": T, "time": None if T is None else float(run.times[T]),
            "T_raw": T_raw, "time_raw": None if T_raw is None else float(run.times[T_raw]),
            "final": float(metric[-1])}


def median(xs):
    """Median with None (never reached) as +inf; None if the median is +inf."""
    if not xs:
        return None
    v = float(np.median([math.inf if x is None else x for x in xs]))
    return v if math.isfinite(v) else None


def ratio(a, b):
    if b is None:
        return None
    return math.inf if a is None else a / b


def fmt(x, digits=2, none="never"):
    """A number, "never" for a time never reached (None), "inf" for an infinite ratio."""
    if x is None:
        return none
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}f}"


def cap_changes(caps) -> str:
    """'batch:cap' at each change (the first batch included)."""
    out, prev = [], None
    for t, c in enumerate(caps):
        if c != prev:
            out.append(f"{t}:{int(c)}")
            prev = c
    return " ".join(out)


def step_downs(caps, decisions) -> dict:
    """Did the cap ever decrease (records' cap per fresh batch: a test of a smaller cap
    counts too)? Did the controller ever switch its cap down (its decision log: a
    "switch" or "step down" to a cap below the previous one)?"""
    caps = np.asarray(caps)
    strict = bool(len(caps) > 1 and np.any(np.diff(caps) < 0))
    down = False
    for d in decisions:
        prev, new = d.get("previous"), d.get("cap")
        if d.get("action") in ("switch", "step down") and isinstance(prev, (int, np.integer)) \
                and isinstance(new, (int, np.integer)):
            down |= new < prev
    return {"cap_decreased": strict, "switched_down": down}


def first_at_one(caps):
    idx = np.flatnonzero(np.asarray(caps) == 1)
    return int(idx[0]) if len(idx) else None


def case_result(task, runs: list, seeds: list, load: tuple, seconds: float) -> dict:
    """Medians, ratios and checks of one case from its scored runs (dicts)."""
    labels = list(dict.fromkeys(r["policy"] for r in runs))
    by = {p: sorted((r for r in runs if r["policy"] == p), key=lambda r: r["seed"]) for p in labels}
    med = {p: median([r["time"] for r in rs]) for p, rs in by.items()}
    fixed = [p for p in labels if p != "auto"]
    reached = [p for p in fixed if med[p] is not None]
    best = min(reached, key=lambda p: med[p]) if reached else None
    res = {"case": task.name, "title": task.title, "describe": task.describe(), "kind": task.kind,
           "metric": task.metric, "target": task.target, "budget": task.budget, "B": task.B,
           "lr": getattr(task, "lr", None), "t_load": task.t_load, "t_step": task.t_step,
           "R": task.t_load / task.t_step, "seeds": list(seeds), "loadavg": list(load), "seconds": seconds,
           "median_s": med, "best": best,
           "per_seed_s": {p: [r["time"] for r in rs] for p, rs in by.items()},
           "mean_K": {p: float(np.mean([np.mean(r["echo"]) for r in rs])) for p, rs in by.items()},
           "T_median": {p: median([r["T"] for r in rs]) for p, rs in by.items()},
           "load_ms": {p: float(np.nanmean([r["load_ms"] for r in rs])) for p, rs in by.items()},
           "step_ms": {p: float(np.nanmean([r["step_ms"] for r in rs])) for p, rs in by.items()},
           "run_s": {p: float(np.mean([r["wall_s"] for r in rs])) for p, rs in by.items()},
           "signals": sorted({r["signals"] for r in runs})}
    sync = "sync" if "sync" in med else None
    res["sync_over_best"] = ratio(med[sync], med[best]) if sync and best else None
    pays = res["sync_over_best"] is not None and res["sync_over_best"] > PAYS
    res["echoing_pays"] = pays if sync and best else None
    if "auto" in by:
        auto = by["auto"]
        per_seed = []
        for r in auto:
            peers = [q["time"] for p in fixed for q in by[p] if q["seed"] == r["seed"] and q["time"] is not None]
            per_seed.append(ratio(r["time"], min(peers)) if peers else None)
        res["auto_over_best_per_seed"] = per_seed
        res["auto_over_best"] = ratio(med["auto"], med[best]) if best else None
        res["auto_over_sync"] = ratio(med["auto"], med[sync]) if sync else None
        res["auto_caps"] = {r["seed"]: cap_changes(r["cap"]) for r in auto}
        sd = [step_downs(r["cap"], r["decisions"]) for r in auto]
        res["no_cap_decrease"] = sum(not s["cap_decreased"] for s in sd) / len(sd)
        res["no_switch_down"] = sum(not s["switched_down"] for s in sd) / len(sd)
        res["cap_at_one"] = {r["seed"]: first_at_one(r["cap"]) for r in auto}
        res["at_one_after"] = {r["seed"]: (None if first_at_one(r["cap"]) is None else
                                           float(np.mean(np.asarray(r["cap"][first_at_one(r["cap"]):]) == 1)))
                               for r in auto}
        checks = {}
        if res["auto_over_best"] is not None:
            checks["auto within 15% of best"] = res["auto_over_best"] <= RATIO_BEST
        if res["echoing_pays"] is False and res["auto_over_sync"] is not None:
            checks["auto within 5% of sync (echoing never pays)"] = res["auto_over_sync"] <= RATIO_SYNC
        if task.kind == "scripted" and getattr(task, "echo_value", 0) > 0:
            checks["no step-down in >= 90% of runs"] = res["no_cap_decrease"] >= NO_STEP_DOWN
        if task.kind == "scripted" and getattr(task, "echo_value", 0) < 0:
            at = list(res["cap_at_one"].values())
            checks["K = 1 within 3 windows"] = all(a is not None and a <= HURTS_WINDOWS * WINDOW for a in at)
        res["checks"] = checks
    return res


def case_markdown(res: dict) -> str:
    L = [f"### {res['title']} (`{res['case']}`)\n", res["describe"] + ".\n",
         (f"Loader {1e3 * res['t_load']:g} ms per fresh batch, step {1e3 * res['t_step']:g} ms (R = {res['R']:.0f}); "
         f"seeds {res['seeds']}; load average {res['loadavg'][0]:.2f} at the start, {res['loadavg'][1]:.2f} at "
         f"the end; {res['seconds']:.0f} s; signals {', '.join(res['signals'])}.\n"),
         ("| policy | median s to target | per seed (s) | fresh batches to target (median) | mean K | "
         "loader ms / step ms (in the loop) | one run (s) |"),
         "|---|---:|---|---:|---:|---:|---:|"]
    for p, m in res["median_s"].items():
        tag = " (best)" if p == res["best"] else ""
        L.append(f"| {p}{tag} | {fmt(m)} | {', '.join(fmt(x) for x in res['per_seed_s'][p])} | "
                 f"{fmt(res['T_median'][p], 0)} | {res['mean_K'][p]:.2f} | "
                 f"{res['load_ms'][p]:.1f} / {res['step_ms'][p]:.2f} | {res['run_s'][p]:.1f} |")
    pays = res["echoing_pays"]
    L.append(f"\nechoing pays here: **{'yes' if pays else 'no' if pays is False else 'n/a'}** "
             f"(sync / best fixed = {fmt(res['sync_over_best'], none='n/a')}).")
    if "auto_over_best" in res:
        L.append(f"auto / best fixed ({res['best']}): **{fmt(res['auto_over_best'], none='n/a')}** on the medians; per seed "
                 f"{', '.join(fmt(x, none='n/a') for x in res['auto_over_best_per_seed'])}; auto / sync "
                 f"{fmt(res['auto_over_sync'], none='n/a')}.")
        L.append(f"auto's runs with no cap decrease {res['no_cap_decrease']:.0%}, with no decision to switch "
                 f"down {res['no_switch_down']:.0%}.")
        if res["kind"] == "scripted":
            L.append("cap reached 1 at fresh batch (window): " + ", ".join(
                f"seed {s}: {'never' if a is None else f'{a} ({a / WINDOW:.1f})'}" for s, a in res["cap_at_one"].items())
                + "; share of fresh batches at cap 1 from then on: " + ", ".join(
                f"{'-' if v is None else format(v, '.0%')}" for v in res["at_one_after"].values()) + ".")
        L.append("checks: " + ("; ".join(f"{k}: {'PASS' if v else 'FAIL'}" for k, v in res["checks"].items())
                               or "none applicable") + ".")
        L.append("\nauto's caps (fresh batch:cap at each change), per seed:\n")
        L.extend(f"- seed {s}: {c}" for s, c in res["auto_caps"].items())
    return "\n".join(L) + "\n"


def summary_markdown(results: list) -> str:
    L = [("| case | best fixed | its median s | sync median s | echoing pays | auto median s | auto / best | "
         "auto / best per seed | auto / sync | no cap decrease | no switch down | cap at 1 (batch) | checks |"),
         "|---|---|---:|---:|---|---:|---:|---|---:|---:|---:|---|---|"]
    for r in results:
        b = r["best"]
        at1 = ", ".join("never" if a is None else str(a) for a in r.get("cap_at_one", {}).values()) \
            if r["kind"] == "scripted" else ""
        checks = r.get("checks", {})
        ok = "all pass" if checks and all(checks.values()) else \
            "; ".join(f"FAIL {k}" for k, v in checks.items() if not v) or "-"
        L.append(f"| {r['case']} | {b} | {fmt(r['median_s'].get(b))} | {fmt(r['median_s'].get('sync'))} | "
                 f"{'yes' if r['echoing_pays'] else 'no' if r['echoing_pays'] is False else 'n/a'} "
                 f"({fmt(r['sync_over_best'], none='n/a')}) | {fmt(r['median_s'].get('auto'))} | "
                 f"{fmt(r.get('auto_over_best'), none='n/a')} | {', '.join(fmt(x, none='n/a') for x in r.get('auto_over_best_per_seed', []))} | "
                 f"{fmt(r.get('auto_over_sync'), none='n/a')} | "
                 f"{'' if 'no_cap_decrease' not in r else format(r['no_cap_decrease'], '.0%')} | "
                 f"{'' if 'no_switch_down' not in r else format(r['no_switch_down'], '.0%')} | {at1} | {ok} |")
    return "\n".join(L) + "\n"
