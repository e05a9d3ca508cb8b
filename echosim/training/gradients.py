"""The gradients and batch losses the chunk kernel calls: Numba functions, arrays in and out.

`echosim.training.kernel` runs a chunk of fresh batches and takes each step's gradient
here, in one of its two layouts:

- rows: `margin_grad_full` / `margin_grad_rows` (any margin loss, ℓ' from
  `echosim.training.losses.deriv`), `logistic_grad_full` / `logistic_grad_rows` (the
  logistic loss in blocks of `BLOCK` rows, so that its exp vectorises) and
  `softmax_grad`, each for one iterate over all of the batch's rows or a sub-batch;
- wide: `transpose_rows`, then `margins_many`, `dlogistic_many` or `dmargin_many`,
  and `grad_many`, for L iterates at once, matrix-matrix shaped.

`first_losses` (through `_batch_loss`) records each iterate's batch loss before its
first step on a batch. The `_make_*` factories build their two variants (all rows, the
sub-batch rows) once, when this module is imported; Numba compiles each function on
first use and keeps it in its on-disk cache.
"""

import numpy as np
from numba import njit

from echosim.training.fast_exp import sigmoid
from echosim.training.losses import SOFTMAX
from echosim.training.losses import deriv as _margin_deriv
from echosim.training.losses import value as _margin_value

# Reassociation lets LLVM vectorise the dot products; no 'nnan'/'ninf', because
# divergence is detected through non-finite iterates.
FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
BLOCK = 32  # rows per block of the logistic gradient, a multiple of 4: 32 rows of X stay in L1 for d ≲ 150


@njit(cache=True, fastmath=FASTMATH)
def dlogistic(z, y):
    """ℓ'(z) = −y·σ(−yz) of the binary logistic loss, without a branch or a library call,
    so that a loop of it over rows (or learning rates) vectorises."""
    return -y * sigmoid(-y * z)


@njit(cache=True, fastmath=FASTMATH)
def _add_row_grad(X, y, i, P, l, loss, scale, G):
    """G[l] += scale·ℓ'(x_i·w; y_i)·x_i for row i of (X, y) and the iterate w = P[l]."""
    z = P.dtype.type(0)  # in the data's precision: float32 data keeps float32 vector width
    for j in range(P.shape[1]):
        z += X[i, j] * P[l, j]
    r = P.dtype.type(_margin_deriv(z, y[i], loss) * scale)
    for j in range(P.shape[1]):
        G[l, j] += r * X[i, j]


def _make_margin_grad(full: bool):
    """`margin_grad_full` (all rows of the batch, ``rows`` unused) or `margin_grad_rows`
    (the sub-batch ``rows``): one source, two compiled functions, so that the full-batch
    body indexes rows directly (about 10% faster on the squared loss than through a
    run-time branch or an index array)."""
    FULL = full

    @njit(cache=True, fastmath=FASTMATH)
    def margin_grad(X, y, rows, P, l, loss, G):
        """G[l] += ∇ of the mean margin loss (ℓ' from `losses.deriv`) at P[l] over the batch's rows.

        The squared loss's step is bound by loads, not arithmetic, so rows are taken four
        at a time: one load of w serves four dot products, and g is read and written once
        per four rows; the last n mod 4 rows go one by one. The four-row body is written
        out here, with rows indexed in X, because a helper call or a row view per row
        costs reference counting (atomic updates) that outweighs the arithmetic; for the
        same reason the iterate and the gradient are rows l of 2-D arrays, not views.
        """
        n = X.shape[0] if FULL else rows.shape[0]
        d = P.shape[1]
        scale = 1.0 / n
        zero = P.dtype.type(0)  # accumulate in the data's precision (float32 stays float32)
        for j in range(d):
            G[l, j] = zero
        for k in range(0, n - n % 4, 4):
            if FULL:
                a, b, c, e = k, k + 1, k + 2, k + 3
            else:
                a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
            z0 = z1 = z2 = z3 = zero
            for j in range(d):
                z0 += X[a, j] * P[l, j]
                z1 += X[b, j] * P[l, j]
                z2 += X[c, j] * P[l, j]
                z3 += X[e, j] * P[l, j]
            r0 = P.dtype.type(_margin_deriv(z0, y[a], loss) * scale)
            r1 = P.dtype.type(_margin_deriv(z1, y[b], loss) * scale)
            r2 = P.dtype.type(_margin_deriv(z2, y[c], loss) * scale)
            r3 = P.dtype.type(_margin_deriv(z3, y[e], loss) * scale)
            for j in range(d):
                G[l, j] += r0 * X[a, j] + r1 * X[b, j] + r2 * X[c, j] + r3 * X[e, j]
        for k in range(n - n % 4, n):
            _add_row_grad(X, y, k if FULL else rows[k], P, l, loss, scale, G)

    return margin_grad


margin_grad_full = _make_margin_grad(True)
margin_grad_rows = _make_margin_grad(False)


def _make_logistic_grad(full: bool):
    """`logistic_grad_full` / `logistic_grad_rows`, as `_make_margin_grad`."""
    FULL = full

    @njit(cache=True, fastmath=FASTMATH)
    def logistic_grad(X, y, rows, P, l, G, r, labels):
        """G[l] = ∇ of the mean logistic loss at P[l] over the batch's rows (all, or `rows`).

        The exp in ℓ' costs more than a row's dot product, so rows go in blocks of
        `BLOCK`: the block's margins and labels into r and labels, then ℓ' over the
        block in one loop, which LLVM vectorises, then g += Σ r_i x_i while the block's
        rows are in L1. Margins and updates take rows four at a time, as in the margin
        loss's body.
        """
        n = X.shape[0] if FULL else rows.shape[0]
        d = P.shape[1]
        scale = 1.0 / n
        zero = P.dtype.type(0)  # accumulate in the data's precision (float32 stays float32)
        for j in range(d):
            G[l, j] = zero
        for start in range(0, n, BLOCK):
            stop = min(start + BLOCK, n)
            fours = stop - (stop - start) % 4
            for k in range(start, fours, 4):
                if FULL:
                    a, b, c, e = k, k + 1, k + 2, k + 3
                else:
                    a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
                z0 = z1 = z2 = z3 = zero
                for j in range(d):
                    z0 += X[a, j] * P[l, j]
                    z1 += X[b, j] * P[l, j]
                    z2 += X[c, j] * P[l, j]
                    z3 += X[e, j] * P[l, j]
                q = k - start
                r[q], r[q + 1], r[q + 2], r[q + 3] = z0, z1, z2, z3
                labels[q], labels[q + 1], labels[q + 2], labels[q + 3] = y[a], y[b], y[c], y[e]
            for k in range(fours, stop):
                i = k if FULL else rows[k]
                z = zero
                for j in range(d):
                    z += X[i, j] * P[l, j]
                r[k - start] = z
                labels[k - start] = y[i]
            for q in range(stop - start):  # contiguous r and labels: no gather, so it vectorises
                r[q] = P.dtype.type(dlogistic(r[q], labels[q]) * scale)
            for k in range(start, fours, 4):
                if FULL:
                    a, b, c, e = k, k + 1, k + 2, k + 3
                else:
                    a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
                q = k - start
                r0, r1, r2, r3 = r[q], r[q + 1], r[q + 2], r[q + 3]
                for j in range(d):
                    G[l, j] += r0 * X[a, j] + r1 * X[b, j] + r2 * X[c, j] + r3 * X[e, j]
            for k in range(fours, stop):
                i = k if FULL else rows[k]
                for j in range(d):
                    G[l, j] += r[k - start] * X[i, j]

    return logistic_grad


logistic_grad_full = _make_logistic_grad(True)
logistic_grad_rows = _make_logistic_grad(False)


@njit(cache=True, fastmath=FASTMATH)
def softmax_grad(X, y, rows, P, l, G, logits):
    """G[l] = ∇ of the mean multinomial loss at w = P[l], the C×d weights row-major; y the class.

    Per example, with p = softmax(W x): the gradient is (p − e_y) ⊗ x.
    """
    full = rows.shape[0] == 0
    n = X.shape[0] if full else rows.shape[0]
    d = X.shape[1]
    C = logits.shape[0]
    w, g = P[l], G[l]
    g[:] = 0.0
    for k in range(n):
        i = k if full else rows[k]
        top = -np.inf
        for c in range(C):
            z = 0.0
            for j in range(d):
                z += X[i, j] * w[c * d + j]
            logits[c] = z
            top = max(top, z)
        total = 0.0
        for c in range(C):
            logits[c] = np.exp(logits[c] - top)
            total += logits[c]
        label = int(y[i])
        for c in range(C):
            r = logits[c] / total - (1.0 if c == label else 0.0)
            r /= n
            for j in range(d):
                g[c * d + j] += r * X[i, j]


@njit(cache=True)
def _batch_loss(X, y, w, loss, l2, logits):
    """f_S(w) = (1/B) Σ_i ℓ(w; z_i) over every row of the batch, plus (l2/2)‖w‖² (float64)."""
    n, d = X.shape
    total = 0.0
    for i in range(n):
        if loss == SOFTMAX:
            C = logits.shape[0]
            top = -np.inf
            for c in range(C):
                z = 0.0
                for j in range(d):
                    z += X[i, j] * w[c * d + j]
                logits[c] = z
                top = max(top, z)
            s = 0.0
            for c in range(C):
                s += np.exp(logits[c] - top)
            total += top + np.log(s) - logits[int(y[i])]
        else:
            z = 0.0
            for j in range(d):
                z += X[i, j] * w[j]
            total += _margin_value(z, y[i], loss)
    sq = 0.0
    for j in range(w.shape[0]):
        sq += w[j] * w[j]
    return total / n + 0.5 * l2 * sq


@njit(cache=True)
def transpose_rows(X, y, rows, Xt, yt):
    """Xt[:, q], yt[q] ← X[i_q], y[i_q] for the batch's rows i_q: all of X, or `rows` if non-empty."""
    full = rows.shape[0] == 0
    for q in range(Xt.shape[1]):
        yt[q] = y[q if full else rows[q]]
    for j in range(X.shape[1]):  # contiguous writes, strided reads: faster than the other way round
        for q in range(Xt.shape[1]):
            Xt[j, q] = X[q if full else rows[q], j]


@njit(cache=True, fastmath=FASTMATH)
def margins_many(Xt, W, Rt):
    """Rt[l, q] ← x_q·w_l for every iterate (row l of W (L, d)) and row q of the batch
    transposed, Xt (d, n): four iterates by four features at a time (one load and store
    of a margin serves four multiply-adds). Rt has L rounded up to a multiple of four
    rows; the extra ones repeat the last iterate's margins, so every iterate goes
    through the same code and its result does not depend on L or on its neighbours."""
    L, d = W.shape
    n = Xt.shape[1]
    d4 = d - d % 4
    for l0 in range(0, Rt.shape[0], 4):
        l1, l2, l3 = min(l0 + 1, L - 1), min(l0 + 2, L - 1), min(l0 + 3, L - 1)
        Rt[l0:l0 + 4, :n] = 0.0
        for j in range(0, d4, 4):
            w00, w01, w02, w03 = W[l0, j], W[l1, j], W[l2, j], W[l3, j]
            w10, w11, w12, w13 = W[l0, j + 1], W[l1, j + 1], W[l2, j + 1], W[l3, j + 1]
            w20, w21, w22, w23 = W[l0, j + 2], W[l1, j + 2], W[l2, j + 2], W[l3, j + 2]
            w30, w31, w32, w33 = W[l0, j + 3], W[l1, j + 3], W[l2, j + 3], W[l3, j + 3]
            for q in range(n):
                x0, x1, x2, x3 = Xt[j, q], Xt[j + 1, q], Xt[j + 2, q], Xt[j + 3, q]
                Rt[l0, q] = Rt[l0, q] + x0 * w00 + x1 * w10 + x2 * w20 + x3 * w30
                Rt[l0 + 1, q] = Rt[l0 + 1, q] + x0 * w01 + x1 * w11 + x2 * w21 + x3 * w31
                Rt[l0 + 2, q] = Rt[l0 + 2, q] + x0 * w02 + x1 * w12 + x2 * w22 + x3 * w32
                Rt[l0 + 3, q] = Rt[l0 + 3, q] + x0 * w03 + x1 * w13 + x2 * w23 + x3 * w33
        for j in range(d4, d):
            w0, w1, w2, w3 = W[l0, j], W[l1, j], W[l2, j], W[l3, j]
            for q in range(n):
                x = Xt[j, q]
                Rt[l0, q] += x * w0
                Rt[l0 + 1, q] += x * w1
                Rt[l0 + 2, q] += x * w2
                Rt[l0 + 3, q] += x * w3


@njit(cache=True, fastmath=FASTMATH)
def dlogistic_many(Rt, yt, L, scale):
    """Rt[l, q] ← ℓ'(Rt[l, q]; y_q)/n for the L iterates (logistic: a loop that vectorises)."""
    for l in range(L):
        for q in range(yt.shape[0]):
            Rt[l, q] = Rt.dtype.type(dlogistic(Rt[l, q], yt[q]) * scale)


@njit(cache=True, fastmath=FASTMATH)
def dmargin_many(Rt, yt, L, scale, loss):
    """Rt[l, q] ← ℓ'(Rt[l, q]; y_q)/n for the L iterates (any margin loss, `losses.deriv`)."""
    for l in range(L):
        for q in range(yt.shape[0]):
            Rt[l, q] = Rt.dtype.type(_margin_deriv(Rt[l, q], yt[q], loss) * scale)


@njit(cache=True, fastmath=FASTMATH)
def grad_many(Xt, Rt, L, G):
    """G[l] ← Σ_q Rt[l, q]·x_q for the L iterates: dot products over the rows, two
    iterates by four features at a time (G has Rt's rows; the extra one is scratch)."""
    d, n = Xt.shape
    zero = G.dtype.type(0)
    d4 = d - d % 4
    for l in range(0, L, 2):
        for j in range(0, d4, 4):
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = zero
            for q in range(n):
                r0, r1 = Rt[l, q], Rt[l + 1, q]
                x0, x1, x2, x3 = Xt[j, q], Xt[j + 1, q], Xt[j + 2, q], Xt[j + 3, q]
                s00 += r0 * x0
                s01 += r0 * x1
                s02 += r0 * x2
                s03 += r0 * x3
                s10 += r1 * x0
                s11 += r1 * x1
                s12 += r1 * x2
                s13 += r1 * x3
            G[l, j], G[l, j + 1], G[l, j + 2], G[l, j + 3] = s00, s01, s02, s03
            G[l + 1, j], G[l + 1, j + 1], G[l + 1, j + 2], G[l + 1, j + 3] = s10, s11, s12, s13
        for j in range(d4, d):
            s0 = s1 = zero
            for q in range(n):
                s0 += Rt[l, q] * Xt[j, q]
                s1 += Rt[l + 1, q] * Xt[j, q]
            G[l, j], G[l + 1, j] = s0, s1


@njit(cache=True)
def first_losses(Xt, Yt, W, loss, l2, logits, first_loss, t):
    """first_loss[t, l] ← f_S(W[l]) + (l2/2)‖W[l]‖², before the first step on batch t."""
    for l in range(W.shape[0]):
        first_loss[t, l] = _batch_loss(Xt, Yt, W[l], loss, l2, logits)
