"""Echoing measured in the loop's records: the noise scale and paired next-batch progress
under K against K = 1, and how they enter the T(K, B) model and the plan."""

import numpy as np
import pytest

import echosim
from echosim.planner.echo_signals import echo_gains, measured_noise_scale
from echosim.planner.response import fit_response


def run(policy, n=40, B=64, progress=1.0, noise=0.05, grad=None, seed=0):
    """Records of a toy loop: a loss falling by `progress` per fresh batch on unseen data (the paired
    reading), with noise; optionally squared gradient norms (b, |g_b|^2, |g_B|^2)."""
    rng = np.random.default_rng(seed)
    it = echosim.echoing(range(n), policy, batch_size=B)
    loss = 100.0
    for _ in it:
        if not it.is_echo:
            before = loss + progress + noise * rng.normal()  # at the weights the previous batch started from
            kw = {"lagged_loss": (before, loss)}
            if grad is not None:
                kw["grad_sq"] = grad
            it.report(loss, **kw)
        else:
            it.report(loss)
        loss -= progress / max(1, (it.K or 1))  # each step's share of the batch's progress
    return it.records()


def test_gains_from_paired_progress():
    sync = run("sync", progress=1.0)
    k4 = run(4, progress=2.5, seed=1)
    gains = echo_gains([sync, k4])
    (g, se, n), = [gains[(64, 4)]]
    assert g == pytest.approx(2.5, rel=0.05) and 0 < se < 0.1 and n >= 30
    assert echo_gains([k4]) == {}  # no K = 1 to compare with: nothing measured


def test_gains_enter_the_model():
    data = {64: 1100.0, 1024: 160.0}
    worth = fit_response(data, echo_gains={(1024, 4): (3.6, 0.05)})
    worthless = fit_response(data, echo_gains={(1024, 4): (1.05, 0.05)})
    assert "paired progress" in worth.echo_source
    assert worth.predict(4, 1024) < 0.4 * 160 and worthless.predict(4, 1024) > 0.8 * 160


def test_measured_noise_scale():
    # |g_b|^2 = |G|^2 + tr/b, |g_B|^2 = |G|^2 + tr/B: with |G|^2 = 1, tr = 500, b = 8, B = 64 -> 500
    r = run("sync", grad=(8, 1 + 500 / 8, 1 + 500 / 64))
    assert measured_noise_scale(r) == pytest.approx(500, rel=1e-6)
    assert measured_noise_scale(run("sync")) is None


@pytest.mark.parametrize("bad, match", [
    ({(1024, 1): (1.0, 0.1)}, "K >= 2"),
    ({(1024, 4): (5.0, 0.1)}, r"\[1/K, K\]"),
    ({(1024, 4): (2.0, 0.0)}, "standard error > 0"),
    ({(1024, 4): "x"}, "expected \\(K_eff"),
    ([1, 2], "mapping"),
])
def test_bad_gains(bad, match):
    with pytest.raises(ValueError, match=f"^echo_gains.*{match}"):
        fit_response({64: 1100.0, 1024: 160.0}, echo_gains=bad)


def test_plan_without_an_echoed_measurement_gives_no_verdict():
    """'Do not echo' from the prior alone is never the answer: the plan says what it would need."""
    p = echosim.plan("80ms", "10ms", batch_size=64, steps_to_target={64: 6000, 1024: 400}, seeds=2)
    assert p.recommended["policy"] == "sync"
    assert "no verdict" in p.reason and "K = " in p.reason and "pilot" in p.reason


def test_plan_reads_paired_progress_from_the_records():
    sync = run("sync", n=40, B=1024, progress=1.0)
    k4 = run(4, n=40, B=1024, progress=3.0, seed=1)
    p = echosim.plan(records=[sync, k4], batch_size=1024, steps_to_target={64: 1100, 1024: 160}, seeds=1)
    assert "paired progress in the loop at (B=1024, K=4)" in p.source
    assert "no verdict" not in p.reason


def curve_run(policy, per_batch, n=40, B=256, seed=0):
    """A run whose first-step losses fall by `per_batch` per fresh batch (plus noise), without
    paired progress: what `echosim.pilot`'s segments record."""
    rng = np.random.default_rng(seed)
    it = echosim.echoing(range(n), policy, batch_size=B)
    t = -1
    for _ in it:
        if not it.is_echo:
            t += 1
        it.report(50.0 - per_batch * t + 0.05 * rng.normal())
    return it.records()


def lagged_segment(policy, batches: int, loss: float, rate: float, rng):
    """One pilot segment through `echoing` on the curve loss -> 1: batch t's steps cut
    (loss - 1) by rate x K_eff (1 under sync, 2.5 under K = 4), seen by the next batch,
    whose lagged loss is reported. Returns (records, the loss after the segment)."""
    k_eff = {"sync": 1.0, 4: 2.5}[policy]
    it = echosim.echoing(range(batches), policy, batch_size=64)
    prev = None
    for _ in it:
        if it.is_echo:
            it.report(loss)
            continue
        e = 0.002 * rng.normal()
        it.report(loss + e, **({} if prev is None else {"lagged_loss": (prev + e, loss + e)}))
        prev = loss
        loss -= k_eff * rate * (loss - 1.0)  # this batch's steps, seen by the next one
    return it.records(), loss


def test_gains_from_loss_curves_when_no_paired_progress():
    segs = [curve_run("sync", 0.2, seed=s) for s in (0, 1)] + [curve_run(4, 0.5, seed=s) for s in (2, 3)]
    (g, se, n), = [echo_gains(segs)[(256, 4)]]
    assert g == pytest.approx(2.5, rel=0.05) and se <= 0.2 and n == 80


def test_gains_at_the_same_loss_level_in_a_pilot_s_interleaved_segments():
    """Sync's segments come earlier in training (where progress per batch is larger) than K's:
    comparing means pools different stretches; comparing at the same loss level does not."""
    rng = np.random.default_rng(0)
    loss, recs = 3.0, []
    order = ["sync", 4, "sync", 4, 4, "sync", "sync", 4]
    for policy in order:
        r, loss = lagged_segment(policy, 10, loss, 0.03, rng)
        recs.append(r)
    (g, se, n), = [echo_gains(recs)[(64, 4)]]
    assert g == pytest.approx(2.5, rel=0.1) and se < 0.2 and n == 4 * 9  # 9 paired readings a segment
    # pooled means, as before: biased low (sync sat higher on the curve)
    pm = [np.nanmean(r.paired_progress) for r in recs]
    naive = np.mean([m for m, p in zip(pm, order) if p == 4]) / np.mean([m for m, p in zip(pm, order) if p == "sync"])
    assert naive < 2.0


def test_a_gain_the_readings_do_not_resolve_is_left_out():
    """Readings whose noise swamps the difference between K_eff = 1 and K_eff = K say nothing:
    left out (the plan then says no echoed measurement), not weighed at a clipped value."""
    sync = run("sync", progress=1.0, noise=0.05)
    k4 = run(4, progress=0.3, noise=8.0, seed=1)   # progress 0.3 +- 8 per reading: unresolved
    assert echo_gains([sync, k4]) == {}
    k4 = run(4, progress=0.3, noise=0.05, seed=1)  # the same mean, resolved: kept
    assert echo_gains([sync, k4])[(64, 4)][0] == pytest.approx(0.3, rel=0.1)


def test_gains_at_the_same_loss_level_when_every_segment_starts_from_the_same_weights():
    """A pilot with `reset`: every segment starts at the same loss, so sync's segments share one
    mean level, above K's; sync's single readings span K's levels. On a curve where progress
    per batch shrinks with the loss, the same-batches ratio is biased low; at the same level it
    is K_eff."""
    rng = np.random.default_rng(1)
    # reset: the same start (loss 3) every segment
    recs = [lagged_segment(policy, 12, 3.0, 0.08, rng)[0] for policy in ["sync", 4, 4, "sync", "sync", 4, 4, "sync"]]
    (g, se, n), = [echo_gains(recs)[(64, 4)]]
    assert g == pytest.approx(2.5, rel=0.1) and se < 0.2 and n == 4 * 11
    pm = [np.nanmean(r.paired_progress) for r in recs]
    same_batches = np.mean(pm[1:3] + pm[5:7]) / np.mean(pm[0:1] + pm[3:5] + pm[7:8])
    assert same_batches < 2.0  # what a line through the segments' means (one sync level) falls back to
