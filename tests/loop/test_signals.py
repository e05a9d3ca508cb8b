"""The signals: the gradient-noise scale's estimator against its expectation, the carry-over
fraction, and what `report` records of them."""

import math

import numpy as np
import pytest

import echosim
from echosim.loop.signals import carry_over, noise_scale


def test_noise_scale_is_exact_on_expected_norms():
    """With E|g_b|^2 = |G|^2 + tr/b given exactly, the estimate is tr / |G|^2 at every entry."""
    G2, tr, B = 0.5, 40.0, 64
    b = np.array([0, 16, 32, 8])
    small = G2 + tr / np.maximum(b, 1)
    full = np.full(4, G2 + tr / B)
    out = noise_scale(B, b, small, full)
    assert math.isnan(out[0]) and np.allclose(out[1:], tr / G2, rtol=1e-12)


def test_noise_scale_on_sampled_gradients_of_a_known_distribution():
    """Per-example gradients g_i = G + N(0, I_d): tr(Sigma) = d, so B_noise = d / |G|^2."""
    rng = np.random.default_rng(0)
    d, B, b, G = 20, 64, 16, np.full(20, 0.3)
    rows = []
    for _ in range(400):
        g = G + rng.standard_normal((B, d))
        rows.append((np.sum(g[:b].mean(0) ** 2), np.sum(g.mean(0) ** 2)))
    small, full = np.array(rows).T
    est = noise_scale(B, np.full(400, b), small, full, memory=400)[-1]
    assert est == pytest.approx(d / np.sum(G ** 2), rel=0.15)


def test_carry_over_is_the_ratio_of_sums_per_window():
    p = np.array([1.0, 1.0, np.nan, 0.5, 2.0, 2.0])
    q = np.array([2.0, 2.0, 1.0, 1.0, 4.0, -1.0])
    out = carry_over(p, q, window=3)
    assert out[0] == pytest.approx(0.5) and out[1] == pytest.approx(4.5 / 4.0)


def test_report_records_every_signal_and_the_paired_progress():
    it = echosim.echoing(range(4), 2, batch_size=8)
    losses = iter([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    for batch in it:
        kw = {}
        if not it.is_echo and batch > 0:
            kw["lagged_loss"] = 2.0 - batch / 10  # at the weights the previous batch started from
        if it.probe_due:
            kw["probe"] = 5.0
        if not it.is_echo:
            kw["grad_sq"] = (4, 3.0, 2.0)
        it.report(next(losses), **kw)
    r = it.records()
    assert r.first_loss.tolist() == [1.0, 0.8, 0.6, 0.4]
    np.testing.assert_allclose(r.paired_progress[:3], [1.9 - 0.8, 1.8 - 0.6, 1.7 - 0.4])
    assert math.isnan(r.paired_progress[3]) and r.probe[0] == 5.0 and np.isnan(r.probe[1:]).all()
    assert r.small_batch.tolist() == [4] * 4 and r.grad_sq_full.tolist() == [2.0] * 4
    assert np.isfinite(r.noise_scale()).all()


def test_signals_survive_a_save_and_load(tmp_path):
    it = echosim.echoing(range(3), 1)
    for batch in it:
        it.report(1.0, **({"lagged_loss": (2.0, 1.5)} if batch else {}))
    path = it.records().save(tmp_path / "r.npz")
    back = echosim.load_records(path)
    np.testing.assert_array_equal(back.lagged_before, it.records().lagged_before)
    assert back.paired_progress[0] == 0.5


@pytest.mark.parametrize("kw, match", [
    ({"lagged_loss": "x"}, "^report: lagged_loss"), ({"lagged_loss": (1.0, 2.0, 3.0)}, "^report: lagged_loss"),
    ({"probe": [1.0]}, "^report: probe"), ({"probe": 1 + 2j}, "^report: probe"),
    ({"grad_sq": (0, 1.0, 1.0)}, "^report: grad_sq"), ({"grad_sq": (2, -1.0, 1.0)}, "^report: grad_sq"),
    ({"grad_sq": [2, 1.0, 1.0]}, "^report: grad_sq")])
def test_bad_signals_name_the_argument(kw, match):
    it = echosim.echoing(range(3), 2, batch_size=8)
    next(it)
    with pytest.raises(ValueError, match=match):
        it.report(1.0, **kw)


def test_lagged_loss_only_on_a_fresh_batch():
    it = echosim.echoing(range(3), 2)
    next(it)
    it.report(1.0)
    next(it)
    assert it.is_echo
    with pytest.raises(ValueError, match="first step"):
        it.report(1.0, lagged_loss=2.0)


@pytest.mark.parametrize("loss", [np.complex128(1 + 2j), 10 ** 400, np.array([1.0, 2.0]), object()])
def test_report_refuses_what_is_not_a_real_scalar(loss):
    it = echosim.echoing(range(2), 1)
    next(it)
    with pytest.raises(ValueError, match="^report: loss"):
        it.report(loss)


def test_a_loss_that_overflows_when_squared_is_divergence_not_a_crash():
    it = echosim.echoing(range(40), "auto", max_echo=4)
    with pytest.warns(RuntimeWarning, match="diverged"):
        for i, batch in enumerate(it):
            it.report(1e200 * (1 + i))
    assert it.records().cap[-1] == 1 and it.summary()["auto"]["cap"] == 1
