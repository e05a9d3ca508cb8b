"""The loss table: the only loss codes, and per loss what every layer asks of it.

Per example z = (x, y) with margin x·w (the multinomial loss: one margin W_c·x per class):

==============  ====================================  ===================  ==========
loss            ℓ(w; z)                               labels y             code
==============  ====================================  ===================  ==========
``squared``     ½(x·w − y)²                           real                 `SQUARED`
``logistic``    log(1 + exp(−y·x·w))                  −1, +1               `LOGISTIC`
``softmax``     log Σ_c exp(W_c·x) − W_y·x            0, …, C−1            `SOFTMAX`
``huber``       ½r² if |r| ≤ δ, else δ(|r| − ½δ);     real                 `HUBER`
                r = x·w − y, δ = `HUBER_DELTA` = 1
==============  ====================================  ===================  ==========

A row (`Loss`) gives the kernels' integer code, its labels, the per-example smoothness
factor c (ℓ is c‖x‖²-smooth in w, so a table's β is c·max‖x‖², and the planner's
learning-rate grid reads it), the Lipschitz constant ρ of the per-example loss on the
ball ‖w − w*‖ ≤ D, and the full-data loss, gradient and Hessian a `Dataset` needs for
F, F* and w*. The per-example formulas of the margin losses, `value`, `deriv` and
`curvature` (ℓ, ℓ', ℓ'' at margin z), are Numba code here, shared by the full-data
loops below and by the optimizer kernels' generic margin-loss path; an unknown code
gives NaN in them, never another loss.

`loss_code(name)` is the one way from a name to a code: an unknown name is a
ValueError there (and in `run`), before any work, never a loss computed as another one.

A new margin loss is, in full: its code constant, its row of `LOSSES` (labels: one of
"real targets", "−1 or +1"), and its branch in each of the three formulas `value`,
`deriv` and `curvature` with its code in `MARGIN_FORMULAS` beside them (compared with
the table at import: a margin row without its formulas is an error then); here, in
this file, and its twin ℓ and ℓ' in ``tests/naive.py``'s ``MARGIN_LOSSES``. The
kernels take it through their generic margin path; `Dataset`, the config schema, the
CLI, the planner's grid and the kernel tests read the row. A loss that is not a
function of one margin (as softmax) needs its own paths in `Loss`, in
`echosim.training.kernel` (``OWN_GRADIENT``), `echosim.training.gradients` (its
gradient and batch loss) and in the naive twin.

Full-data sums. NumPy's matrix products go through BLAS, whose sums are split
differently with the number of threads (``X @ W.T`` on breast_cancer and ``X.T @ r``
on flights change in the last bit between ``OPENBLAS_NUM_THREADS=1`` and ``2``), so F,
F* and w* computed with them would depend on the machine's threading. `mean_losses`,
`grad_hess` and `margins` add rows in one order: blocks of `ROW_BLOCK` rows, each
summed row by row, then the blocks in order; the result is the same bits on any number
of threads, in any process. The softmax loss uses NumPy's BLAS. Compiled on first use
(cached on disk), never at import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import njit

__all__ = ["Loss", "LOSSES", "SQUARED", "LOGISTIC", "SOFTMAX", "HUBER", "HUBER_DELTA", "loss_code", "get_loss"]

SQUARED = 0
LOGISTIC = 1
SOFTMAX = 2  # multinomial logistic: the weights are C×d, row-major
HUBER = 3

HUBER_DELTA = 1.0
"""δ of the Huber loss: quadratic for residuals |x·w − y| ≤ δ, linear beyond (fixed: a loss
is a name in configs, without parameters; scale the targets to move it)."""


def _squared_rho(norms, residuals, D):
    """max‖x‖(|x·w* − y| + ‖x‖D): ‖∇ℓ(w)‖ = |x·w − y|‖x‖ on the ball ‖w − w*‖ ≤ D."""
    return float((norms * (np.abs(residuals) + norms * D)).max())


def _huber_rho(norms, residuals, D):
    """max‖x‖·min(δ, |x·w* − y| + ‖x‖D): ‖∇ℓ(w)‖ = min(|x·w − y|, δ)‖x‖."""
    return float((norms * np.minimum(HUBER_DELTA, np.abs(residuals) + norms * D)).max())


@dataclass(frozen=True)
class Loss:
    """One row of the loss table (see the module docstring)."""

    name: str
    code: int
    labels: str
    curvature: float
    """c: the per-example loss is c‖x‖²-smooth (1 squared and Huber, 1/4 logistic, 1/2 softmax)."""
    rho: Callable
    """(row norms ‖x_i‖, residuals x_i·w* − y_i, D) → Lipschitz constant of ℓ on the ball ‖w − w*‖ ≤ D."""
    margin: bool = True
    """A function of one margin x·w (the kernels' margin paths and `value`, `deriv`, `curvature` take it)."""

    def constants(self, norms, residuals, D) -> tuple[float, float]:
        """(β, ρ) of the per-example loss over the rows (without an l2 term)."""
        return self.curvature * float((norms**2).max()), float(self.rho(norms, residuals, D))

    def mean_losses(self, X, y, W) -> np.ndarray:
        """(1/n) Σ_i ℓ(w; z_i) over the rows of (X, y) for every row w of W (m, dim)."""
        if self.margin:
            step = max(1, 2**15 // X.shape[1])  # keep the iterates' block in cache
            return np.concatenate([mean_losses(X, y, np.ascontiguousarray(W[i:i + step].T), self.code)
                                   for i in range(0, W.shape[0], step)])
        return _softmax_mean_losses(X, y, W)

    def grad_hess(self, X, y, w) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and Hessian of (1/n) Σ_i ℓ(w; z_i) over the rows of (X, y)."""
        if self.margin:
            return grad_hess(X, y, np.ascontiguousarray(w), self.code)
        return _softmax_grad_hess(X, y, w)


def _softmax_mean_losses(X, y, W):
    """The multinomial loss, each row of W holding C×d weights (NumPy's BLAS: see `Dataset`)."""
    C = W.shape[1] // X.shape[1]
    out = np.empty(W.shape[0])
    step = max(1, 2**24 // (X.shape[0] * C))  # bound the margin block to ~128 MB
    label = y.astype(np.intp)
    for i in range(0, W.shape[0], step):
        Z = np.einsum("nd,mcd->nmc", X, W[i:i + step].reshape(-1, C, X.shape[1]))
        losses = np.logaddexp.reduce(Z, axis=2) - Z[np.arange(len(label)), :, label]
        out[i:i + step] = losses.mean(axis=0)
    return out


def _softmax_grad_hess(X, y, w):
    """Gradient and Hessian of the mean multinomial loss: H_ab = (1/n) Σ_i (p_a δ_ab − p_a p_b) x_i x_iᵀ."""
    n, d = X.shape
    C = w.shape[0] // d
    Z = X @ w.reshape(C, d).T
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    R = P.copy()
    R[np.arange(n), y.astype(np.intp)] -= 1.0
    g = (R.T @ X).ravel() / n
    H = np.empty((C * d, C * d))
    for a in range(C):
        for b in range(a, C):
            weight = P[:, a] * ((a == b) - P[:, b])
            block = (X * weight[:, None]).T @ X / n
            H[a * d:(a + 1) * d, b * d:(b + 1) * d] = block
            H[b * d:(b + 1) * d, a * d:(a + 1) * d] = block.T
    return g, H


LOSSES: dict[str, Loss] = {
    loss.name: loss for loss in (
        Loss("squared", SQUARED, "real targets", 1.0, _squared_rho),
        Loss("logistic", LOGISTIC, "−1 or +1", 0.25, lambda norms, residuals, D: float(norms.max())),
        Loss("softmax", SOFTMAX, "class indices 0..C−1", 0.5,
             lambda norms, residuals, D: math.sqrt(2.0) * float(norms.max()),  # ‖p − e_y‖ ≤ √2
             margin=False),
        Loss("huber", HUBER, "real targets", 1.0, _huber_rho),
    )
}
"""The registry of losses: name → row. Nothing else lists losses or their codes."""


def get_loss(name) -> Loss:
    """The row of loss `name`; ValueError naming the allowed ones otherwise."""
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(map(repr, LOSSES))}; got {name!r}")
    return LOSSES[name]


def loss_code(name) -> int:
    """The kernels' integer code of loss `name` (ValueError for an unknown one)."""
    return get_loss(name).code


# --------------------------------------------------------------------------- margin losses in Numba

ROW_BLOCK = 1024


@njit(cache=True)
def _softplus(u):
    """log(1 + e^u) without overflow."""
    return max(u, 0.0) + np.log1p(np.exp(-abs(u)))


MARGIN_FORMULAS = (SQUARED, LOGISTIC, HUBER)
"""The loss codes with a branch in each of `value`, `deriv` and `curvature` below (written
beside them and changed with them; every margin row's code must be here)."""


def check_margin_formulas(losses: dict) -> None:
    """ValueError unless every margin loss of `losses` has its formulas (`MARGIN_FORMULAS`);
    run on `LOSSES` at import."""
    for name, row in losses.items():
        if row.margin and row.code not in MARGIN_FORMULAS:
            raise ValueError(f"loss {name!r}: code {row.code!r} has no branch in value, deriv and curvature "
                             "(echosim.training.losses.MARGIN_FORMULAS)")


check_margin_formulas(LOSSES)


@njit(cache=True)
def value(z, y, loss):
    """ℓ at margin z: ½(z − y)² (squared), log(1 + e^{−yz}) (logistic), Huber's of r = z − y."""
    if loss == LOGISTIC:
        return _softplus(-y * z)
    if loss == SQUARED:
        r = z - y
        return 0.5 * r * r
    if loss == HUBER:
        r = abs(z - y)
        return 0.5 * r * r if r <= HUBER_DELTA else HUBER_DELTA * (r - 0.5 * HUBER_DELTA)
    return np.nan


@njit(cache=True)
def deriv(z, y, loss):
    """ℓ'(z): z − y (squared), −y·σ(−yz) (logistic), z − y clipped to [−δ, δ] (Huber)."""
    if loss == SQUARED:
        return z - y
    if loss == LOGISTIC:
        return -y * (0.5 * (1.0 + np.tanh(-0.5 * y * z)))  # σ(−y z) without overflow
    if loss == HUBER:
        return min(max(z - y, -HUBER_DELTA), HUBER_DELTA)
    return np.nan


@njit(cache=True)
def curvature(z, y, loss):
    """ℓ''(z): 1 (squared), σ(−yz)(1 − σ(−yz)) (logistic), 1 if |z − y| ≤ δ else 0 (Huber)."""
    if loss == SQUARED:
        return 1.0
    if loss == LOGISTIC:
        s = 0.5 * (1.0 + np.tanh(-0.5 * y * z))
        return s * (1.0 - s)
    if loss == HUBER:
        return 1.0 if abs(z - y) <= HUBER_DELTA else 0.0
    return np.nan


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
        for j in range(m):
            block[j] += value(z[j], yi, loss)
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
        r, h = deriv(z, y[i], loss), curvature(z, y[i], loss)
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
