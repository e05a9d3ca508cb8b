"""The echo model against what it was derived from, computed apart from it: the exact
T_eps of Theorem 7 (the digest's closed form) and a noisy quadratic model written here in
plain NumPy (expected loss, exact recursion, lr tuned per (B, K)); the measured noise scale;
an echoed measurement never leaves the fit further from its own point."""

import math

import numpy as np
import pytest

from echosim.planner.response import PRIOR, fit_response, k_eff, kappa, t_one


# --------------------------------------------------------------------------- references


def t_eps(K, B, beta=1.0, rho=1.0, D=1.0, eps=1e-3):
    """Fresh batches for accuracy eps under Theorem 7 (tuned step): a/T + b/sqrt(T) = eps with
    a = beta D^2 / (2K), b = 2 rho D / sqrt(B) (paper-digest.md, section 3.7)."""
    a = beta * D ** 2 / (2.0 * K)
    b = 2.0 * rho * D / math.sqrt(B)
    return ((b + math.sqrt(b * b + 4.0 * a * eps)) / (2.0 * eps)) ** 2


B_NOISE_THM7 = 8.0 / 1e-3  # 8 rho^2 / (beta eps): where the two terms of T_eps(1, B) meet


def nqm_t(K, B, eps=1e-2, d=30, lrs=np.geomspace(1e-3, 1.0, 61), max_t=20_000):
    """Fresh batches to E[loss] <= eps for echoed GD on a noisy quadratic (curvatures 1/i, gradient
    noise covariance H / B, start 1 in every direction), lr tuned over `lrs` (<= 1/h_max).
    Batch t's loss is (1/2)(w - xi_t)' H (w - xi_t) with xi_t ~ N(0, H^-1 / B): K steps of lr eta
    contract w - xi_t by (1 - eta h)^K; the mean and variance of each coordinate follow exactly."""
    h = 1.0 / np.arange(1, d + 1)
    a = (1.0 - lrs[:, None] * h) ** K
    s = 1.0 / (h * B)  # variance of xi per coordinate
    m = np.ones_like(a)
    v = np.zeros_like(a)
    for t in range(1, max_t + 1):
        m = a * m
        v = a * a * v + (1.0 - a) ** 2 * s
        if np.any(0.5 * np.sum(h * (m * m + v), axis=1) <= eps):
            return t
    return math.inf


# --------------------------------------------------------------------------- the derivation


def test_the_prior_median_is_the_derived_form():
    """Centred on gamma = 1 and B_e = B_noise up to the shift to the middle of the exact cases:
    T(K, B) = T(1, B)/K_eff with kappa(B) = 1 + (B/B_e)^gamma; at gamma = 1, B_e = E/S this is
    exactly S/K + E/B (the curvature term divided by K, the noise term not)."""
    S, E = 50.0, 4e4
    for K in (2, 8, 64):
        for B in (16, 800, 50_000):
            derived = S / K + E / B
            assert t_one(S, E, B) / k_eff(K, kappa(B, E / S, 1.0)) == pytest.approx(derived, rel=1e-12)
    assert 0.9 <= PRIOR["gamma"] <= 1.2 and abs(PRIOR["log_be_offset"]) <= 0.3


@pytest.mark.parametrize("pair", [(0.1, 1.0), (0.25, 4.0), (1.0, 10.0)])
def test_theorem_7_closed_form_is_predicted_from_k1_alone(pair):
    """K = 1 at two batch sizes (in units of Theorem 7's noise scale); T_eps(K, B) for K up to 64
    and B over three decades: the speedup T(1)/T(K) (the echo model's part) within 10% in the
    median, T within 25% (S + E/B extrapolating T(1, B) adds its own error), the truth inside
    the 10-90% band in at least 80% of cells."""
    Bs = [int(f * B_NOISE_THM7) for f in pair]
    fit = fit_response({B: t_eps(1, B) for B in Bs}, rel_error=0.01)
    e_T, e_speedup, inside = [], [], []
    for B in np.geomspace(B_NOISE_THM7 / 30, B_NOISE_THM7 * 30, 7).astype(int):
        for K in (2, 4, 16, 64):
            truth = t_eps(K, B)
            e_T.append(abs(fit.predict(K, B) / truth - 1))
            e_speedup.append(abs(fit.predict(1, B) / fit.predict(K, B) / (t_eps(1, B) / truth) - 1))
            lo, hi = np.quantile(fit.predict_draws(K, B), [0.1, 0.9])
            inside.append(lo <= truth <= hi)
    assert np.median(e_speedup) < 0.10
    assert np.median(e_T) < 0.25 and max(e_T) < 0.5
    assert np.mean(inside) >= 0.8


def test_noisy_quadratic_model_is_predicted_from_k1_alone():
    """The NQM's shape: no gain from echoing well below the noise scale, about 1/K well above it;
    the model from K = 1 at two batch sizes follows it within its band."""
    Bs = (64, 256, 1024, 4096)
    T = {(B, K): nqm_t(K, B) for B in Bs for K in (1, 4, 16)}
    assert T[(64, 16)] >= 0.8 * T[(64, 1)]          # noise-dominated: echoing buys (almost) nothing
    assert T[(4096, 4)] <= 0.35 * T[(4096, 1)]      # curvature-dominated: about K-fold
    fit = fit_response({64: T[(64, 1)], 1024: T[(1024, 1)]}, rel_error=0.05)
    inside, errs = [], []
    for B in Bs:
        for K in (4, 16):
            lo, hi = np.quantile(fit.predict_draws(K, B), [0.1, 0.9])
            inside.append(lo <= T[(B, K)] <= hi)
            errs.append(abs(fit.predict(K, B) / T[(B, K)] - 1))
    assert np.mean(inside) >= 0.75
    assert np.median(errs) < 0.35


# --------------------------------------------------------------------------- measured noise scale


def test_a_measured_noise_scale_centres_the_echo_model():
    data = {64: 1100.0, 1024: 160.0}
    small = fit_response(data, noise_scale=100.0)
    large = fit_response(data, noise_scale=20_000.0)
    assert "measured in the loop" in small.echo_source
    assert small.params["B_e"] < 300 < 5000 < large.params["B_e"]
    # a small noise scale: echoing pays at B = 1024; a large one: it barely does
    assert small.predict(8, 1024) < 0.5 * small.predict(1, 1024)
    assert large.predict(8, 1024) > 0.8 * large.predict(1, 1024)


@pytest.mark.parametrize("bad", [0.0, -3.0, math.nan, math.inf, "500", True])
def test_bad_noise_scale(bad):
    with pytest.raises(ValueError, match="^noise_scale"):
        fit_response({64: 1100.0, 1024: 160.0}, noise_scale=bad)


# --------------------------------------------------------------------------- shrinkage


@pytest.mark.parametrize("ratio", [0.15, 0.3, 0.5, 0.8, 1.0])
def test_an_echoed_measurement_never_moves_the_fit_away_from_it(ratio):
    """The posterior's prediction at the measured (B, K) is at least as close to the measurement
    as the prior's, whatever the measurement (shrinkage toward the data it came with), up to the
    Monte Carlo error of two sets of draws (0.02 in log)."""
    k1 = {64: 1100.0, 1024: 160.0}
    B, K = 1024, 4
    T_m = max(1.0, ratio * 160.0)
    prior = fit_response(k1).predict(K, B)
    post = fit_response({**k1, (B, K): K * T_m}).predict(K, B)
    assert abs(math.log(post / T_m)) <= abs(math.log(prior / T_m)) + 0.02


@pytest.mark.parametrize("T_m", [45.0, 100.0, 150.0])
def test_a_measurement_moves_other_batch_sizes_only_through_the_noise_scale(T_m):
    """An echoed measurement at B = 1024 moves the noise scale; far below it (noise-dominated,
    where the derived form says echoing buys nothing whatever B_noise is) the prediction hardly
    moves: at most 3% at B = 16 and 12% at B = 64."""
    k1 = {64: 1100.0, 1024: 160.0}
    prior = fit_response(k1)
    post = fit_response({**k1, (1024, 4): 4 * T_m})
    assert abs(post.predict(8, 16) / prior.predict(8, 16) - 1) < 0.03
    assert abs(post.predict(8, 64) / prior.predict(8, 64) - 1) < 0.12
