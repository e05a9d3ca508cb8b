"""The full-data loss of a `Dataset` and its derivatives, in a fixed order of arithmetic.

NumPy's matrix products go through BLAS, whose sums are split differently with the
number of threads (``X @ W.T`` on breast_cancer and ``X.T @ r`` on flights change in
the last bit between ``OPENBLAS_NUM_THREADS=1`` and ``2``), so F, F* and w* computed
with them would depend on the machine's threading. These loops add rows in one order:
blocks of `ROW_BLOCK` rows, each summed row by row, then the blocks in order; the
result is the same bits on any number of threads, in any process. Compiled on first
use (cached on disk), never at import.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ROW_BLOCK = 1024
LOGISTIC, SQUARED = 0, 1
LOSS_CODES = {"logistic": LOGISTIC, "squared": SQUARED}


@njit(cache=True)
def _softplus(u):
    """log(1 + e^u) without overflow."""
    return max(u, 0.0) + np.log1p(np.exp(-abs(u)))


@njit(cache=True)
def mean_losses(X, y, Wt, loss):
    """(1/n) Σ_i ℓ(x_i·w, y_i) for every column w of Wt (d, m)."""
    n, d = X.shape
    m = Wt.shape[1]
    total, block, z = np.zeros(m), np.zeros(m), np.empty(m)
    for i in range(n):
        z[:] = 0.0
        for k in range(d):
            xik = X[i, k]
            for j in range(m):
                z[j] += xik * Wt[k, j]
        yi = y[i]
        if loss == LOGISTIC:
            for j in range(m):
                block[j] += _softplus(-yi * z[j])
        else:
            for j in range(m):
                r = z[j] - yi
                block[j] += 0.5 * r * r
        if (i + 1) % ROW_BLOCK == 0 or i == n - 1:
            for j in range(m):
                total[j] += block[j]
                block[j] = 0.0
    return total / n


@njit(cache=True)
def grad_hess(X, y, w, loss):
    """Gradient (d,) and Hessian (d, d) of (1/n) Σ_i ℓ(x_i·w, y_i)."""
    n, d = X.shape
    g, H = np.zeros(d), np.zeros((d, d))
    gb, Hb = np.zeros(d), np.zeros((d, d))
    for i in range(n):
        z = 0.0
        for k in range(d):
            z += X[i, k] * w[k]
        if loss == LOGISTIC:
            s = 0.5 * (1.0 + np.tanh(-0.5 * y[i] * z))  # σ(−y z) without overflow
            r, h = -y[i] * s, s * (1.0 - s)
        else:
            r, h = z - y[i], 1.0
        for a in range(d):
            xa = X[i, a]
            gb[a] += r * xa
            hx = h * xa
            for b in range(a + 1):
                Hb[a, b] += hx * X[i, b]
        if (i + 1) % ROW_BLOCK == 0 or i == n - 1:
            g += gb
            H += Hb
            gb[:] = 0.0
            Hb[:] = 0.0
    for a in range(d):
        for b in range(a):
            H[b, a] = H[a, b]
    return g / n, H / n


@njit(cache=True)
def margins(X, w):
    """x_i·w for every row, each a sum over the features in order."""
    n, d = X.shape
    z = np.zeros(n)
    for i in range(n):
        for k in range(d):
            z[i] += X[i, k] * w[k]
    return z
