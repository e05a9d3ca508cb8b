"""The T(K, B) model: K = 1 fitted exactly, echoed measurements learned, the ceiling and the
plateau, honest bands where echoing's effect is unknown, variable echo batch by batch, and
bad input."""

import numpy as np
import pytest

from echosim.planner.response import fit_response, k_eff, kappa, measurements, t_one

S, E = 40.0, 2e4  # McCandlish: T(1, B) = 40 + 2e4/B, noise scale 500


def truth(K, B, Be=2000.0, g=1.5):
    return float(t_one(S, E, B) / k_eff(K, kappa(B, Be, g)))


def k1(*Bs):
    return {B: truth(1, B) for B in Bs}


def band(fit, K, B):
    lo, hi = np.quantile(fit.predict_draws(K, B), [0.1, 0.9])
    return lo, hi


def test_k1_measurements_are_fitted_exactly():
    fit = fit_response(k1(16, 256, 4096))
    assert fit.params["S"] == pytest.approx(S, rel=1e-8) and fit.params["E"] == pytest.approx(E, rel=1e-8)
    for B in (16, 100, 4096):
        assert fit.predict(1, B) == pytest.approx(truth(1, B), rel=1e-8)


def test_echoing_never_hurts_and_never_beats_the_ceiling():
    fit = fit_response(k1(64, 1024))
    Ks = np.array([1, 2, 4, 8, 16, 64])
    for B in (16, 1024, 16384):
        T = fit.predict(Ks, B)
        assert np.all(np.diff(T) <= 0)                   # more echo, never more fresh batches
        assert np.all(T >= T[0] / Ks * (1 - 1e-12))      # an echoed step is worth at most a fresh one
        draws = fit.predict_draws(16, B)
        assert np.all(draws >= 1)


def test_k1_only_the_band_is_wide_where_echoing_is_unidentified():
    """Runs without echoing cannot tell how much an echoed step is worth; the band says so:
    at small B (noise-dominated) echoing can only save a little, at large B anywhere from
    little to K-fold."""
    fit = fit_response(k1(64, 1024))
    assert "prior" in fit.echo_source
    lo1, hi1 = band(fit, 1, 1024)
    lo8, hi8 = band(fit, 8, 16384)
    assert hi8 / lo8 > 2 * (hi1 / lo1)
    assert lo8 < truth(8, 16384) < hi8


def test_one_echoed_measurement_pins_its_batch_size():
    data = {**k1(64, 1024), (1024, 8): 8 * truth(8, 1024)}
    fit = fit_response(data)
    assert "posterior" in fit.echo_source and "(B=1024, K=8)" in fit.echo_source
    assert fit.predict(8, 1024) == pytest.approx(truth(8, 1024), rel=0.15)  # within its observation error
    lo_p, hi_p = band(fit_response(k1(64, 1024)), 8, 1024)
    lo, hi = band(fit, 8, 1024)
    assert (hi / lo) < 0.8 * (hi_p / lo_p)  # learned: the band narrows where it was measured


def test_two_echoed_measurements_pin_the_saturation_curve():
    data = {**k1(64, 1024), (1024, 8): 8 * truth(8, 1024), (4096, 16): 16 * truth(16, 4096)}
    fit = fit_response(data, n_draws=800)
    for K, B in ((4, 2048), (2, 512), (16, 8192)):  # between and beyond the two pilots
        assert fit.predict(K, B) == pytest.approx(truth(K, B), rel=0.25)


def test_a_schedule_is_taken_batch_by_batch():
    fit = fit_response({**k1(64, 1024), (1024, 8): 8 * truth(8, 1024)})
    B = 1024
    assert fit.predict_schedule(np.full(10_000, 8), B) == np.ceil(fit.predict(8, B) - 1e-9)
    # the same mean echo, varying: fewer fresh steps' worth (K_eff is concave), so no sooner
    varying = np.tile([2, 14], 5_000)
    assert fit.predict_schedule(varying, B) >= fit.predict_schedule(np.full(10_000, 8), B)
    assert fit.predict_schedule(np.full(3, 1), B) == np.inf  # too short to reach the target
    d = fit.predict_schedule(np.full(10_000, 8), B, draws=True)
    assert d.shape == (fit.draws["S"].size,) and np.all(d >= 1)
    assert fit.predict_schedule(np.full(10_000, 1), B) == np.ceil(fit.predict(1, B) - 1e-9)


def test_one_learning_rate_credits_no_gain_beyond_the_largest_measured_k():
    """lr="fixed" (the user's loop keeps its step): up to the largest measured K the fit is the
    tuned one, draw for draw; beyond it K_eff is held, so a larger K (or a schedule's larger
    K_t) needs as many fresh batches as that K, never fewer; without an echoed measurement the
    two are the same model."""
    data = {**k1(64, 1024), (1024, 4): 4 * truth(4, 1024)}
    tuned, fixed = fit_response(data), fit_response(data, lr="fixed")
    assert tuned.k_max == np.inf and fixed.k_max == 4.0 and "up to K = 4" in fixed.echo_source
    for B in (64, 1024, 8192):
        for K in (1, 2, 4):
            assert fixed.predict(K, B) == tuned.predict(K, B)
            np.testing.assert_array_equal(fixed.predict_draws(K, B), tuned.predict_draws(K, B))
        assert fixed.predict(16, B) == fixed.predict(4, B) > tuned.predict(16, B)
    assert fixed.predict_schedule(np.full(10_000, 16), 1024) == fixed.predict_schedule(np.full(10_000, 4), 1024)
    assert fixed.predict_schedule(np.tile([1, 31], 5_000), 1024) > tuned.predict_schedule(np.tile([1, 31], 5_000), 1024)
    gains = fit_response(k1(64, 1024), echo_gains={(1024, 2): (1.8, 0.1)}, lr="fixed")
    assert gains.k_max == 2.0 and gains.predict(8, 1024) == gains.predict(2, 1024)
    prior = fit_response(k1(64, 1024), lr="fixed")
    assert prior.k_max == np.inf and prior.predict(16, 1024) == fit_response(k1(64, 1024)).predict(16, 1024)
    with pytest.raises(ValueError, match="lr: expected 'tuned'"):
        fit_response(data, lr="constant")


def test_uncertainty_from_repeats():
    rng = np.random.default_rng(np.random.SeedSequence(3))
    data = {B: list(truth(1, B) * np.exp(rng.normal(0, 0.05, 6))) for B in (32, 256, 2048)}
    fit = fit_response(data, n_draws=300)
    assert "repeated" in fit.uncertainty
    lo, hi = np.quantile(fit.draws["S"], [0.01, 0.99])
    assert lo < S < hi


def test_measurement_keys_and_steps():
    got = measurements({64: 100, (1024, 4): 20, 256: [10, 12]})
    assert got == [(64, 1, 100.0), (1024, 4, 5.0), (256, 1, 10.0), (256, 1, 12.0)]  # steps / K = fresh batches
    assert measurements({(64, 4): 4, (64, 4096): 4096}) == [(64, 4, 1.0), (64, 4096, 1.0)]  # K steps: one batch


@pytest.mark.parametrize("data, match", [
    ({64: 100}, "two or more batch sizes"),
    ({64: 100, (1024, 4): 20}, "two or more batch sizes"),
    ({64: 100, 128: -1}, "steps >= 1"),
    ({64: 100, 128: float("nan")}, "finite"),
    ({0: 5, 64: 100}, "batch size B in key 0 must be an integer >= 1"),
    ({64: 100, 128: 50, (128, 0): 10}, r"echo factor K in key \(128, 0\) must be an integer >= 1"),
    ({64: 100, 128: 50, (128, 1.5): 10}, r"echo factor K in key \(128, 1.5\) must be an integer >= 1"),
    ({64: 100, 128: 50, (128, 2, 3): 10}, "a pair"),
    ({64: 100, 128: "many"}, "finite number"),
    ([100, 200], "mapping"),
    ({64: 100, 1024: 20, (256, 4): 3}, "at least K = 4 steps"),  # fewer steps than one batch's K
    ({64: 100, 1024: 20, (256, 4): [8, 3]}, "at least K = 4 steps"),
    ({64: 100, 1024: 20, (256, 10 ** 20): 10 ** 21}, "K in key .* must be an integer >= 1 and <= 4096"),
    ({64: 100, 1024: 20, (256, 4097): 10 ** 5}, "K in key .* must be an integer >= 1 and <= 4096"),
    ({64: 100, 10 ** 23: 20}, "batch size 100,000,000,000,000,000,000,000 is more than"),
    ({64: 100, 1024: 20, (10 ** 23, 2): 20}, "more than a simulated run can hold"),
])
def test_bad_measurements(data, match):
    with pytest.raises(ValueError, match=f"^steps_to_target.*{match}"):
        fit_response(data)
