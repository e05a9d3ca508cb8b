"""The planner's choice among its evaluated candidates: the best one per batch size and
overall, by the rule the sweep's answer uses (`echosim.experiments.choice`), each with
its reason in words (why echo or not, K against R, the band, the theory's ceiling).
"""

from __future__ import annotations

import math

import numpy as np

from echosim.pipeline.model import POLICIES
from echosim.planner.candidates import BASELINE
from echosim.planner.result import candidate_name, format_band
from echosim.planner.timing import format_count, format_duration

__all__ = ["recommend"]


def recommend(cands, batch_sizes, priced: bool, measured_echo: bool = True, k_max: float = math.inf):
    """(best, reasons, recommended, reason): the best reachable candidate per batch size
    (``best[B]`` with ``reasons[B]``) and overall; the cheapest when `priced`, else the
    fastest. Without a measurement of echoing (`measured_echo` False), a 'do not echo'
    says what would settle it; `k_max`: the largest K whose gain the model credits (the
    largest measured, at one learning rate), named where the choice stops at it.
    At least one candidate must reach the target."""
    reachable = [c for c in cands if math.isfinite(c["wall_clock_to_target"])]
    best, reasons = {}, {}
    for B in batch_sizes:
        mine = [c for c in reachable if c["batch_size"] == B]
        if mine:
            best[B], reasons[B] = _recommend(cands, mine, priced, k_max)
    rec, reason = _recommend(cands, reachable, priced, k_max)
    if not measured_echo:
        reasons = {B: _unmeasured(c, r, cands) for (B, c), r in zip(best.items(), reasons.values())}
        reason = _unmeasured(rec, reason, cands)
    return best, reasons, rec, reason


def _unmeasured(rec, reason: str, cands) -> str:
    """With no echoed measurement, 'do not echo' is the prior's guess, not a finding: say what
    would settle it (a pilot at the most promising K, or paired progress in the loop)."""
    if rec["policy"] != BASELINE or rec["R"] <= 1.0:
        return reason
    B, W = rec["batch_size"], rec["workers"]
    echo = [c for c in cands if POLICIES[c["policy"]].takes_echo and c["batch_size"] == B and c["workers"] == W
            and math.isfinite(c["wall_clock_to_target"])]
    K = format_count(min(echo, key=lambda c: c["wall_clock_low"])["echo"]) if echo else "4"
    why = reason.split(": ", 1)[1] if reason.startswith("do not echo: ") else reason
    return (f"no echoing measured, so no verdict on echoing: without an echoed measurement the model's prior "
            f"predicts no gain ({why}); to decide, measure echoing at B = {B}, K = {K}: steps to target there, "
            "or a pilot (echosim.pilot) whose records carry paired next-batch progress (report(lagged_loss=...)) "
            "under K and under sync")


def _recommend(cands, reachable, priced: bool, k_max: float = math.inf):
    """The best of `reachable` and why, by the rule the sweep's answer uses
    (`echosim.experiments.choice`): robust over the seeds, the fastest (cheapest with prices)
    within the noise, then the fewest accelerator steps."""
    from echosim.experiments.choice import TOLERANCE, choose

    key = (lambda c: c["cost"]) if priced else (lambda c: c["wall_clock_to_target"])

    def per_seed(c):  # the time (or cost) of each loader/data seed, scaled as the median
        seeds = np.asarray(c.get("wall_clock_seeds") or [c["wall_clock_to_target"]], dtype=float)
        return seeds * (key(c) / c["wall_clock_to_target"]) if priced and c["wall_clock_to_target"] > 0 else seeds

    choice = choose([per_seed(c) for c in reachable], [c["steps_to_target"] for c in reachable])
    rec, fastest = reachable[choice.index], reachable[choice.fastest_median]
    B, W, R = rec["batch_size"], rec["workers"], rec["R"]
    what = "cheapest" if priced else "fastest"
    shown = format_duration(key(fastest)) if not priced else f"{key(fastest):.3g}"
    if fastest is not rec and choice.why in ("fewer steps", "simpler"):
        how = "with fewer steps" if choice.why == "fewer steps" else "with as many steps, and simpler"
        what = f"within the noise ({TOLERANCE:.0%} or the seeds' spread) of the {what} ({candidate_name(fastest)}, {shown}) {how}"
    elif fastest is not rec:
        what = (f"{what} over the seeds ({candidate_name(fastest)} is {what} in the median, {shown}, but slower "
                "on a quarter of the seeds)")
    wall, band = format_band(rec).split(" (")
    band = band.rstrip(")") + " " + wall.split(" ")[1]
    base = next(c for c in cands if c["policy"] == BASELINE and c["batch_size"] == B and c["workers"] == W)
    row = POLICIES[rec["policy"]]
    if rec["policy"] == BASELINE:
        echo = [c for c in reachable if c["policy"] != BASELINE and c["batch_size"] == B and c["workers"] == W]
        if R <= 1.0:
            why = (f"the loader keeps up (it needs {R:.2g}x a step per batch with {W} worker(s)), so the "
                   "accelerator never waits and echoing has nothing to fill")
        elif echo:
            b = min(echo, key=key)
            why = (f"the best echoing candidate ({candidate_name(b)}) reaches the target in "
                   f"{format_duration(b['wall_clock_to_target'])}, no better than without echoing: repeated "
                   "batches are worth little here (the run is noise-dominated)")
        else:
            why = "no echoing candidate reached the target"
        reason = f"do not echo: {why}; {wall} to target (10-90%: {band})"
    else:
        sp = rec["speedup"]
        reason = (f"{what}: {wall} to target (10-90%: {band}), {sp:.2f}x sooner than sync at the same B "
                  f"({format_duration(base['wall_clock_to_target'])})")
        if row.takes_echo:
            K = rec["echo"]
            if K >= R:
                reason += (f"; the loader is R = {R:.2g}x slower than a step, and K = {format_count(K)} >= R already fills "
                           "the accelerator's idle time (larger K costs wall-clock per batch)")
            elif K >= k_max:
                reason += (f"; K = {format_count(K)} < R = {R:.2g}, but no larger K was measured, and at one learning "
                           "rate a larger K is a larger step that can need more fresh batches, not fewer: pilot "
                           f"K = {format_count(2 * K)} to see whether it pays")
            else:
                reason += (f"; K = {format_count(K)} < R = {R:.2g}: larger K would be free, but the fresh batches needed "
                           "stop falling (echoed steps are worth less than fresh ones)")
        elif not row.coupled:  # capped by the loader's waits alone
            reason += (f"; {row.name} echoes exactly while the next batch loads (mean K = {rec['echo']:.2g}, at most "
                       f"{rec['max_echo']}: echoing(..., policy={row.name!r}, max_echo={rec['max_echo']}); R = {R:.2g}), "
                       "so it adapts to the loader's variability without choosing K")
        else:  # capped, under caps decided from the run's losses
            reason += (f"; {row.name} echoes while the next batch loads under a cap it tunes from the first-step "
                       f"losses (mean K = {rec['echo']:.2g}, at most {rec['max_echo']}; R = {R:.2g}): "
                       f"echoing(policy={row.name!r}) runs the same controller in your loop")
        if rec["speedup_ceiling"] > 0:
            reason += f"; the theory's ceiling for it is {rec['speedup_ceiling']:.2g}x"
        if rec["wall_clock_high"] >= base["wall_clock_to_target"]:
            reason += ("; but its 90% quantile is no better than the median without echoing, so the gain is "
                       "within the uncertainty (a pilot at this K would tell)")
    if priced:
        reason += f"; cost {rec['cost']:.4g} per run (sync: {base.get('cost', math.nan):.4g})"
    return rec, reason
