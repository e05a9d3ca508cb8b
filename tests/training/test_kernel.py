"""The Numba optimizer kernel against its naive NumPy twin, and its invariants."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.training import losses, methods
from echosim.training.gradients import BLOCK
from echosim.training.kernel import State, call_chunk, check_tables, kernel_for
from echosim.training.methods import (METHODS, EchoedAdam, EchoedAdamW, EchoedGD, EchoedHeavyBall, EchoedNesterov,
                                      EchoedProx, EchoedSGD)
from tests.naive import echoed_run

TEST_HYPER = {"lam": 0.3, "beta1": 0.8, "beta2": 0.99, "eps": 1e-3}
"""Hyper-parameters of the twin tests by config key (other keys: the test's or the spec's default)."""


def spec_of(name, momentum="nesterov", **hyper):
    """The spec of method row `name` with the tests' hyper-parameters (lr unused: the tests pass lr arrays)."""
    row = METHODS[name]
    if "momentum" in row.fields:  # a number or "nesterov", which only Nesterov takes
        hyper.setdefault("momentum", 0.9 if momentum == "nesterov" and row.defaults()["momentum"] != "nesterov"
                         else momentum)
    return row.build(0.0, {**TEST_HYPER, **hyper})


def atol_of(optimizer):
    """Methods dividing by √v̂ + ε ≈ |g| + ε: a rounding difference δ in a gradient near 0 moves
    their step by about ηδ/ε (ε = 1e-3 in the tests), so their iterates agree to atol 1e-12."""
    return 1e-12 if "eps" in optimizer.method.hyper else 1e-14


def kernel_run(X, Y, K, lr, optimizer=EchoedGD(0.0), loss="squared", l2=0.0, rows=None, w0=None, dtype=np.float64,
               wide=False, first=False):
    """Call the kernel of `optimizer`'s row once over all batches, logging after every batch;
    lr (T,) for one iterate (then logs (T, d)) or (T, L) for L iterates (logs (T, L, d))."""
    T, _, d = X.shape
    lrs = np.asarray(lr, dtype=np.float64)
    single = lrs.ndim == 1
    lrs = np.ascontiguousarray(lrs[:, None] if single else lrs)
    L = lrs.shape[1]
    w0 = np.zeros(d) if w0 is None else np.asarray(w0, dtype=float)
    d = len(w0)
    row = optimizer.method
    state = State.start(np.repeat(w0[None, :], L, axis=0).astype(dtype), row)
    logs = (np.empty((T, L, d), dtype=dtype), np.empty((T, L, d)), np.empty((T, L, d)))
    first_loss = np.full((T, L), np.nan) if first else np.zeros((0, L))
    rows = np.zeros((0, 0), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    assert (rows.shape[0] > 0) == row.sub_batches
    kernel = kernel_for(row.code, losses.LOSSES[loss].code, wide, row.sub_batches, first)
    alive = call_chunk(kernel, X.astype(dtype), Y.astype(dtype), np.asarray(K, dtype=np.int64), lrs, rows,
                       optimizer.kernel_hyper(), l2, state, np.arange(T, dtype=np.int64), False, logs, first_loss)
    if single:
        logs = tuple(a[:, 0] for a in logs)
        state = (state.W[0], *state[1:])
        first_loss = first_loss[:, 0]
    return (alive, logs, state, first_loss) if first else (alive, logs, state)


def draw_problem(seed, T, B, d, loss):
    """Batches with the labels the loss's row asks for: real targets, ±1, or three classes."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, B, d)) / np.sqrt(d)
    labels = losses.LOSSES[loss].labels
    if labels == "real targets":
        Y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal((T, B))
    elif labels.startswith("class indices"):
        Y = rng.integers(0, 3, size=(T, B)).astype(float)  # three classes
    else:
        assert labels == "−1 or +1", labels
        Y = np.where(rng.random((T, B)) < 0.5, -1.0, 1.0)
    return X, Y, rng


@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 6), B=st.integers(1, 9), d=st.integers(1, 7),
    method=st.sampled_from(list(METHODS)),
    loss=st.sampled_from(list(losses.LOSSES)),
    l2=st.sampled_from([0.0, 0.05]),
    lr=st.floats(0.0, 0.5),
    momentum=st.sampled_from(["nesterov", 0.0, 0.7]),
)
def test_kernel_matches_naive_twin(seed, T, B, d, method, loss, l2, lr, momentum):
    X, Y, rng = draw_problem(seed, T, B, d, loss)
    K = rng.integers(1, 5, size=T)
    lrs = lr * rng.uniform(0.5, 1.0, size=T)
    opt = spec_of(method, momentum)
    rows = rng.integers(0, B, size=(int(K.sum()), max(1, B // 2))) if opt.method.sub_batches else None
    w0 = rng.standard_normal(3 * d if loss == "softmax" else d)
    args = dict(loss=loss, l2=l2, rows=rows, w0=w0)
    alive, logs, _, first = kernel_run(X, Y, K, lrs, opt, first=True, **args)
    *expected, want_first = echoed_run(X, Y, K, lrs, opt, first_loss=True, **args)
    assert alive == 1
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=atol_of(opt))
    np.testing.assert_allclose(first, want_first, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("opt", [EchoedGD(0.0), EchoedSGD(0.0), EchoedAdam(0.0, eps=1e-3)], ids=repr)
def test_huber_kernel_matches_naive_twin_on_both_sides_of_delta(opt, wide, dtype):
    B = 2 * BLOCK + 7
    X, Y, rng = draw_problem(14, 5, B, 4, "huber")
    Y = Y + rng.choice([-3.0, 0.0, 3.0], size=Y.shape)  # residuals on both sides of δ = 1
    K, lrs = rng.integers(1, 4, size=5), rng.uniform(0.1, 0.5, size=5)
    w0 = rng.standard_normal(4)
    r = np.abs(X[0] @ w0 - Y[0])
    assert (r < 1).any() and (r > 1).any()
    rows = rng.integers(0, B, size=(int(K.sum()), B - 3)) if opt.method.sub_batches else None
    args = dict(loss="huber", l2=0.05, rows=rows, w0=w0)
    _, logs, _ = kernel_run(X, Y, K, lrs, opt, dtype=dtype, wide=wide, **args)
    expected = echoed_run(X.astype(dtype).astype(float), Y.astype(dtype).astype(float), K, lrs, opt, **args)
    tol = dict(rtol=1e-12, atol=atol_of(opt)) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, **tol)


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


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("wide", [False, True])
def test_zero_learning_rate_is_a_no_op(method, wide):
    X, Y, rng = draw_problem(0, 5, 8, 4, "logistic")
    w0 = np.arange(4.0)
    opt = spec_of(method)
    rows = rng.integers(0, 8, size=(15, 3)) if opt.method.sub_batches else None
    _, (last, avg, end), (w, *_rest) = kernel_run(X, Y, [3] * 5, [0.0] * 5, opt, loss="logistic", w0=w0,
                                                 wide=wide, rows=rows)
    for arr in (last, avg, end):
        np.testing.assert_array_equal(arr, np.tile(w0, (5, 1)))


def test_constant_zero_momentum_and_zero_prox_weight_are_gd():
    X, Y, _ = draw_problem(1, 4, 10, 3, "squared")
    K, lr = [2, 3, 1, 4], [0.3] * 4
    _, gd, _ = kernel_run(X, Y, K, lr)
    _, nest0, _ = kernel_run(X, Y, K, lr, EchoedNesterov(0.0, momentum=0.0))
    _, prox0, _ = kernel_run(X, Y, K, lr, EchoedProx(0.0, lam=0.0))
    _, ball0, _ = kernel_run(X, Y, K, lr, EchoedHeavyBall(0.0, momentum=0.0))
    for a, b, c, e in zip(gd, nest0, prox0, ball0):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(a, e)


def test_adam_first_step_moves_every_coordinate_by_the_learning_rate():
    # torch's Adam: after one step m̂ = g and v̂ = g², so w moves by η·g/(|g| + ε) ≈ η·sign(g)
    X, Y, _ = draw_problem(6, 1, 16, 5, "squared")
    w0 = np.linspace(-1, 1, 5)
    _, (last, _, _), _ = kernel_run(X, Y, [1], [0.01], EchoedAdam(0.0, eps=1e-12), w0=w0)
    g = X[0].T @ (X[0] @ w0 - Y[0]) / 16
    np.testing.assert_allclose(last[0], w0 - 0.01 * np.sign(g), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("loss", list(losses.LOSSES))
def test_adamw_kernel_matches_naive_twin(loss, wide, dtype):
    if wide and not losses.LOSSES[loss].margin:
        pytest.skip("the wide layout takes margin losses only")
    X, Y, rng = draw_problem(15, 6, 2 * BLOCK + 5, 4, loss)
    K, lrs = rng.integers(1, 4, size=6), rng.uniform(0.05, 0.3, size=6)
    opt = EchoedAdamW(0.0, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.3)
    args = dict(loss=loss, l2=0.05, w0=rng.standard_normal(12 if loss == "softmax" else 4))
    _, logs, _ = kernel_run(X, Y, K, lrs, opt, dtype=dtype, wide=wide, **args)
    expected = echoed_run(X.astype(dtype).astype(float), Y.astype(dtype).astype(float), K, lrs, opt, **args)
    tol = dict(rtol=1e-12, atol=atol_of(opt)) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)
    for got, want in zip(logs, expected):
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("wide", [False, True])
def test_adamw_without_weight_decay_is_adam_bitwise(wide):
    X, Y, rng = draw_problem(8, 6, 12, 4, "logistic")
    K, lrs, w0 = rng.integers(1, 4, size=6), rng.uniform(0.01, 0.1, size=6), rng.standard_normal(4)
    _, adam, _ = kernel_run(X, Y, K, lrs, EchoedAdam(0.0), loss="logistic", w0=w0, wide=wide)
    _, adamw, _ = kernel_run(X, Y, K, lrs, EchoedAdamW(0.0, weight_decay=0.0), loss="logistic", w0=w0, wide=wide)
    for a, b in zip(adam, adamw):
        np.testing.assert_array_equal(a, b)


def test_adamw_on_a_zero_gradient_only_shrinks_the_iterate_by_one_minus_lr_times_decay():
    # g = 0 keeps m = v = 0, so Adam's step is 0 and torch's AdamW leaves w ← (1 − ηλ)w per step
    X, Y = np.zeros((4, 5, 3)), np.zeros((4, 5))
    K, lrs, w0 = [2, 1, 3, 2], np.array([0.1, 0.2, 0.05, 0.1]), np.array([1.0, -2.0, 3.0])
    _, (last, _, _), _ = kernel_run(X, Y, K, lrs, EchoedAdamW(0.0, weight_decay=0.5), w0=w0)
    shrink = np.cumprod((1 - 0.5 * lrs) ** np.array(K))
    np.testing.assert_allclose(last, shrink[:, None] * w0, rtol=1e-14)


def test_heavy_ball_on_one_batch_is_the_two_term_recurrence():
    # v_k = μ v_{k−1} + g_k, w_k = w_{k−1} − η v_k is w_k = w_{k−1} − η g_k + μ (w_{k−1} − w_{k−2})
    X, Y, _ = draw_problem(7, 1, 20, 4, "squared")
    mu, eta = 0.8, 0.1
    w_prev = w = np.linspace(-1, 1, 4)
    for _ in range(12):
        g = X[0].T @ (X[0] @ w - Y[0]) / 20
        w_prev, w = w, w - eta * g + mu * (w - w_prev)
    _, (last, _, _), _ = kernel_run(X, Y, [12], [eta], EchoedHeavyBall(0.0, momentum=mu), w0=np.linspace(-1, 1, 4))
    np.testing.assert_allclose(last[0], w, rtol=1e-12)


def test_divergence_is_reported_with_the_batch_index():
    X, Y, _ = draw_problem(2, 50, 8, 3, "squared")
    alive, _, (w, _S, _a, _e, _c, diverged) = kernel_run(X * 10, Y, [4] * 50, [10.0] * 50)
    assert alive == 0 and 0 <= diverged[0] < 50
    assert not np.all(np.isfinite(w))


def test_float32_kernel_tracks_float64():
    X, Y, _ = draw_problem(4, 6, 16, 5, "logistic")
    for opt in (EchoedGD(0.0), EchoedAdam(0.0)):
        _, (l64, a64, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, opt, loss="logistic")
        _, (l32, a32, _), _ = kernel_run(X, Y, [3] * 6, [0.5] * 6, opt, loss="logistic", dtype=np.float32)
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


def test_adamw_and_huber_kernel_does_not_recompile_on_a_second_call():
    X, Y, _ = draw_problem(5, 2, 4, 3, "huber")
    kernel_run(X, Y, [1, 2], [0.1, 0.1], EchoedAdamW(0.0), loss="huber")
    kernel = kernel_for(methods.ADAMW, losses.HUBER, False)
    n_signatures = len(kernel.signatures)
    kernel_run(X, Y, [3, 1], [0.2, 0.2], EchoedAdamW(0.0, weight_decay=0.5), loss="huber", l2=0.1)
    kernel_run(X, Y, [3, 1], np.full((2, 3), 0.2), EchoedAdamW(0.0, betas=(0.5, 0.9)), loss="huber")
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


def test_the_kernel_has_a_path_for_every_row_and_refuses_a_row_without_one():
    import dataclasses

    check_tables(METHODS, losses.LOSSES)  # as at import
    adam = METHODS["echoed_adam"]
    with pytest.raises(ValueError, match="code 99 has no update branch"):
        check_tables({**METHODS, "echoed_new": dataclasses.replace(adam, name="echoed_new", code=99)}, losses.LOSSES)
    with pytest.raises(ValueError, match="4 hyper-parameters and 2 state arrays; .* reads 3 and 2"):
        check_tables({"echoed_adam": dataclasses.replace(adam, hyper=(*adam.hyper, "eps"))}, losses.LOSSES)
    with pytest.raises(ValueError, match="1 state arrays; .* reads 3 and 2"):
        check_tables({"echoed_adam": dataclasses.replace(adam, state=adam.state[:1])}, losses.LOSSES)
    softmax = losses.LOSSES["softmax"]
    with pytest.raises(ValueError, match="loss 'multi': code 9 is not a margin loss"):
        check_tables(METHODS, {"multi": dataclasses.replace(softmax, name="multi", code=9)})


def test_an_edit_of_the_gradients_changes_the_kernels_cache_key(monkeypatch):
    """Numba's cache checks only the stamp of kernel.py, while a kernel links in the compiled
    gradients of gradients.py: the digest of that file is part of every kernel's key."""
    import hashlib
    from pathlib import Path

    from echosim.training import gradients
    from echosim.training import kernel as kmod

    digest = int(hashlib.sha256(Path(gradients.__file__).read_bytes()).hexdigest()[:15], 16)
    assert kmod.GRADIENTS_DIGEST == digest

    def cache_key():
        kernel = kmod.kernel_for.__wrapped__(methods.GD, losses.SQUARED, False)  # built, not compiled
        return kernel._cache._index_key(None, kernel.targetctx.codegen())

    before = cache_key()
    assert cache_key() == before  # the same source: the same key
    monkeypatch.setattr(kmod, "GRADIENTS_DIGEST", digest + 1)  # as after an edit of gradients.py
    assert cache_key() != before


def test_a_code_admitted_without_its_branch_raises_in_the_kernel_instead_of_running_another_update(monkeypatch):
    from echosim.training import kernel as kmod

    monkeypatch.setitem(kmod.UPDATES, 99, (0, 0))  # admitted by the guard, but no branch below it
    kernel = kmod.kernel_for.__wrapped__(99, losses.SQUARED, False)  # not kept in kernel_for's cache
    X, Y, _ = draw_problem(0, 1, 4, 2, "squared")
    state = State.start(np.ones((1, 2)), METHODS["echoed_gd"])
    logs = (np.empty((1, 1, 2)), np.empty((1, 1, 2)), np.empty((1, 1, 2)))
    with pytest.raises(ValueError, match="no update branch"):
        call_chunk(kernel, X, Y, np.ones(1, dtype=np.int64), np.full((1, 1), 0.1), np.zeros((0, 0), dtype=np.int64),
                   np.zeros(0), 0.0, state, np.zeros(1, dtype=np.int64), False, logs, np.zeros((0, 1)))
    np.testing.assert_array_equal(state.W, 1.0)


@pytest.mark.parametrize("name", list(METHODS))
def test_the_warm_up_passes_hyper_parameters_and_state_sized_from_the_row(name, monkeypatch):
    from echosim.training import kernel as kmod

    row, seen = METHODS[name], []
    kmod.warm_up(lambda *args: seen.append(args), row, "float32", first=True)
    (args,) = seen
    hyper, W, S, first_loss = args[5], args[7], args[8], args[18]
    assert hyper.shape == (len(row.hyper),) and hyper.dtype == np.float64
    np.testing.assert_array_equal(hyper, row.spec(lr=0.0).kernel_hyper())
    assert S.shape == (len(row.state), 1, 1) and S.dtype == W.dtype == np.float32
    assert args[4].shape == ((1, 1) if row.sub_batches else (0, 0)) and first_loss.shape == (1, 1)


@given(
    seed=st.integers(0, 2**32 - 1),
    T=st.integers(1, 5), B=st.integers(1, 9), d=st.integers(1, 6), L=st.integers(1, 6),
    method=st.sampled_from(list(METHODS)),
    loss=st.sampled_from([name for name, row in losses.LOSSES.items() if row.margin]),
    l2=st.sampled_from([0.0, 0.05]),
    momentum=st.sampled_from(["nesterov", 0.7]),
)
def test_many_learning_rates_kernel_matches_naive_twin_per_column(seed, T, B, d, L, method, loss, l2, momentum):
    X, Y, rng = draw_problem(seed, T, B, d, loss)
    K = rng.integers(1, 4, size=T)
    lrs = rng.uniform(0.0, 0.5, size=(T, L))
    opt = spec_of(method, momentum)
    rows = rng.integers(0, B, size=(int(K.sum()), max(1, B // 2))) if opt.method.sub_batches else None
    w0 = rng.standard_normal(d)
    args = dict(loss=loss, l2=l2, rows=rows, w0=w0)
    alive, logs, _, first = kernel_run(X, Y, K, lrs, opt, wide=True, first=True, **args)
    assert alive == L
    for col in range(L):
        *expected, want_first = echoed_run(X, Y, K, lrs[:, col], opt, first_loss=True, **args)
        for got, want in zip(logs, expected):
            np.testing.assert_allclose(got[:, col], want, rtol=1e-12, atol=atol_of(opt))
        np.testing.assert_allclose(first[:, col], want_first, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("L", [7, 8, 9, 41])
@pytest.mark.parametrize("d", [4, 7])
def test_a_column_of_the_wide_kernel_is_bitwise_the_same_whatever_shares_the_call(loss, L, d):
    # Columns go four at a time (L rounded up, the extra ones repeating the last), each alone is
    # L = 1; d = 7: features go four at a time, then one by one.
    X, Y, rng = draw_problem(11, 5, 2 * BLOCK + 7, d, loss)
    K = rng.integers(1, 4, size=5)
    lrs = rng.uniform(0.0, 1.0, size=(5, L))
    w0 = rng.standard_normal(d)
    for opt in (EchoedGD(0.0), EchoedAdam(0.0)):
        _, together, _ = kernel_run(X, Y, K, lrs, opt, loss=loss, w0=w0, wide=True)
        for col in sorted({0, 3 % L, L // 2, L - 1}):
            _, alone, _ = kernel_run(X, Y, K, lrs[:, col:col + 1], opt, loss=loss, w0=w0, wide=True)
            for got, want in zip(together, alone):
                np.testing.assert_array_equal(got[:, col], want[:, 0])


@pytest.mark.parametrize("loss", ["squared", "logistic", "softmax"])
def test_rows_layout_with_several_iterates_is_bitwise_each_iterate_alone(loss):
    X, Y, rng = draw_problem(13, 6, 19, 3, loss)
    K = rng.integers(1, 4, size=6)
    lrs = rng.uniform(0.0, 0.5, size=(6, 3))
    w0 = rng.standard_normal(9 if loss == "softmax" else 3)
    ball = EchoedHeavyBall(0.0, momentum=0.5)
    _, together, _ = kernel_run(X, Y, K, lrs, ball, loss=loss, w0=w0)
    for col in range(3):
        _, alone, _ = kernel_run(X, Y, K, lrs[:, col], ball, loss=loss, w0=w0)
        for got, want in zip(together, alone):
            np.testing.assert_array_equal(got[:, col], want)


@pytest.mark.parametrize("opt", [EchoedGD(0.0), EchoedNesterov(0.0), EchoedSGD(0.0)], ids=repr)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logistic_kernel_matches_naive_twin_over_several_blocks_of_rows(opt, dtype):
    B = 2 * BLOCK + 11  # two full blocks and one of 11 rows (two groups of four, three single rows)
    X, Y, rng = draw_problem(12, 4, B, 5, "logistic")
    K, lrs = rng.integers(1, 4, size=4), rng.uniform(0.5, 2.0, size=4)
    rows = rng.integers(0, B, size=(int(K.sum()), B - 3)) if opt.method.sub_batches else None
    args = dict(loss="logistic", l2=0.05, rows=rows, w0=3.0 * rng.standard_normal(5))
    _, logs, _ = kernel_run(X, Y, K, lrs, opt, dtype=dtype, **args)
    expected = echoed_run(X.astype(dtype).astype(float), Y, K, lrs, opt, **args)
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
