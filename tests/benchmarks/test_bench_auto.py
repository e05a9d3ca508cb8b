"""The pure pieces of benchmarks/bench_auto.py (no sleeps, no echoing): the target rule
against its definition, and the truth it scores against (the problems' gradients and
excess risks)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_auto.py"
_spec = importlib.util.spec_from_file_location("bench_auto", PATH)
ba = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_auto", ba)  # its dataclass looks its module up
_spec.loader.exec_module(ba)


def naive_stays(values, target):
    for n in range(len(values)):
        if all(v <= target for v in values[n:]):
            return n
    return None


def naive_smoothed(values, half):
    v = np.log(np.asarray(values, dtype=float))
    return np.array([np.exp(np.mean(v[max(0, i - half):i + half + 1])) for i in range(len(v))])


@pytest.mark.parametrize("seed", range(5))
def test_rule_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    risk = np.exp(-0.05 * np.arange(120) + 0.5 * rng.standard_normal(120)) + 1e-3
    s = ba.smoothed(risk)
    np.testing.assert_allclose(s, naive_smoothed(risk, ba.HALF_WINDOW), rtol=1e-12)
    for target in (1e-3, 5e-3, 2e-2, 0.3, 10.0):
        assert ba.reaches_and_stays(s, target) == naive_stays(s, target)
        assert ba.reaches_and_stays(risk, target) == naive_stays(risk, target)


def test_smoothing_adds_no_lag_on_a_log_linear_descent():
    risk = np.exp(-0.1 * np.arange(50))
    np.testing.assert_allclose(ba.smoothed(risk)[4:-4], risk[4:-4], rtol=1e-12)


def _check_gradient(problem, rng):
    X, y = problem.batch(rng, 64)
    w = problem.w_star + 0.3 * rng.standard_normal(problem.dim)
    _, g = problem.loss_grad(w, X, y)
    h = 1e-6
    fd = np.array([(problem.loss_grad(w + h * e, X, y)[0] - problem.loss_grad(w - h * e, X, y)[0]) / (2 * h)
                   for e in np.eye(problem.dim)])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-8)


def test_least_squares_gradient_and_excess_risk():
    p = ba.LeastSquares(dim=6, decay=0.5, noise=0.5, w_norm=2.0)
    rng = np.random.default_rng(1)
    _check_gradient(p, rng)
    assert p.excess(p.w_star[None, :])[0] == 0.0
    # the closed form against the mean batch loss of a large sample (statistical tolerance)
    w = p.w_star + rng.standard_normal(p.dim)
    X, y = p.batch(rng, 200_000)
    per = 0.5 * (X @ w - y) ** 2
    exact = p.excess(w[None, :])[0] + 0.5 * p.noise**2
    assert abs(per.mean() - exact) < 4 * per.std() / np.sqrt(len(per))


def test_logistic_table_minimiser_gradient_and_excess_risk():
    p = ba.LogisticTable(n=3000, dim=5, w_norm=3.0, l2=1e-2, seed=3)
    rng = np.random.default_rng(2)
    _check_gradient(p, rng)
    # w* is the table's minimiser: the full-table gradient vanishes, the excess risk is >= 0
    _, g = p.loss_grad(p.w_star, p.X, p.y)
    assert np.max(np.abs(g)) < 1e-10
    W = p.w_star + 0.5 * rng.standard_normal((20, p.dim))
    ex = p.excess(W)
    assert np.all(ex > 0)
    np.testing.assert_allclose(ex, [p.loss_grad(w, p.X, p.y)[0] - p.F_star for w in W], rtol=1e-10)
