"""The simulation stays below the theory's upper bounds (mean over seeds, with its error).

Each check also asserts that the bound is below the excess risk at w₀, so a bound
that says nothing cannot make the test pass.
"""

import math

import numpy as np
import pytest

import theory
from echosim import EchoedGD, EchoedNesterov, EchoedProx, LeastSquares, Logistic, run

SEEDS = range(10)
T = 1000
ECHOES = [1, 2, 4, 8, 16]
BATCH_SIZES = [32, 256]
# Constants hold almost surely: logistic loss on the unit sphere (ρ = 1, β = 1/4), and
# least squares on the sphere with bounded noise (ρ on the ball ‖w − w*‖ ≤ D).
LOGISTIC = Logistic(dim=10, design="sphere", radius=1.0, w_star_norm=4.0)
QUADRATIC = LeastSquares(dim=10, design="sphere", radius=1.0, noise="uniform", noise_std=0.1, w_star_norm=1.0)


def mean_final_risk(problem, optimizer, B, K, output="risk_avg"):
    finals = []
    for seed in SEEDS:
        traj = run(problem, optimizer, batch_size=B, echo=K, n_batches=T, seed=seed, log=[T])
        assert traj.status == "ok"
        finals.append(getattr(traj, output)[-1])
    finals = np.array(finals)
    return finals.mean(), finals.std(ddof=1) / math.sqrt(len(finals))


def assert_below(problem, mean, se, bound):
    start = problem.excess_risk(np.zeros(problem.dim))[0]
    assert bound < start, "the bound must say something: it is above the excess risk at w0"
    assert mean + 3 * se <= bound, (mean, se, bound)


@pytest.mark.parametrize("B", BATCH_SIZES)
@pytest.mark.parametrize("K", ECHOES)
def test_echoed_gd_at_the_tuned_lr_stays_below_theorem_7(B, K):
    c = LOGISTIC.constants()
    lr = theory.echoed_gd_lr(**c, B=B, T=T, K=K)
    mean, se = mean_final_risk(LOGISTIC, EchoedGD(float(lr)), B, K)
    assert_below(LOGISTIC, mean, se, theory.echoed_gd_bound(**c, B=B, T=T, K=K))


@pytest.mark.parametrize("B", BATCH_SIZES)
@pytest.mark.parametrize("K", ECHOES)
def test_echoed_prox_stays_below_theorem_10(B, K):
    # The prox bound is about the average of the batch-end iterates (docs/background/bounds.md).
    c = LOGISTIC.constants()
    lam, inner_lr = theory.echoed_prox_param(**c, B=B, T=T, K=K)
    optimizer = EchoedProx(float(inner_lr), lam=float(lam))
    mean, se = mean_final_risk(LOGISTIC, optimizer, B, K, output="risk_end_avg")
    assert_below(LOGISTIC, mean, se, theory.echoed_prox_bound(**c, B=B, T=T, K=K))


@pytest.mark.parametrize("B", BATCH_SIZES)
@pytest.mark.parametrize("K", ECHOES)
def test_echoed_nesterov_on_a_quadratic_stays_below_the_derived_agd_bound(B, K):
    # Derived here for the last iterate of the kernel's Nesterov variant on quadratics.
    c = QUADRATIC.constants()
    optimizer = EchoedNesterov(float(theory.echoed_agd_lr(**c, B=B, T=T, K=K)))
    mean, se = mean_final_risk(QUADRATIC, optimizer, B, K, output="risk")
    assert_below(QUADRATIC, mean, se, theory.echoed_agd_bound(**c, B=B, T=T, K=K))
