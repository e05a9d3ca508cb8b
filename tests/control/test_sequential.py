"""The confidence sequence holds its level over every look, and the spending sums to alpha."""

import math

import numpy as np

from echosim.control.sequential import mixture_boundary, rho_for, spent


def test_spending_sums_to_alpha():
    assert math.isclose(sum(spent(0.1, k) for k in range(1, 200_000)), 0.1, rel_tol=1e-4)


def test_rho_for_puts_the_tightest_point_near_v_star():
    alpha, V = 0.05, 40.0
    rhos = np.geomspace(1e-3, 1e3, 4001)
    best = rhos[np.argmin([mixture_boundary(V, r, alpha) for r in rhos])]
    assert abs(math.log(rho_for(V, alpha) / best)) < math.log(2.0)


def test_the_boundary_is_crossed_under_the_null_at_most_alpha_of_the_time_over_all_looks():
    """Gaussian increments of variance 1, 400 looks each: the fraction of paths that ever cross
    stays below alpha (+ 3 binomial standard errors)."""
    rng = np.random.default_rng(1)
    alpha, paths, n = 0.1, 4000, 400
    S = np.cumsum(rng.standard_normal((paths, n)), axis=1)
    V = np.arange(1, n + 1, dtype=float)
    rho = rho_for(8.0, alpha)
    u = np.array([mixture_boundary(v, rho, alpha) for v in V])
    crossed = (np.abs(S) >= u).any(axis=1).mean()
    assert crossed <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / paths)
    assert crossed > 0.2 * alpha  # not vacuous: the boundary is near the level it claims


def test_the_boundary_detects_a_real_mean():
    rng = np.random.default_rng(2)
    d = 0.5 + rng.standard_normal(200)
    S, V = np.cumsum(d), np.arange(1, 201, dtype=float)
    rho = rho_for(8.0, 0.05)
    assert any(S[i] > mixture_boundary(V[i], rho, 0.05) for i in range(200))
