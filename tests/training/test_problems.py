"""Problems: exact risks against sample estimates, minimisers, constants, bad input."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.training.problems import BATCHES_PER_BLOCK, Dataset, LeastSquares, Logistic

Z = 5.0  # tolerance in standard errors for Monte-Carlo checks


def per_example_loss(problem, X, y, w):
    z = X @ w
    if problem.loss == "squared":
        return 0.5 * (z - y) ** 2
    return np.logaddexp(0.0, -y * z)


def per_example_grad(problem, X, y, w):
    z = X @ w
    r = z - y if problem.loss == "squared" else -y / (1.0 + np.exp(y * z))
    return r[:, None] * X


def assert_close_to_sample_mean(values, exact):
    se = values.std(ddof=1) / math.sqrt(len(values))
    assert abs(values.mean() - exact) <= Z * se + 1e-12, (values.mean(), exact, se)


@pytest.mark.parametrize("problem", [
    LeastSquares(dim=5, design="gaussian", decay=1.0, noise_std=0.4),
    LeastSquares(dim=5, design="sphere", radius=2.0, noise="uniform", noise_std=0.3),
    Logistic(dim=4, design="sphere", radius=1.5, w_star_norm=2.0),
    Logistic(dim=4, design="gaussian", decay=0.5, w_star_norm=1.0),
], ids=["ls-gauss", "ls-sphere", "logistic-sphere", "logistic-gauss"])
def test_population_risk_matches_a_large_sample(problem):
    rng = np.random.default_rng(0)
    X, y = problem.sample(rng, 400_000)
    for w in (np.zeros(problem.dim), problem.w_star, rng.standard_normal(problem.dim)):
        assert_close_to_sample_mean(per_example_loss(problem, X, y, w), problem.risk(w)[0])


@pytest.mark.parametrize("problem", [
    LeastSquares(dim=4, design="gaussian", decay=2.0),
    Logistic(dim=4, design="sphere"),
    Logistic(dim=3, design="gaussian", decay=1.0),
])
def test_w_star_minimises_the_population_risk(problem):
    rng = np.random.default_rng(1)
    W = problem.w_star + 0.3 * rng.standard_normal((50, problem.dim))
    assert np.all(problem.excess_risk(W) > 0)
    assert problem.excess_risk(problem.w_star)[0] == pytest.approx(0.0, abs=1e-12)



@pytest.mark.parametrize("design", ["sphere", "gaussian"])
def test_logistic_risk_rows_are_independent_and_continuous_across_rescaling(design):
    """Rows are summed as they are, or rescaled first near under-/overflow: either way F(w)."""
    from echosim.training.problems import _scale_and_projection

    p = Logistic(dim=5, design=design, decay=1.0)
    w = np.array([1.0, -1.0, 2.0, 0.5, -3.0])
    W = np.vstack([w, 1e-139 * w, 1e-141 * w, 1e139 * w, 1e141 * w, np.zeros(5), np.full(5, np.nan)])
    lam = None if design == "sphere" else p.eigenvalues
    scale, proj = _scale_and_projection(W, lam, p.w_star)
    for i, row in enumerate(W):
        alone = _scale_and_projection(row[None, :], lam, p.w_star)
        assert (alone[0][0], alone[1][0]) == (scale[i], proj[i])
    size = np.sqrt(w**2 @ (np.ones(5) if lam is None else lam))
    np.testing.assert_allclose(scale[:5], size * np.array([1, 1e-139, 1e-141, 1e139, 1e141]), rtol=1e-15)
    assert (scale[5], proj[5]) == (0.0, 0.0) and (scale[6], proj[6]) == (np.inf, 0.0)
    np.testing.assert_array_equal(p.risk(W)[[1, 2, 5]], p.risk(np.zeros(5))[0])


def test_least_squares_excess_risk_is_the_quadratic_form():
    p = LeastSquares(dim=3, decay=1.0)
    w = np.array([0.1, -0.2, 0.3])
    delta = w - p.w_star
    assert p.excess_risk(w)[0] == pytest.approx(0.5 * delta @ np.diag([1, 1 / 2, 1 / 3]) @ delta, rel=1e-14)


def test_sphere_design_has_the_radius_and_isotropic_covariance():
    p = LeastSquares(dim=6, design="sphere", radius=3.0)
    X, _ = p.sample(np.random.default_rng(2), 20_000)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 3.0, rtol=1e-12)
    cov = X.T @ X / len(X)
    assert np.max(np.abs(cov - 1.5 * np.eye(6))) < 0.1  # r²/d = 1.5


@given(seed=st.integers(0, 2**31), scale=st.floats(0.0, 1.0))
def test_almost_sure_constants_bound_every_gradient_on_the_ball(seed, scale):
    # ρ bounds ‖∇ℓ(w; z)‖ for every example and every w with ‖w − w*‖ ≤ D; β bounds ‖x‖²(/4).
    rng = np.random.default_rng(seed)
    for p in (LeastSquares(dim=4, design="sphere", radius=1.3, noise="uniform", noise_std=0.5),
              Logistic(dim=4, design="sphere", radius=0.8)):
        c = p.constants()
        X, y = p.sample(rng, 2000)
        u = rng.standard_normal(p.dim)
        w = p.w_star + scale * c["D"] * u / np.linalg.norm(u)
        assert np.linalg.norm(per_example_grad(p, X, y, w), axis=1).max() <= c["rho"] * (1 + 1e-12)
        curvature = (X**2).sum(axis=1) * (1.0 if p.loss == "squared" else 0.25)
        assert curvature.max() <= c["beta"] * (1 + 1e-12)


def test_mean_square_rho_is_attained_in_the_worst_direction():
    # Gaussian design: ρ² = sup_{‖Δ‖≤D} E‖∇ℓ‖², attained at Δ = D·(top eigenvector).
    p = LeastSquares(dim=4, design="gaussian", decay=1.0, noise_std=0.5)
    c = p.constants()
    assert p.constants_kind == "mean square"
    X, y = p.sample(np.random.default_rng(3), 400_000)
    w = p.w_star + c["D"] * np.eye(4)[0]
    sq = (np.linalg.norm(per_example_grad(p, X, y, w), axis=1)) ** 2
    assert_close_to_sample_mean(sq, c["rho"] ** 2)


def test_constants_use_the_starting_point():
    p = Logistic(dim=3, w_star_norm=2.0)
    assert p.constants()["D"] == pytest.approx(2.0)
    assert p.constants(w0=p.w_star)["D"] == 0.0


def _logistic_table(n=300, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ np.ones(d))), 1.0, -1.0)
    return X, y


def test_dataset_w_star_is_a_stationary_point_and_minimum():
    from scipy.optimize import minimize

    X, y = _logistic_table()
    p = Dataset(X, y, loss="logistic", l2=0.01)
    res = minimize(lambda w: p.risk(w)[0], np.zeros(4), method="BFGS", options={"gtol": 1e-10})
    assert p.F_star <= res.fun + 1e-12
    np.testing.assert_allclose(p.w_star, res.x, atol=1e-5)
    ls = Dataset(X, X @ np.arange(4.0) + 0.1 * y, loss="squared")
    np.testing.assert_allclose(ls.w_star, np.linalg.lstsq(X, X @ np.arange(4.0) + 0.1 * y, rcond=None)[0], rtol=1e-9)


def test_softmax_dataset_w_star_is_the_multinomial_minimiser():
    from scipy.optimize import minimize

    rng = np.random.default_rng(4)
    X = rng.standard_normal((200, 3))
    y = np.argmax(X @ rng.standard_normal((3, 4)) + rng.gumbel(size=(200, 4)), axis=1)
    p = Dataset(X, y, loss="softmax", l2=0.01)
    assert p.dim == 12 and p.n_features == 3 and p.n_classes == 4
    res = minimize(lambda w: p.risk(w)[0], np.zeros(12), method="BFGS", options={"gtol": 1e-10})
    assert p.F_star <= res.fun + 1e-12
    np.testing.assert_allclose(p.w_star, res.x, atol=1e-5)
    W = p.w_star.reshape(4, 3)
    Z = X @ W.T
    by_hand = np.mean(np.log(np.exp(Z).sum(axis=1)) - Z[np.arange(200), y]) + 0.005 * (W**2).sum()
    assert p.F_star == pytest.approx(by_hand, rel=1e-12)
    Xb, yb = p.batches(0, 0, BATCHES_PER_BLOCK, 5)
    assert Xb.shape == (BATCHES_PER_BLOCK, 5, 3) and set(np.unique(yb)) <= {0.0, 1.0, 2.0, 3.0}


def test_softmax_constants_bound_every_row_gradient_and_curvature():
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((100, 3)), rng.integers(0, 3, 100)
    p = Dataset(X, y, loss="softmax", l2=0.1)
    c = p.constants()
    for _ in range(20):
        u = rng.standard_normal(9)
        W = (p.w_star + c["D"] * u / np.linalg.norm(u)).reshape(3, 3)
        Z = X @ W.T
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        R = P - np.eye(3)[y]
        grads = np.einsum("nc,nd->ncd", R, X).reshape(100, 9) + p.l2 * W.ravel()
        assert np.linalg.norm(grads, axis=1).max() <= c["rho"] * (1 + 1e-12)
        for i in range(0, 100, 10):  # per-example Hessian (diag(p) − ppᵀ) ⊗ xxᵀ
            H = np.kron(np.diag(P[i]) - np.outer(P[i], P[i]), np.outer(X[i], X[i]))
            assert np.linalg.eigvalsh(H).max() + p.l2 <= c["beta"] * (1 + 1e-12)


def test_dataset_batches_are_drawn_with_replacement_from_the_rows():
    X, y = _logistic_table(n=20)
    p = Dataset(X, y, l2=0.1)
    Xb, yb = p.batches(0, 0, BATCHES_PER_BLOCK, 8)
    rows = {tuple(r) for r in X}
    assert all(tuple(r) in rows for r in Xb.reshape(-1, 4))
    assert len({tuple(r) for r in Xb.reshape(-1, 4)}) < BATCHES_PER_BLOCK * 8  # repeats occur


def test_dataset_constants_bound_every_row_gradient_on_the_ball():
    X, y = _logistic_table()
    for p in (Dataset(X, y, loss="logistic", l2=0.1), Dataset(X, X @ np.ones(4) + y, loss="squared")):
        c = p.constants()
        rng = np.random.default_rng(0)
        for _ in range(20):
            u = rng.standard_normal(4)
            w = p.w_star + c["D"] * u / np.linalg.norm(u)
            g = per_example_grad(p, X, y if p.loss == "logistic" else p.y, w) + p.l2 * w
            assert np.linalg.norm(g, axis=1).max() <= c["rho"] * (1 + 1e-12)


def test_separable_logistic_data_without_l2_is_refused():
    X = np.array([[1.0, 0.0], [2.0, 1.0], [-1.0, 0.5], [-2.0, -1.0]])
    with pytest.raises(ValueError, match="l2"):
        Dataset(X, np.array([1.0, 1.0, -1.0, -1.0]), loss="logistic")


@pytest.mark.parametrize("make, field", [
    (lambda: LeastSquares(dim=0), "dim"),
    (lambda: LeastSquares(dim=3, design="cube"), "design"),
    (lambda: LeastSquares(dim=3, decay=-1), "decay"),
    (lambda: LeastSquares(dim=3, radius=0), "radius"),
    (lambda: LeastSquares(dim=3, noise="cauchy"), "noise"),
    (lambda: LeastSquares(dim=3, noise_std=float("inf")), "noise_std"),
    (lambda: LeastSquares(dim=3, w_star=np.ones(2)), "w_star"),
    (lambda: Logistic(dim=2.5), "dim"),
    (lambda: Dataset(np.ones(3), np.ones(3)), "X"),
    (lambda: Dataset(np.ones((3, 2)), np.ones(2)), "y"),
    (lambda: Dataset(np.array([[np.nan, 1.0]]), np.ones(1)), "finite"),
    (lambda: Dataset(np.ones((3, 2)), np.array([0.0, 1.0, 1.0])), "-1, \\+1"),
    (lambda: Dataset(np.ones((3, 2)), np.ones(3), loss="hinge"), "loss"),
    (lambda: Dataset(np.ones((3, 2)), np.ones(3), l2=-1), "l2"),
    (lambda: Dataset(np.ones((3, 2)), np.array([0.0, 1.5, 1.0]), loss="softmax"), "class indices"),
    (lambda: Dataset(np.ones((3, 2)), np.array([0.0, 2.0, 1.0]), loss="softmax", n_classes=2), "n_classes"),
])
def test_bad_problem_input_names_the_field(make, field):
    with pytest.raises(ValueError, match=field):
        make()


def test_batch_memo_returns_the_same_batches_and_stays_bounded():
    from echosim.training.problems import _BatchMemo

    p = LeastSquares(dim=4)
    calls = []

    def counted(*args):
        calls.append(args)
        return p.batches(*args)

    cache = _BatchMemo(counted, max_bytes=2 * (16 * 8 * 4 + 16 * 8) * 8)  # room for two chunks
    X1, y1 = cache(3, 0, 16, 8, np.float64)
    X2, _ = cache(3, 0, 16, 8, np.float64)
    assert X2 is X1 and len(calls) == 1
    Xf, _ = cache(3, 0, 16, 8, np.float32)  # another dtype is another entry
    assert Xf.dtype == np.float32 and len(calls) == 2
    cache(4, 0, 16, 8, np.float64)
    assert len(cache.entries) == 2  # the least recently used entry was evicted
    X3, y3 = cache(3, 0, 16, 8, np.float64)
    np.testing.assert_array_equal(X3, X1)
    np.testing.assert_array_equal(y3, y1)
    # the running byte count is the entries' sizes, after hits, misses and evictions
    assert cache.nbytes == sum(X.nbytes + y.nbytes for X, y in cache.entries.values())


def test_memoized_problem_gives_bitwise_the_same_runs():
    from echosim import EchoedGD, run

    plain = LeastSquares(dim=4)
    memo = LeastSquares(dim=4).memoize_batches()
    assert memo.memoize_batches() is memo
    for K in (1, 3):
        a = run(plain, EchoedGD(0.1), batch_size=8, echo=K, n_batches=40, seed=2)
        b = run(memo, EchoedGD(0.1), batch_size=8, echo=K, n_batches=40, seed=2)
        np.testing.assert_array_equal(a.risk, b.risk)
