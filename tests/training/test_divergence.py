"""Extreme iterates and learning rates: the exact risk never raises, and one divergence rule
(excess risk above DIVERGENCE_FACTOR × F(w₀), or a non-finite risk or iterate) holds for every problem."""

import numpy as np
import pytest

from echosim.training import EchoedGD, EchoedNesterov, LeastSquares, Logistic, run
from echosim.training import logistic_risk
from echosim.training.runner import DIVERGENCE_FACTOR

PROBLEMS = [Logistic(dim=5, design="sphere"), Logistic(dim=5, design="gaussian", decay=1.0),
            LeastSquares(dim=5)]


@pytest.mark.parametrize("problem", PROBLEMS[:2], ids=["sphere", "gaussian"])
def test_logistic_risk_of_tiny_iterates_is_the_risk_at_zero(problem):
    w = np.array([1.0, -1.0, 2.0, 0.5, -3.0])
    zero = problem.risk(np.zeros(5))[0]
    assert zero == pytest.approx(np.log(2.0), rel=1e-15)
    for scale in (1e-320, 1e-200, 1e-160):
        assert problem.risk(scale * w)[0] == zero


@pytest.mark.parametrize("problem", PROBLEMS[:2], ids=["sphere", "gaussian"])
def test_logistic_risk_of_huge_iterates_follows_its_linear_asymptote_then_is_inf(problem):
    w = np.array([1.0, -1.0, 2.0, 0.5, -3.0])
    r = problem.risk(np.vstack([1e10 * w, 1e160 * w, 1e300 * w]))
    np.testing.assert_allclose(r[1:] / r[0], [1e150, 1e290], rtol=1e-12)
    assert np.all(problem.risk(np.vstack([np.full(5, np.inf), np.full(5, np.nan)])) == np.inf)
    assert problem.risk(1.7e308 * (w / 3))[0] > 1e300  # near the largest double: huge or +inf, never an error


def test_risk_functions_accept_an_infinite_norm_and_name_bad_arguments():
    assert logistic_risk.sphere_risk(np.inf, 0.0, 1.0, radius=1.0, dim=3) == np.inf
    assert logistic_risk.gaussian_risk(np.inf, 0.0, 1.0) == np.inf
    with pytest.raises(ValueError, match="^a must be >= 0"):
        logistic_risk.gaussian_risk(-1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="Cauchy-Schwarz"):
        logistic_risk.sphere_risk(1.0, 3.0, 1.0, radius=1.0, dim=3)
    with pytest.raises(ValueError, match=r"norm_w of shape \(2,\) and c of shape \(3,\)"):
        logistic_risk.sphere_risk(np.ones(2), np.zeros(3), 1.0, radius=1.0, dim=3)


@pytest.mark.parametrize("problem", PROBLEMS, ids=["sphere", "gaussian", "least_squares"])
@pytest.mark.parametrize("lr, status", [(1e300, "diverged"), (1e6, "diverged"), (1e-200, "ok")])
def test_extreme_learning_rates_give_diverged_or_ok_never_an_error(problem, lr, status):
    for opt in (EchoedGD(lr), EchoedNesterov(lr)):
        t = run(problem, opt, batch_size=8, echo=4, n_batches=200, seed=0)
        assert t.status == status
        assert np.all(np.isfinite(t.risk)) and np.all(np.isfinite(t.risk_avg))
        limit = DIVERGENCE_FACTOR * (t.risk[0] + problem.F_star)
        assert np.all(t.risk <= limit)
        if status == "diverged":
            assert 1 <= t.diverged_at <= 200 and t.batches[-1] < t.diverged_at
        else:
            assert t.diverged_at is None and t.risk[-1] == pytest.approx(t.risk[0], rel=1e-12)
