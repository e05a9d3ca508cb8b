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


# ------------------------------------------------ strongly convex (l2-regularised)
# Logistic loss on unit-norm rows plus (lam/2)||w||^2: rho = max||x|| = 1 for the
# unregularised part (the regulariser cancels in the stability argument), beta from
# the Dataset (max||x||^2/4 + lam). The bound is on the exponentially weighted average
# of all iterates, which no kernel output is, so a NumPy twin of echoed GD computes it;
# the twin is first checked against the kernel on the last and the averaged iterate.

L2 = 0.1


def _l2_logistic(n=400, d=5, seed=1):
    from echosim import Dataset

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    w_true = np.full(d, 4.0 / np.sqrt(d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ w_true)), 1.0, -1.0)
    return Dataset(X, y, loss="logistic", l2=L2, name="l2_logistic")


L2_LOGISTIC = _l2_logistic()


def echoed_gd_twin(problem, lr, B, K, T, seed):
    """Echoed GD on the same fresh batches as the kernel: last, uniform and exp-weighted average."""
    X, y = problem.batches(seed, 0, T, B)
    lam = problem.l2
    w = np.zeros(problem.dim)
    total, weighted, weights = np.zeros_like(w), np.zeros_like(w), 0.0
    for t in range(T):
        for k in range(K):
            j = t * K + k + 1
            margins = y[t] * (X[t] @ w)
            grad = -(X[t] * (y[t] / (1 + np.exp(margins)))[:, None]).mean(axis=0) + lam * w
            w = w - lr * grad
            total += w
            weight = (1 - lr * lam) ** (-j)
            weighted += weight * w
            weights += weight
    return w, total / (T * K), weighted / weights


def test_twin_matches_the_kernel():
    lr, B, K, T = 1.0, 16, 4, 20
    w, w_avg, _ = echoed_gd_twin(L2_LOGISTIC, lr, B, K, T, seed=3)
    traj = run(L2_LOGISTIC, EchoedGD(lr), batch_size=B, echo=K, n_batches=T, seed=3, log=[T])
    np.testing.assert_allclose(w, traj.w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w_avg, traj.w_avg, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("B", [1024, 4096])
@pytest.mark.parametrize("K", [1, 4, 16])
def test_echoed_gd_on_l2_logistic_stays_below_the_strongly_convex_bound(B, K):
    T = 5
    c = dict(beta=L2_LOGISTIC.constants()["beta"], rho=1.0, D=L2_LOGISTIC.distance(),
             B=B, T=T, K=K, lam=L2)
    lr = float(theory.echoed_gd_strongly_convex_lr(**c))
    finals = np.array([
        L2_LOGISTIC.excess_risk(echoed_gd_twin(L2_LOGISTIC, lr, B, K, T, seed)[2][None])[0]
        for seed in SEEDS
    ])
    mean, se = finals.mean(), finals.std(ddof=1) / math.sqrt(len(finals))
    assert_below(L2_LOGISTIC, mean, se, theory.echoed_gd_strongly_convex_bound(**c))
