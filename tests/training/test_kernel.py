"""The Numba optimizer kernel against its naive NumPy twin, and its invariants."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.training import codes
from echosim.training.kernel import _BLOCK, echo_chunk, echo_chunk_many
from tests.naive import echoed_run

METHODS = {"gd": codes.METHOD_GD, "nesterov": codes.METHOD_NESTEROV, "prox": codes.METHOD_PROX}


def kernel_run(X, Y, K, lr, method="gd", loss="squared", l2=0.0, momentum="nesterov", lam=0.0,
               rows=None, w0=None, dtype=np.float64):
    """Call the kernel once over all batches, logging after every batch."""
    T, _, d = X.shape
    w = np.zeros(d, dtype=dtype) if w0 is None else np.array(w0, dtype=dtype)
    d = len(w)
    state = (w, w.copy(), np.zeros(d), np.zeros(d), np.zeros(2, dtype=np.int64))
    logs = (np.empty((T, d), dtype=dtype), np.empty((T, d)), np.empty((T, d)))
    rows = np.zeros((0, 0), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    status = echo_chunk(
        X.astype(dtype), Y.astype(dtype), np.asarray(K, dtype=np.int64), np.asarray(lr, dtype=np.float64),
        rows, METHODS[method], codes.LOSS_CODES[loss], float(l2),
        -1.0 if momentum == "nesterov" else float(momentum), float(lam),
        *state, np.arange(T, dtype=np.int64), False, *logs)
    return status, logs, state


def kernel_many_run(X, Y, K, lrs, method="gd", loss="squared", l2=0.0, momentum="nesterov", lam=0.0,
                    rows=None, w0=None):
    """`kernel_run` for echo_chunk_many: one column per learning rate in lrs (T, L)."""
    T, _, d = X.shape
    L = lrs.shape[1]
    w0 = np.zeros(d) if w0 is None else np.asarray(w0, dtype=float)
    W = np.repeat(w0[:, None], L, axis=1)
    state = (W, W.copy(), np.zeros((d, L)), np.zeros((d, L)), np.zeros(2, dtype=np.int64),
             np.full(L, -1, dtype=np.int64))
    logs = (np.empty((T, d, L)), np.empty((T, d, L)), np.empty((T, d, L)))
    rows = np.zeros((0, 0), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    alive = echo_chunk_many(
        X, Y, np.asarray(K, dtype=np.int64), np.ascontiguousarray(lrs), rows, METHODS[method],
        codes.LOSS_CODES[loss], float(l2), -1.0 if momentum == "nesterov" else float(momentum), float(lam),
        *state, np.arange(T, dtype=np.int64), False, *logs)
    return alive, logs


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
    method=st.sampled_from(["gd", "nesterov", "prox", "sgd"]),
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
    w0 = rng.standard_normal(3 * d if loss == "softmax" else d)
    args = dict(method=kind, loss=loss, l2=l2, momentum=momentum, lam=0.3, rows=rows, w0=w0)
    status, logs, _ = kernel_run(X, Y, K, lrs, **args)
    expected = echoed_run(X, Y, K, lrs, **args)
    assert status == -1
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


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


@pytest.mark.parametrize("method", ["gd", "nesterov", "prox"])
def test_zero_learning_rate_is_a_no_op(method):
    X, Y, _ = draw_problem(0, 5, 8, 4, "logistic")
    w0 = np.arange(4.0)
    _, (last, avg, end), (w, *_rest) = kernel_run(X, Y, [3] * 5, [0.0] * 5, method=method, loss="logistic", w0=w0)
    for arr in (last, avg, end):
        np.testing.assert_array_equal(arr, np.tile(w0, (5, 1)))


def test_constant_zero_momentum_and_zero_prox_weight_are_gd():
    X, Y, _ = draw_problem(1, 4, 10, 3, "squared")
    K, lr = [2, 3, 1, 4], [0.3] * 4
    _, gd, _ = kernel_run(X, Y, K, lr)
    _, nest0, _ = kernel_run(X, Y, K, lr, method="nesterov", momentum=0.0)
    _, prox0, _ = kernel_run(X, Y, K, lr, method="prox", lam=0.0)
    for a, b, c in zip(gd, nest0, prox0):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def test_divergence_is_reported_with_the_batch_index():
    X, Y, _ = draw_problem(2, 50, 8, 3, "squared")
    status, _, (w, *_r) = kernel_run(X * 10, Y, [4] * 50, [10.0] * 50)
    assert 0 <= status < 50
    assert not np.all(np.isfinite(w))


def test_float32_kernel_tracks_float64():
    X, Y, _ = draw_problem(4, 6, 16, 5, "logistic")
    _, (l64, a64, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, loss="logistic")
    _, (l32, a32, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, loss="logistic", dtype=np.float32)
    assert l32.dtype == np.float32
    np.testing.assert_allclose(l32, l64, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a32, a64, rtol=1e-5, atol=1e-6)


def test_kernel_does_not_recompile_on_a_second_call():
    X, Y, _ = draw_problem(5, 2, 4, 3, "squared")
    kernel_run(X, Y, [1, 2], [0.1, 0.1])
    n_signatures = len(echo_chunk.signatures)
    kernel_run(X, Y, [3, 1], [0.2, 0.2], method="nesterov", loss="logistic", l2=0.1)
    kernel_run(X, Y, [3, 1], [0.2, 0.2], rows=np.zeros((4, 2), dtype=np.int64))
    assert len(echo_chunk.signatures) == n_signatures


@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 5), B=st.integers(1, 9), d=st.integers(1, 6), L=st.integers(1, 6),
    method=st.sampled_from(["gd", "nesterov", "prox", "sgd"]),
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
    w0 = rng.standard_normal(d)
    alive, logs = kernel_many_run(X, Y, K, lrs, method=kind, loss=loss, l2=l2, momentum=momentum, lam=0.3,
                                  rows=rows, w0=w0)
    assert alive == L
    for col in range(L):
        expected = echoed_run(X, Y, K, lrs[:, col], method=kind, loss=loss, l2=l2, momentum=momentum, lam=0.3,
                              rows=rows, w0=w0)
        for got, want in zip(logs, expected):
            np.testing.assert_allclose(got[:, :, col], want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("L", [7, 8, 9, 41])
@pytest.mark.parametrize("d", [4, 7])
def test_a_column_of_the_many_learning_rates_kernel_is_bitwise_the_same_whatever_shares_the_call(loss, L, d):
    # Columns go four at a time (L rounded up, the extra ones repeating the last), each alone is
    # L = 1; d = 7: features go four at a time, then one by one.
    X, Y, rng = draw_problem(11, 5, 2 * _BLOCK + 7, d, loss)
    K = rng.integers(1, 4, size=5)
    lrs = rng.uniform(0.0, 1.0, size=(5, L))
    w0 = rng.standard_normal(d)
    _, together = kernel_many_run(X, Y, K, lrs, loss=loss, w0=w0)
    for col in sorted({0, 3 % L, L // 2, L - 1}):
        _, alone = kernel_many_run(X, Y, K, lrs[:, col:col + 1], loss=loss, w0=w0)
        for got, want in zip(together, alone):
            np.testing.assert_array_equal(got[:, :, col], want[:, :, 0])


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
    n_signatures = len(echo_chunk_many.signatures)
    run_many(Logistic(dim=2), [EchoedGD(0.3), EchoedGD(0.1), EchoedGD(0.0)], batch_size=5, echo=1, n_batches=20)
    assert len(echo_chunk_many.signatures) == n_signatures
