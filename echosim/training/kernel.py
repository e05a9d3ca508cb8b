"""Numba kernels of the echoed optimizers: arrays in, arrays out.

One kernel, `echo_chunk`, runs a chunk of fresh batches. Everything random (the
batches, the sub-batch rows) is drawn beforehand in NumPy and passed in; the
optimizer state lives in caller-owned arrays so that a long run is a sequence of
chunk calls. The Python facade is `echosim.training.runner.run`; the naive twin is
`tests/naive.py`.
"""

import numpy as np
from numba import njit

from echosim.training.codes import LOSS_LOGISTIC, LOSS_SOFTMAX, LOSS_SQUARED, METHOD_NESTEROV, METHOD_PROX
from echosim.training.fast_exp import sigmoid

# Reassociation lets LLVM vectorise the dot products; no 'nnan'/'ninf', because
# divergence is detected through non-finite iterates.
_FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
_BLOCK = 32  # rows per block of `_logistic_grad`, a multiple of 4: 32 rows of X stay in L1 for d ≲ 150


@njit(cache=True, fastmath=_FASTMATH)
def _dloss(z, y, loss):
    """d/dz of the per-example loss at margin z: ½(z − y)² or log(1 + e^{−yz}) (binary).

    The logistic derivative is −y·σ(−yz), without a branch or a library call, so
    that a loop of it over rows (or learning rates) vectorises.
    """
    if loss == LOSS_SQUARED:
        return z - y
    return -y * sigmoid(-y * z)


@njit(cache=True, fastmath=_FASTMATH)
def _add_row_grad(X, y, i, w, loss, scale, g):
    """g += scale·ℓ'(x_i·w; y_i)·x_i for row i of (X, y)."""
    z = w.dtype.type(0)  # in the data's precision: float32 data keeps float32 vector width
    for j in range(w.shape[0]):
        z += X[i, j] * w[j]
    r = w.dtype.type(_dloss(z, y[i], loss) * scale)
    for j in range(w.shape[0]):
        g[j] += r * X[i, j]


@njit(cache=True, fastmath=_FASTMATH)
def _softmax_grad(X, y, rows, w, g, logits):
    """g += ∇ of the mean multinomial loss; w holds the C×d weights row-major, y the class.

    Per example, with p = softmax(W x): the gradient is (p − e_y) ⊗ x.
    """
    full = rows.shape[0] == 0
    n = X.shape[0] if full else rows.shape[0]
    d = X.shape[1]
    C = logits.shape[0]
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


@njit(cache=True, fastmath=_FASTMATH)
def _logistic_grad(X, y, rows, w, g, r, labels):
    """g += ∇ of the mean logistic loss, over all rows of (X, y) or over `rows` if non-empty.

    The exp in ℓ' costs more than a row's dot product, so rows go in blocks of
    `_BLOCK`: the block's margins and labels into r and labels, then ℓ' over the
    block in one loop, which LLVM vectorises, then g += Σ r_i x_i while the block's
    rows are in L1. Margins and updates take rows four at a time, as in `_batch_grad`.
    """
    full = rows.shape[0] == 0
    n = X.shape[0] if full else rows.shape[0]
    scale = 1.0 / n
    zero = w.dtype.type(0)  # accumulate in the data's precision (float32 stays float32)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        fours = stop - (stop - start) % 4
        for k in range(start, fours, 4):
            if full:
                a, b, c, e = k, k + 1, k + 2, k + 3
            else:
                a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
            z0 = z1 = z2 = z3 = zero
            for j in range(w.shape[0]):
                z0 += X[a, j] * w[j]
                z1 += X[b, j] * w[j]
                z2 += X[c, j] * w[j]
                z3 += X[e, j] * w[j]
            q = k - start
            r[q], r[q + 1], r[q + 2], r[q + 3] = z0, z1, z2, z3
            labels[q], labels[q + 1], labels[q + 2], labels[q + 3] = y[a], y[b], y[c], y[e]
        for k in range(fours, stop):
            i = k if full else rows[k]
            z = zero
            for j in range(w.shape[0]):
                z += X[i, j] * w[j]
            r[k - start] = z
            labels[k - start] = y[i]
        for q in range(stop - start):  # contiguous r and labels: no gather, so it vectorises
            r[q] = w.dtype.type(_dloss(r[q], labels[q], LOSS_LOGISTIC) * scale)
        for k in range(start, fours, 4):
            if full:
                a, b, c, e = k, k + 1, k + 2, k + 3
            else:
                a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
            q = k - start
            r0, r1, r2, r3 = r[q], r[q + 1], r[q + 2], r[q + 3]
            for j in range(w.shape[0]):
                g[j] += r0 * X[a, j] + r1 * X[b, j] + r2 * X[c, j] + r3 * X[e, j]
        for k in range(fours, stop):
            i = k if full else rows[k]
            for j in range(w.shape[0]):
                g[j] += r[k - start] * X[i, j]


@njit(cache=True, fastmath=_FASTMATH)
def _batch_grad(X, y, rows, w, loss, l2, g, logits, r, labels):
    """g ← ∇f_S(w) + l2·w, over all rows of (X, y), or over `rows` if non-empty.

    The squared loss's step is bound by loads, not arithmetic, so rows are taken
    four at a time: one load of w serves four dot products, and g is read and
    written once per four rows; the last n mod 4 rows go one by one. The four-row
    body is written out here, with rows indexed in X, because a helper call or a row
    view per row costs reference counting (atomic updates) that outweighs the
    arithmetic. The logistic loss goes to `_logistic_grad` (r and labels: its
    scratch, `_BLOCK` long), the softmax loss to `_softmax_grad`.
    """
    g[:] = 0.0
    if loss == LOSS_SOFTMAX:
        _softmax_grad(X, y, rows, w, g, logits)
        for j in range(w.shape[0]):
            g[j] += l2 * w[j]
        return
    if loss == LOSS_LOGISTIC:
        _logistic_grad(X, y, rows, w, g, r, labels)
        if l2 != 0.0:
            for j in range(w.shape[0]):
                g[j] += l2 * w[j]
        return
    full = rows.shape[0] == 0
    n = X.shape[0] if full else rows.shape[0]
    scale = 1.0 / n
    zero = w.dtype.type(0)  # accumulate in the data's precision (float32 stays float32)
    for k in range(0, n - n % 4, 4):
        if full:
            a, b, c, e = k, k + 1, k + 2, k + 3
        else:
            a, b, c, e = rows[k], rows[k + 1], rows[k + 2], rows[k + 3]
        z0 = z1 = z2 = z3 = zero
        for j in range(w.shape[0]):
            z0 += X[a, j] * w[j]
            z1 += X[b, j] * w[j]
            z2 += X[c, j] * w[j]
            z3 += X[e, j] * w[j]
        r0 = w.dtype.type(_dloss(z0, y[a], loss) * scale)
        r1 = w.dtype.type(_dloss(z1, y[b], loss) * scale)
        r2 = w.dtype.type(_dloss(z2, y[c], loss) * scale)
        r3 = w.dtype.type(_dloss(z3, y[e], loss) * scale)
        for j in range(w.shape[0]):
            g[j] += r0 * X[a, j] + r1 * X[b, j] + r2 * X[c, j] + r3 * X[e, j]
    for k in range(n - n % 4, n):
        _add_row_grad(X, y, k if full else rows[k], w, loss, scale, g)
    if l2 != 0.0:
        for j in range(w.shape[0]):
            g[j] += l2 * w[j]


@njit(cache=True, fastmath=_FASTMATH)
def _all_finite(w):
    for j in range(w.shape[0]):
        if not np.isfinite(w[j]):
            return False
    return True


@njit(cache=True, fastmath=_FASTMATH)
def echo_chunk(
    X, Y, K, lr, rows, method, loss, l2, momentum, lam,
    w, w_prev, avg_sum, end_sum, counters,
    log_at, log_steps, log_w, log_avg, log_end,
):
    """Run fresh batches X[t], Y[t] for K[t] steps each; return -1 or the diverged batch.

    X (n, B, d), Y (n, B): the chunk's batches. K (n,): steps per batch. lr (n,):
    learning rate per batch. rows (steps, b): sub-batch rows per step, or shape
    (0, 0) for full-batch steps. momentum < 0 selects Nesterov's convex schedule
    μ_k = k/(k+3), else μ_k = momentum. lam: proximal weight λ.

    State, updated in place: w (last iterate x_k), w_prev (x_{k−1}, Nesterov),
    avg_sum / end_sum (float64 sums of every step's and every batch end's
    iterate), counters = [steps so far, batches so far].
    Logging: after local batch log_at[j] (after local step log_at[j] if
    `log_steps`), row j of log_w / log_avg / log_end receives the last iterate and
    the two averages (the batch-end average over the batches finished so far).
    """
    d = w.shape[0]
    g = np.empty_like(w)
    ahead = np.empty_like(w)
    anchor = np.empty_like(w)
    logits = np.empty(w.shape[0] // X.shape[2], dtype=np.float64)  # softmax: C classes
    r_block = np.empty(_BLOCK, dtype=w.dtype)  # logistic: a block's margins, then ℓ'
    labels = np.empty(_BLOCK, dtype=Y.dtype)
    no_rows = np.empty(0, dtype=np.int64)
    step_in_chunk = 0
    next_log = 0
    for t in range(X.shape[0]):
        eta = lr[t]
        Xt = X[t]
        Yt = Y[t]
        if method == METHOD_PROX:
            for j in range(d):  # not anchor[:] = w: an array-to-array slice copy compiles seconds of error text
                anchor[j] = w[j]
        for k_t in range(K[t]):
            r = rows[step_in_chunk] if rows.shape[0] > 0 else no_rows
            if method == METHOD_NESTEROV:
                k = counters[0]
                mu = k / (k + 3.0) if momentum < 0.0 else momentum
                for j in range(d):
                    ahead[j] = w[j] + mu * (w[j] - w_prev[j])
                _batch_grad(Xt, Yt, r, ahead, loss, l2, g, logits, r_block, labels)
                for j in range(d):
                    w_prev[j] = w[j]
                    w[j] = ahead[j] - eta * g[j]
            else:
                _batch_grad(Xt, Yt, r, w, loss, l2, g, logits, r_block, labels)
                if method == METHOD_PROX:
                    for j in range(d):
                        g[j] += lam * (w[j] - anchor[j])
                for j in range(d):
                    w[j] -= eta * g[j]
            for j in range(d):
                avg_sum[j] += w[j]
            counters[0] += 1
            if log_steps and k_t < K[t] - 1:  # a batch's last step is logged once the batch ends
                while next_log < log_at.shape[0] and log_at[next_log] == step_in_chunk:
                    _log(w, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
                    next_log += 1
            step_in_chunk += 1
        for j in range(d):
            end_sum[j] += w[j]
        counters[1] += 1
        if not _all_finite(w):
            return t
        at = step_in_chunk - 1 if log_steps else t
        while next_log < log_at.shape[0] and log_at[next_log] == at:
            _log(w, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
            next_log += 1
    return -1


@njit(cache=True)
def _log(w, avg_sum, end_sum, counters, log_w, log_avg, log_end, row):
    """Row `row` of the logs: the last iterate, the step average, the batch-end average
    (the last iterate while no batch has ended yet)."""
    for j in range(w.shape[0]):
        log_w[row, j] = w[j]
        log_avg[row, j] = avg_sum[j] / counters[0]
        log_end[row, j] = end_sum[j] / counters[1] if counters[1] > 0 else w[j]


@njit(cache=True)
def _transpose_rows(X, y, rows, Xt, yt):
    """Xt[:, q], yt[q] ← X[i_q], y[i_q] for the batch's rows i_q: all of X, or `rows` if non-empty."""
    full = rows.shape[0] == 0
    for q in range(Xt.shape[1]):
        yt[q] = y[q if full else rows[q]]
    for j in range(X.shape[1]):  # contiguous writes, strided reads: faster than the other way round
        for q in range(Xt.shape[1]):
            Xt[j, q] = X[q if full else rows[q], j]


@njit(cache=True, fastmath=_FASTMATH)
def _batch_grad_many(Xt, yt, W, loss, l2, G, Rt, Gt):
    """G[:, l] ← ∇f_S(W[:, l]) + l2·W[:, l] for every column l of W (d, L): squared or binary loss.

    The batch comes transposed, Xt (d, n) and yt (n,) (`_transpose_rows`), so that
    the loops over its rows are innermost, long and vectorised. Margins, then ℓ',
    go into Rt (Lp, n) four columns by four features at a time (one load and store
    of a margin serves four multiply-adds); the gradient is a dot product over rows
    into Gt (Lp, d), two columns by four features at a time. Lp is L rounded up to a
    multiple of four; the extra columns repeat the last one's margins, so every
    column goes through the same code and its result does not depend on L or on its
    neighbours.
    """
    d, L = W.shape
    n = Xt.shape[1]
    scale = 1.0 / n
    zero = W.dtype.type(0)
    d4 = d - d % 4
    for l0 in range(0, Rt.shape[0], 4):
        l1, l2_, l3 = min(l0 + 1, L - 1), min(l0 + 2, L - 1), min(l0 + 3, L - 1)
        Rt[l0:l0 + 4, :n] = 0.0
        for j in range(0, d4, 4):
            w00, w01, w02, w03 = W[j, l0], W[j, l1], W[j, l2_], W[j, l3]
            w10, w11, w12, w13 = W[j + 1, l0], W[j + 1, l1], W[j + 1, l2_], W[j + 1, l3]
            w20, w21, w22, w23 = W[j + 2, l0], W[j + 2, l1], W[j + 2, l2_], W[j + 2, l3]
            w30, w31, w32, w33 = W[j + 3, l0], W[j + 3, l1], W[j + 3, l2_], W[j + 3, l3]
            for q in range(n):
                x0, x1, x2, x3 = Xt[j, q], Xt[j + 1, q], Xt[j + 2, q], Xt[j + 3, q]
                Rt[l0, q] = Rt[l0, q] + x0 * w00 + x1 * w10 + x2 * w20 + x3 * w30
                Rt[l0 + 1, q] = Rt[l0 + 1, q] + x0 * w01 + x1 * w11 + x2 * w21 + x3 * w31
                Rt[l0 + 2, q] = Rt[l0 + 2, q] + x0 * w02 + x1 * w12 + x2 * w22 + x3 * w32
                Rt[l0 + 3, q] = Rt[l0 + 3, q] + x0 * w03 + x1 * w13 + x2 * w23 + x3 * w33
        for j in range(d4, d):
            w0, w1, w2, w3 = W[j, l0], W[j, l1], W[j, l2_], W[j, l3]
            for q in range(n):
                x = Xt[j, q]
                Rt[l0, q] += x * w0
                Rt[l0 + 1, q] += x * w1
                Rt[l0 + 2, q] += x * w2
                Rt[l0 + 3, q] += x * w3
        for l in range(l0, min(l0 + 4, L)):  # the extra columns are not used past their margins
            if loss == LOSS_SQUARED:  # a loop per loss, with ℓ' fixed in each, so that both vectorise
                for q in range(n):
                    Rt[l, q] = W.dtype.type(_dloss(Rt[l, q], yt[q], LOSS_SQUARED) * scale)
            else:
                for q in range(n):
                    Rt[l, q] = W.dtype.type(_dloss(Rt[l, q], yt[q], LOSS_LOGISTIC) * scale)
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
            Gt[l, j], Gt[l, j + 1], Gt[l, j + 2], Gt[l, j + 3] = s00, s01, s02, s03
            Gt[l + 1, j], Gt[l + 1, j + 1], Gt[l + 1, j + 2], Gt[l + 1, j + 3] = s10, s11, s12, s13
        for j in range(d4, d):
            s0 = s1 = zero
            for q in range(n):
                s0 += Rt[l, q] * Xt[j, q]
                s1 += Rt[l + 1, q] * Xt[j, q]
            Gt[l, j], Gt[l + 1, j] = s0, s1
    for j in range(d):
        for l in range(L):
            G[j, l] = Gt[l, j]
    if l2 != 0.0:
        for j in range(d):
            for l in range(L):
                G[j, l] += l2 * W[j, l]


@njit(cache=True, fastmath=_FASTMATH)
def echo_chunk_many(
    X, Y, K, lr, rows, method, loss, l2, momentum, lam,
    W, W_prev, avg_sum, end_sum, counters, diverged,
    log_at, log_steps, log_w, log_avg, log_end,
):
    """`echo_chunk` for L iterates at once on the same batches: one column per learning rate.

    lr (n, L): learning rate per batch and iterate. W, W_prev, avg_sum, end_sum (d, L):
    the L optimizer states (columns); counters = [steps, batches] (shared: every
    iterate takes the same steps). Logs (n_logs, d, L). diverged (L,): −1, or the
    local batch at which that iterate first became non-finite (it is then carried
    along, unused). Returns the number of iterates still finite. Squared and
    binary logistic losses only.
    """
    d, L = W.shape
    G = np.empty_like(W)
    ahead = np.empty_like(W)
    anchor = np.empty_like(W)
    n = rows.shape[1] if rows.shape[0] > 0 else X.shape[1]
    Lp = L + (-L) % 4
    X_T = np.empty((d, n), dtype=W.dtype)  # the step's rows, transposed (`_transpose_rows`)
    y_T = np.empty(n, dtype=Y.dtype)
    Rt = np.empty((Lp, n), dtype=W.dtype)
    Gt = np.empty((Lp, d), dtype=W.dtype)
    no_rows = np.empty(0, dtype=np.int64)
    step_in_chunk = 0
    next_log = 0
    alive = L
    for t in range(X.shape[0]):
        if rows.shape[0] == 0:  # full-batch steps: one copy per batch
            _transpose_rows(X[t], Y[t], no_rows, X_T, y_T)
        if method == METHOD_PROX:
            for j in range(d):  # a loop, as in `echo_chunk`
                for l in range(L):
                    anchor[j, l] = W[j, l]
        for k_t in range(K[t]):
            if rows.shape[0] > 0:
                _transpose_rows(X[t], Y[t], rows[step_in_chunk], X_T, y_T)
            if method == METHOD_NESTEROV:
                k = counters[0]
                mu = k / (k + 3.0) if momentum < 0.0 else momentum
                for j in range(d):
                    for l in range(L):
                        ahead[j, l] = W[j, l] + mu * (W[j, l] - W_prev[j, l])
                _batch_grad_many(X_T, y_T, ahead, loss, l2, G, Rt, Gt)
                for j in range(d):
                    for l in range(L):
                        W_prev[j, l] = W[j, l]
                        W[j, l] = ahead[j, l] - lr[t, l] * G[j, l]
            else:
                _batch_grad_many(X_T, y_T, W, loss, l2, G, Rt, Gt)
                if method == METHOD_PROX:
                    for j in range(d):
                        for l in range(L):
                            G[j, l] += lam * (W[j, l] - anchor[j, l])
                for j in range(d):
                    for l in range(L):
                        W[j, l] -= lr[t, l] * G[j, l]
            for j in range(d):
                for l in range(L):
                    avg_sum[j, l] += W[j, l]
            counters[0] += 1
            if log_steps and k_t < K[t] - 1:
                while next_log < log_at.shape[0] and log_at[next_log] == step_in_chunk:
                    _log_many(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
                    next_log += 1
            step_in_chunk += 1
        for j in range(d):
            for l in range(L):
                end_sum[j, l] += W[j, l]
        counters[1] += 1
        for l in range(L):
            if diverged[l] < 0:
                for j in range(d):
                    if not np.isfinite(W[j, l]):
                        diverged[l] = t
                        alive -= 1
                        break
        if alive == 0:
            return 0
        at = step_in_chunk - 1 if log_steps else t
        while next_log < log_at.shape[0] and log_at[next_log] == at:
            _log_many(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
            next_log += 1
    return alive


@njit(cache=True)
def _log_many(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, row):
    """`_log` for the L columns of the state."""
    d, L = W.shape
    for j in range(d):
        for l in range(L):
            log_w[row, j, l] = W[j, l]
            log_avg[row, j, l] = avg_sum[j, l] / counters[0]
            log_end[row, j, l] = end_sum[j, l] / counters[1] if counters[1] > 0 else W[j, l]
