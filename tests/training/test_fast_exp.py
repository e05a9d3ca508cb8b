"""The vectorisable exp and σ of the kernels against NumPy and SciPy, and the loops they vectorise."""

import platform
import re

import numpy as np
import pytest
from numba import njit
from scipy.special import expit

from echosim.training.fast_exp import exp, sigmoid
from echosim.training.gradients import BLOCK, FASTMATH, dlogistic
from echosim.training.gradients import dlogistic_many as _dlogistic_many
from echosim.training.gradients import logistic_grad_full as _logistic_grad_full

rng = np.random.default_rng(0)
X_GRID = np.concatenate([
    np.linspace(-800.0, 800.0, 1_600_001),  # overflow and underflow on both sides
    np.linspace(-745.2, -700.0, 45_201),  # subnormal results and the edge to normal ones
    rng.uniform(-1.0, 1.0, 200_000),  # small arguments: n ∈ {−1, 0, 1}
    rng.uniform(-40.0, 40.0, 200_000),  # where σ is neither 0 nor 1
])


@njit(fastmath=FASTMATH)  # the kernels' flags: exp and σ must keep their own order inside them
def exp_all(x, out):
    for i in range(x.shape[0]):
        out[i] = exp(x[i])


@njit(fastmath=FASTMATH)
def sigmoid_all(x, out):
    for i in range(x.shape[0]):
        out[i] = sigmoid(x[i])


def ulps(got, want):
    """|got − want| in units of the spacing of doubles at `want` (2⁻¹⁰⁷⁴ among subnormals)."""
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_exp_is_within_one_ulp_of_numpy_and_overflows_and_underflows_where_it_does():
    got = np.empty_like(X_GRID)
    exp_all(X_GRID, got)
    with np.errstate(over="ignore"):
        want = np.exp(X_GRID)
    finite = np.isfinite(want)
    assert ulps(got[finite], want[finite]).max() <= 1.0
    np.testing.assert_array_equal(got[~finite], np.inf)
    np.testing.assert_array_equal(got == 0.0, want == 0.0)
    assert np.all(got[(X_GRID > -745.0) & (X_GRID < -709.0)] < np.finfo(float).tiny)  # subnormal, not flushed


def test_sigmoid_is_within_three_ulp_of_expit_and_saturates_as_the_old_kernel_did():
    got = np.empty_like(X_GRID)
    sigmoid_all(X_GRID, got)
    # expit flushes to 0 below −709.8; there σ(x) = eˣ/(1 + eˣ) rounds to eˣ
    want = np.where(X_GRID < -700.0, np.exp(np.minimum(X_GRID, 0.0)), expit(X_GRID))
    assert ulps(got, want).max() <= 3.0  # expit is itself up to 2 ulp off (see the next test)
    assert np.all(got[X_GRID > 37.0] == 1.0) and np.all(got[X_GRID < -745.2] == 0.0)
    e = np.exp(-np.abs(X_GRID))
    old = np.where(X_GRID > 0, 1.0 / (1.0 + e), e / (1.0 + e))  # the kernel's σ before
    np.testing.assert_array_equal(got == 1.0, old == 1.0)
    np.testing.assert_array_equal(got == 0.0, old == 0.0)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63, reason="long double is no wider than double here")
def test_exp_within_one_and_sigmoid_within_two_ulp_of_the_exact_values():
    x = X_GRID.astype(np.longdouble)
    with np.errstate(over="ignore"):
        exact_exp = np.exp(x).astype(np.float64)
        exact_sigmoid = (1.0 / (1.0 + np.exp(-x))).astype(np.float64)
    got_exp, got_sigmoid = np.empty_like(X_GRID), np.empty_like(X_GRID)
    exp_all(X_GRID, got_exp)
    sigmoid_all(X_GRID, got_sigmoid)
    finite = np.isfinite(exact_exp)
    assert ulps(got_exp[finite], exact_exp[finite]).max() <= 1.0
    assert ulps(got_sigmoid, exact_sigmoid).max() <= 2.0
    assert ulps(expit(X_GRID[X_GRID > -700]), exact_sigmoid[X_GRID > -700]).max() <= 2.0  # SciPy's, for scale


def test_logistic_derivative_is_minus_y_sigmoid_of_minus_y_z():
    z = np.linspace(-700.0, 700.0, 1401)
    for y in (-1.0, 1.0):
        got = np.array([dlogistic(v, y) for v in z])
        assert ulps(got, -y * expit(-y * z)).max() <= 2.0


def test_nan_passes_through_and_infinities_saturate():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])
    e, s = np.empty_like(x), np.empty_like(x)
    exp_all(x, e)
    sigmoid_all(x, s)
    np.testing.assert_array_equal(e, [np.nan, np.inf, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(s, [np.nan, 1.0, 0.0, 0.5, 0.5])


@njit(fastmath=FASTMATH)
def logistic_grad(X, y, rows, W, G, r, labels):
    _logistic_grad_full(X, y, rows, W, 0, G, r, labels)


@njit(fastmath=FASTMATH)
def dlogistic_many(Rt, yt, L):
    _dlogistic_many(Rt, yt, L, 0.5)


PACKED_DIVISION = {"x86_64": r"\bv?divpd\b", "AMD64": r"\bv?divpd\b", "aarch64": r"\bfdiv\s+v\d+\.2d"}


@pytest.mark.skipif(platform.machine() not in PACKED_DIVISION, reason="an instruction set we do not read")
def test_both_kernels_evaluate_the_logistic_derivative_in_vector_registers():
    # the only division in these loops is σ's: a packed one means ℓ' runs several rows at a time
    d, B, L = 3, 2 * BLOCK + 5, 9
    X, y = rng.standard_normal((B, d)), np.sign(rng.standard_normal(B))
    no_rows = np.zeros(0, dtype=np.int64)
    logistic_grad(X, y, no_rows, np.ones((1, d)), np.zeros((1, d)), np.empty(BLOCK), np.empty(BLOCK))
    Lp = L + (-L) % 4
    dlogistic_many(rng.standard_normal((Lp, B)), y, L)
    for kernel in (logistic_grad, dlogistic_many):
        asm = kernel.inspect_asm(kernel.signatures[0])
        assert re.search(PACKED_DIVISION[platform.machine()], asm), kernel.__name__
