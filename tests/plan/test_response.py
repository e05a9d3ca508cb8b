"""The T(K, B) models: exact recovery from their own predictions, the theory's limits,
the fit's uncertainty, and bad input."""

import numpy as np
import pytest

import theory
from echosim.plan.response import MODELS, fit_response, predict_batches


@pytest.mark.parametrize("model, p", [("bound", (60.0, 6e4)), ("mccandlish", (40.0, 2e4))])
def test_fit_recovers_the_parameters_of_exact_data(model, p):
    Bs = [16, 128, 1024]
    data = {B: float(predict_batches(model, *p, 1, B)) for B in Bs}
    fit = fit_response(data, model=model)
    assert np.allclose(fit.p, p, rtol=1e-8)
    assert fit.predict(8, 256) == pytest.approx(float(predict_batches(model, *p, 8, 256)), rel=1e-8)


def test_bound_model_is_theorem_7_solved_for_T():
    # with S = βD²/(2ε), E = (2ρD/ε)², T(K, B) is theory.batches_to_accuracy
    beta, rho, D, eps = 0.25, 1.0, 2.0, 0.05
    S, E = beta * D**2 / (2 * eps), (2 * rho * D / eps) ** 2
    for B in (64, 512, 4096):
        for K in (1, 4, 16):
            want = float(theory.batches_to_accuracy(eps, beta, rho, D, B=B, K=K))
            assert float(predict_batches("bound", S, E, K, B)) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("model", MODELS)
def test_limits_curvature_and_noise(model):
    S, E = 100.0, 1e5
    # no noise: T = S/K (bound) or S_min/K; infinite echo: T = E/B
    assert float(predict_batches(model, S, 0.0, 4, 64)) == pytest.approx(S / 4)
    assert float(predict_batches(model, S, E, 1e12, 64)) == pytest.approx(E / 64, rel=1e-4)
    # T never falls faster than 1/K, and falls monotonically in K
    T = predict_batches(model, S, E, np.array([1, 2, 4, 8, 16]), 256)
    assert np.all(np.diff(T) < 0) and np.all(T[1:] * np.array([2, 4, 8, 16]) >= T[0] * (1 - 1e-12))


def test_uncertainty_from_repeats_covers_the_truth():
    rng = np.random.default_rng(np.random.SeedSequence(3))
    S, E = 80.0, 5e4
    data = {B: list(float(predict_batches("bound", S, E, 1, B)) * np.exp(rng.normal(0, 0.05, 6)))
            for B in (32, 256, 2048)}
    fit = fit_response(data, model="bound", n_draws=300)
    assert "repeated" in fit.uncertainty
    lo, hi = np.quantile(fit.draws, [0.01, 0.99], axis=0)
    assert lo[0] < S < hi[0] and lo[1] < E < hi[1]
    # the band of a prediction is non-degenerate and brackets the point prediction
    q = np.quantile(fit.predict_draws(8, 512), [0.1, 0.9])
    assert q[0] < fit.predict(8, 512) < q[1]


def test_two_sizes_without_repeats_use_the_assumed_error():
    fit = fit_response({64: 1100, 1024: 160})
    assert "assumed 10%" in fit.uncertainty
    assert fit.draws.shape == (400, 2) and np.all(np.isfinite(fit.draws))


@pytest.mark.parametrize("data, match", [({64: 100}, "two or more batch sizes"), ({64: 100, 128: -1}, "steps >= 1"),
                                         ({64: 100, 128: float("nan")}, "finite"), ({0: 5, 64: 100}, "integers >= 1"),
                                         ([100, 200], "mapping")])
def test_bad_measurements(data, match):
    with pytest.raises(ValueError, match=f"^steps_to_target.*{match}"):
        fit_response(data)


def test_unknown_model():
    with pytest.raises(ValueError, match="^model"):
        fit_response({64: 100, 128: 60}, model="linear")
