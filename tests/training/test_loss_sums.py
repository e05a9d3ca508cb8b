"""The fixed-order loss sums of `Dataset`: equal to their NumPy twins, the same bits under any BLAS threading."""

import os
import subprocess
import sys

import numpy as np
import pytest

from echosim.training import losses as dr


def data(n=3000, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sign(rng.standard_normal(n)), rng.standard_normal((d, 5)) * 2


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_mean_losses_equal_the_numpy_twin(loss):
    X, y, Wt = data()
    Z = X @ Wt
    twin = np.logaddexp(0.0, -y[:, None] * Z) if loss == "logistic" else 0.5 * (Z - y[:, None]) ** 2
    np.testing.assert_allclose(dr.mean_losses(X, y, Wt, dr.loss_code(loss)), twin.mean(axis=0), rtol=1e-13)


def test_logistic_losses_do_not_overflow_at_huge_margins():
    X, y, Wt = data(n=10)
    out = dr.mean_losses(X, y, Wt * 1e200, dr.LOGISTIC)
    assert np.all(np.isfinite(out)) and np.all(out > 1e198)


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_gradient_and_hessian_equal_the_numpy_twin(loss):
    X, y, Wt = data()
    w = Wt[:, 0]
    z = X @ w
    if loss == "logistic":
        s = 1 / (1 + np.exp(y * z))
        r, h = -y * s, s * (1 - s)
    else:
        r, h = z - y, np.ones_like(z)
    g, H = dr.grad_hess(X, y, w, dr.loss_code(loss))
    np.testing.assert_allclose(g, X.T @ r / len(y), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(H, (X * h[:, None]).T @ X / len(y), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(H, H.T)
    np.testing.assert_allclose(dr.margins(X, w), z, rtol=1e-13, atol=1e-14)


def test_a_column_does_not_depend_on_the_others():
    X, y, Wt = data()
    both = dr.mean_losses(X, y, Wt, dr.LOGISTIC)
    for j in range(Wt.shape[1]):
        assert dr.mean_losses(X, y, np.ascontiguousarray(Wt[:, j:j + 1]), dr.LOGISTIC)[0] == both[j]


PROBE = """
import hashlib, numpy as np
from echosim.training.problems import Dataset
rng = np.random.default_rng(3)
X = rng.standard_normal((200_000, 12))
y = np.sign(X @ rng.standard_normal(12) + rng.standard_normal(200_000))
ds = Dataset(X, y, l2=1e-3)
W = ds.w_star + 0.3 * rng.standard_normal((300, 12))
print(hashlib.sha256(np.concatenate([[ds.F_star], ds.w_star, ds.risk(W)]).tobytes()).hexdigest())
"""


def test_dataset_results_do_not_depend_on_blas_threads():
    """NumPy's `X @ W.T` and `X.T @ r` change in the last bit with the thread count; F*, w* and F must not."""
    digests = set()
    for threads in ("1", "2", "4"):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1
