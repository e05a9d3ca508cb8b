"""The Numba optimizer kernel against its naive NumPy twin, and its invariants."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.training import losses, methods
from echosim.training.kernel import _BLOCK, kernel_for
from tests.naive import echoed_run

METHODS = {"gd": methods.GD, "nesterov": methods.NESTEROV, "prox": methods.PROX, "heavy_ball": methods.HEAVY_BALL,
           "adam": methods.ADAM}
N_STATE = {"gd": 0, "nesterov": 1, "prox": 0, "heavy_ball": 1, "adam": 2}


def hyper_of(method, momentum="nesterov", lam=0.0, betas=(0.9, 0.999), eps=1e-8):
    if method == "nesterov":
        return np.array([-1.0 if momentum == "nesterov" else float(momentum)])
    if method == "prox":
        return np.array([float(lam)])
    if method == "heavy_ball":
        return np.array([0.9 if momentum == "nesterov" else float(momentum)])
    if method == "adam":
        return np.array([*betas, eps])
    return np.zeros(0)


def kernel_run(X, Y, K, lr, method="gd", loss="squared", l2=0.0, momentum="nesterov", lam=0.0,
               rows=None, w0=None, dtype=np.float64, wide=False, betas=(0.9, 0.999), eps=1e-8, first=False):
    """Call the kernel once over all batches, logging after every batch; lr (T,) for one
    iterate (then logs (T, d)) or (T, L) for L iterates (logs (T, L, d))."""
    T, _, d = X.shape
    lrs = np.asarray(lr, dtype=np.float64)
    single = lrs.ndim == 1
    lrs = np.ascontiguousarray(lrs[:, None] if single else lrs)
    L = lrs.shape[1]
    w0 = np.zeros(d) if w0 is None else np.asarray(w0, dtype=float)
    d = len(w0)
    W = np.repeat(w0[None, :], L, axis=0).astype(dtype)
    S = np.empty((N_STATE[method], L, d), dtype=dtype)
    S[:] = 0.0
    if method == "nesterov":
        S[0] = W
    state = (W, S, np.zeros((L, d)), np.zeros((L, d)), np.zeros(2, dtype=np.int64), np.full(L, -1, dtype=np.int64))
    logs = (np.empty((T, L, d), dtype=dtype), np.empty((T, L, d)), np.empty((T, L, d)))
    first_loss = np.full((T, L), np.nan) if first else np.zeros((0, L))
    rows = np.zeros((0, 0), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    kernel = kernel_for(METHODS[method], losses.LOSSES[loss].code, wide, rows.shape[0] > 0, first)
    alive = kernel(X.astype(dtype), Y.astype(dtype), np.asarray(K, dtype=np.int64), lrs, rows,
                   hyper_of(method, momentum, lam, betas, eps), float(l2), *state,
                   np.arange(T, dtype=np.int64), False, *logs, first_loss)
    if single:
        logs = tuple(a[:, 0] for a in logs)
        state = (state[0][0], *state[1:])
        first_loss = first_loss[:, 0]
    return (alive, logs, state, first_loss) if first else (alive, logs, state)


ATOL = {"gd": 1e-14, "nesterov": 1e-14, "prox": 1e-14, "heavy_ball": 1e-14, "adam": 1e-12}
"""Adam divides g by √v̂ + ε ≈ |g| + ε: a rounding difference δ in a gradient near 0 moves its
step by about ηδ/ε (ε = 1e-3 in the tests), so its iterates agree to atol 1e-12, not 1e-14."""


def draw_problem(seed, T, B, d, loss):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, B, d)) / np.sqrt(d)
    if loss == "squared":
        Y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal((T, B))
    elif loss == "softmax":
        Y = rng.integers(0, 3, size=(T, B)).astype(float)  # three classes
    else:
        Y = np.where(rng.random((T, B)) < 0.5, -1.0, 1.0)
    return X, Y, rng


@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 6), B=st.integers(1, 9), d=st.integers(1, 7),
    method=st.sampled_from(["gd", "nesterov", "prox", "sgd", "heavy_ball", "adam"]),
    loss=st.sampled_from(["squared", "logistic", "softmax"]),
    l2=st.sampled_from([0.0, 0.05]),
    lr=st.floats(0.0, 0.5),
    momentum=st.sampled_from(["nesterov", 0.0, 0.7]),
)
def test_kernel_matches_naive_twin(seed, T, B, d, method, loss, l2, lr, momentum):
    X, Y, rng = draw_problem(seed, T, B, d, loss)
    K = rng.integers(1, 5, size=T)
    lrs = lr * rng.uniform(0.5, 1.0, size=T)
    rows = rng.integers(0, B, size=(int(K.sum()), max(1, B // 2))) if method == "sgd" else None
    kind = "gd" if method == "sgd" else method
    if kind == "heavy_ball" and momentum == "nesterov":
        momentum = 0.9
    w0 = rng.standard_normal(3 * d if loss == "softmax" else d)
    args = dict(method=kind, loss=loss, l2=l2, momentum=momentum, lam=0.3, rows=rows, w0=w0, betas=(0.8, 0.99),
                eps=1e-3)
    alive, logs, _, first = kernel_run(X, Y, K, lrs, first=True, **args)
    *expected, want_first = echoed_run(X, Y, K, lrs, first_loss=True, **args)
    assert alive == 1
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=ATOL[kind])
    np.testing.assert_allclose(first, want_first, rtol=1e-12, atol=1e-14)


def test_repeated_gd_on_one_batch_matches_closed_form():
    # w_t = ŵ + (I − ηA)^t (w₀ − ŵ), with A = XᵀX/B and ŵ the batch's least-squares solution.
    X, Y, _ = draw_problem(3, 1, 40, 6, "squared")
    A = X[0].T @ X[0] / 40
    w_hat = np.linalg.solve(A, X[0].T @ Y[0] / 40)
    eta, steps = 0.7, 25
    w0 = np.linspace(-1, 1, 6)
    _, (last, _, _), _ = kernel_run(X, Y, [steps], [eta], w0=w0)
    expected = w_hat + np.linalg.matrix_power(np.eye(6) - eta * A, steps) @ (w0 - w_hat)
    np.testing.assert_allclose(last[0], expected, rtol=1e-12)


@pytest.mark.parametrize("method", ["gd", "nesterov", "prox", "heavy_ball", "adam"])
@pytest.mark.parametrize("wide", [False, True])
def test_zero_learning_rate_is_a_no_op(method, wide):
    X, Y, _ = draw_problem(0, 5, 8, 4, "logistic")
    w0 = np.arange(4.0)
    _, (last, avg, end), (w, *_rest) = kernel_run(X, Y, [3] * 5, [0.0] * 5, method=method, loss="logistic", w0=w0,
                                                 wide=wide)
    for arr in (last, avg, end):
        np.testing.assert_array_equal(arr, np.tile(w0, (5, 1)))


def test_constant_zero_momentum_and_zero_prox_weight_are_gd():
    X, Y, _ = draw_problem(1, 4, 10, 3, "squared")
    K, lr = [2, 3, 1, 4], [0.3] * 4
    _, gd, _ = kernel_run(X, Y, K, lr)
    _, nest0, _ = kernel_run(X, Y, K, lr, method="nesterov", momentum=0.0)
    _, prox0, _ = kernel_run(X, Y, K, lr, method="prox", lam=0.0)
    _, ball0, _ = kernel_run(X, Y, K, lr, method="heavy_ball", momentum=0.0)
    for a, b, c, e in zip(gd, nest0, prox0, ball0):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(a, e)


def test_adam_first_step_moves_every_coordinate_by_the_learning_rate():
    # torch's Adam: after one step m̂ = g and v̂ = g², so w moves by η·g/(|g| + ε) ≈ η·sign(g)
    X, Y, _ = draw_problem(6, 1, 16, 5, "squared")
    w0 = np.linspace(-1, 1, 5)
    _, (last, _, _), _ = kernel_run(X, Y, [1], [0.01], method="adam", w0=w0, eps=1e-12)
    g = X[0].T @ (X[0] @ w0 - Y[0]) / 16
    np.testing.assert_allclose(last[0], w0 - 0.01 * np.sign(g), rtol=0, atol=1e-12)


def test_heavy_ball_on_one_batch_is_the_two_term_recurrence():
    # v_k = μ v_{k−1} + g_k, w_k = w_{k−1} − η v_k is w_k = w_{k−1} − η g_k + μ (w_{k−1} − w_{k−2})
    X, Y, _ = draw_problem(7, 1, 20, 4, "squared")
    mu, eta = 0.8, 0.1
    w_prev = w = np.linspace(-1, 1, 4)
    for _ in range(12):
        g = X[0].T @ (X[0] @ w - Y[0]) / 20
        w_prev, w = w, w - eta * g + mu * (w - w_prev)
    _, (last, _, _), _ = kernel_run(X, Y, [12], [eta], method="heavy_ball", momentum=mu, w0=np.linspace(-1, 1, 4))
    np.testing.assert_allclose(last[0], w, rtol=1e-12)


def test_divergence_is_reported_with_the_batch_index():
    X, Y, _ = draw_problem(2, 50, 8, 3, "squared")
    alive, _, (w, _S, _a, _e, _c, diverged) = kernel_run(X * 10, Y, [4] * 50, [10.0] * 50)
    assert alive == 0 and 0 <= diverged[0] < 50
    assert not np.all(np.isfinite(w))


def test_float32_kernel_tracks_float64():
    X, Y, _ = draw_problem(4, 6, 16, 5, "logistic")
    for method in ("gd", "adam"):
        _, (l64, a64, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, loss="logistic", method=method)
        _, (l32, a32, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, loss="logistic", method=method, dtype=np.float32)
        assert l32.dtype == np.float32
        np.testing.assert_allclose(l32, l64, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a32, a64, rtol=1e-5, atol=1e-5)


def test_kernel_does_not_recompile_on_a_second_call():
    X, Y, _ = draw_problem(5, 2, 4, 3, "squared")
    kernel_run(X, Y, [1, 2], [0.1, 0.1])
    kernel = kernel_for(methods.GD, losses.SQUARED, False)
    n_signatures = len(kernel.signatures)
    kernel_run(X, Y, [3, 1], [0.2, 0.2], l2=0.1)
    kernel_run(X, Y, [3, 1], np.full((2, 3), 0.2), first=True)
    assert len(kernel.signatures) == n_signatures


def test_each_method_loss_and_layout_is_its_own_kernel_and_an_unknown_code_is_refused():
    assert kernel_for(methods.GD, losses.SQUARED, False) is kernel_for(methods.GD, losses.SQUARED, False)
    assert kernel_for(methods.GD, losses.SQUARED, False) is not kernel_for(methods.GD, losses.LOGISTIC, False)
    assert kernel_for(methods.GD, losses.SQUARED, False) is not kernel_for(methods.GD, losses.SQUARED, True)
    assert kernel_for(methods.GD, losses.SQUARED, False) is not kernel_for(methods.GD, losses.SQUARED, False, True)
    with pytest.raises(ValueError, match="no kernel"):
        kernel_for(99, losses.SQUARED, False)
    with pytest.raises(ValueError, match="no kernel"):
        kernel_for(methods.GD, 7, False)
    with pytest.raises(ValueError, match="margin losses"):
        kernel_for(methods.GD, losses.SOFTMAX, True)


@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 5), B=st.integers(1, 9), d=st.integers(1, 6), L=st.integers(1, 6),
    method=st.sampled_from(["gd", "nesterov", "prox", "sgd", "heavy_ball", "adam"]),
    loss=st.sampled_from(["squared", "logistic"]),
    l2=st.sampled_from([0.0, 0.05]),
    momentum=st.sampled_from(["nesterov", 0.7]),
)
def test_many_learning_rates_kernel_matches_naive_twin_per_column(seed, T, B, d, L, method, loss, l2, momentum):
    X, Y, rng = draw_problem(seed, T, B, d, loss)
    K = rng.integers(1, 4, size=T)
    lrs = rng.uniform(0.0, 0.5, size=(T, L))
    rows = rng.integers(0, B, size=(int(K.sum()), max(1, B // 2))) if method == "sgd" else None
    kind = "gd" if method == "sgd" else method
    if kind == "heavy_ball" and momentum == "nesterov":
        momentum = 0.9
    w0 = rng.standard_normal(d)
    args = dict(method=kind, loss=loss, l2=l2, momentum=momentum, lam=0.3, rows=rows, w0=w0, betas=(0.8, 0.99),
                eps=1e-3)
    alive, logs, _, first = kernel_run(X, Y, K, lrs, wide=True, first=True, **args)
    assert alive == L
    for col in range(L):
        *expected, want_first = echoed_run(X, Y, K, lrs[:, col], first_loss=True, **args)
        for got, want in zip(logs, expected):
            np.testing.assert_allclose(got[:, col], want, rtol=1e-12, atol=ATOL[kind])
        np.testing.assert_allclose(first[:, col], want_first, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("L", [7, 8, 9, 41])
@pytest.mark.parametrize("d", [4, 7])
def test_a_column_of_the_wide_kernel_is_bitwise_the_same_whatever_shares_the_call(loss, L, d):
    # Columns go four at a time (L rounded up, the extra ones repeating the last), each alone is
    # L = 1; d = 7: features go four at a time, then one by one.
    X, Y, rng = draw_problem(11, 5, 2 * _BLOCK + 7, d, loss)
    K = rng.integers(1, 4, size=5)
    lrs = rng.uniform(0.0, 1.0, size=(5, L))
    w0 = rng.standard_normal(d)
    for method in ("gd", "adam"):
        _, together, _ = kernel_run(X, Y, K, lrs, loss=loss, w0=w0, wide=True, method=method)
        for col in sorted({0, 3 % L, L // 2, L - 1}):
            _, alone, _ = kernel_run(X, Y, K, lrs[:, col:col + 1], loss=loss, w0=w0, wide=True, method=method)
            for got, want in zip(together, alone):
                np.testing.assert_array_equal(got[:, col], want[:, 0])


@pytest.mark.parametrize("loss", ["squared", "logistic", "softmax"])
def test_rows_layout_with_several_iterates_is_bitwise_each_iterate_alone(loss):
    X, Y, rng = draw_problem(13, 6, 19, 3, loss)
    K = rng.integers(1, 4, size=6)
    lrs = rng.uniform(0.0, 0.5, size=(6, 3))
    w0 = rng.standard_normal(9 if loss == "softmax" else 3)
    _, together, _ = kernel_run(X, Y, K, lrs, loss=loss, w0=w0, method="heavy_ball", momentum=0.5)
    for col in range(3):
        _, alone, _ = kernel_run(X, Y, K, lrs[:, col], loss=loss, w0=w0, method="heavy_ball", momentum=0.5)
        for got, want in zip(together, alone):
            np.testing.assert_array_equal(got[:, col], want)


@pytest.mark.parametrize("method", ["gd", "nesterov", "sgd"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logistic_kernel_matches_naive_twin_over_several_blocks_of_rows(method, dtype):
    B = 2 * _BLOCK + 11  # two full blocks and one of 11 rows (two groups of four, three single rows)
    X, Y, rng = draw_problem(12, 4, B, 5, "logistic")
    K, lrs = rng.integers(1, 4, size=4), rng.uniform(0.5, 2.0, size=4)
    rows = rng.integers(0, B, size=(int(K.sum()), B - 3)) if method == "sgd" else None
    args = dict(method="gd" if method == "sgd" else method, loss="logistic", l2=0.05, rows=rows,
                w0=3.0 * rng.standard_normal(5))
    _, logs, _ = kernel_run(X, Y, K, lrs, dtype=dtype, **args)
    expected = echoed_run(X.astype(dtype).astype(float), Y, K, lrs, **args)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, **tol)


def test_many_learning_rates_kernel_does_not_recompile_on_a_second_call():
    from echosim import EchoedGD, LeastSquares, Logistic
    from echosim.training.runner import run_many

    run_many(LeastSquares(dim=3), [EchoedGD(0.1), EchoedGD(0.2)], batch_size=4, echo=2, n_batches=3)
    kernel = kernel_for(methods.GD, losses.SQUARED, True)
    n_signatures = len(kernel.signatures)
    run_many(LeastSquares(dim=2), [EchoedGD(0.3), EchoedGD(0.1), EchoedGD(0.0)], batch_size=5, echo=1, n_batches=20)
    run_many(Logistic(dim=2), [EchoedGD(0.3)], batch_size=5, echo=1, n_batches=20, first_loss=True)
    assert len(kernel.signatures) == n_signatures
