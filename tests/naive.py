"""Naive NumPy twins of the Numba kernels: the obvious loops, written for reading."""

import numpy as np


def batch_loss(X, y, w, loss, l2):
    """f_S(w) + (l2/2)‖w‖² for the batch (X, y): the mean per-example loss."""
    if loss == "softmax":
        Z = X @ w.reshape(-1, X.shape[1]).T
        top = Z.max(axis=1)
        losses = top + np.log(np.exp(Z - top[:, None]).sum(axis=1)) - Z[np.arange(len(y)), y.astype(int)]
    elif loss == "squared":
        losses = 0.5 * (X @ w - y) ** 2
    else:
        losses = np.logaddexp(0.0, -y * (X @ w))
    return losses.mean() + 0.5 * l2 * (w @ w)


def batch_loss_grad(X, y, w, loss, l2):
    """∇f_S(w) + l2·w for the batch (X, y), with NumPy's own matrix products."""
    if loss == "softmax":  # w is the C×d weight matrix, flattened row-major; y the class index
        W = w.reshape(-1, X.shape[1])
        Z = X @ W.T
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        P[np.arange(len(y)), y.astype(int)] -= 1.0
        return (P.T @ X / len(y)).ravel() + l2 * w
    z = X @ w
    if loss == "squared":
        r = z - y
    else:
        r = -y / (1.0 + np.exp(y * z))
    return X.T @ r / len(y) + l2 * w


def echoed_run(X, Y, K, lr, method="gd", loss="squared", l2=0.0, momentum="nesterov", lam=0.0,
               rows=None, w0=None, betas=(0.9, 0.999), eps=1e-8, first_loss=False):
    """Run K[t] steps on every batch; return (last, avg, end_avg) iterates after each batch
    (and, with `first_loss`, the batch loss at the iterate before each batch's first step).

    method: "gd" (minibatch SGD / echoed GD / echoed SGD with `rows`), "nesterov", "prox",
    "heavy_ball" (torch's SGD momentum: v ← μv + g, w ← w − ηv), "adam" (torch's Adam).
    rows: a list with one index array per step (sub-batches), or None for full batches.
    """
    T, _, d = X.shape
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float)  # pass w0 for softmax (C·d)
    w_prev = w.copy()
    v, m = np.zeros_like(w), np.zeros_like(w)  # heavy ball's velocity; Adam's moments (m, v)
    iterates, ends = [], []
    out_last, out_avg, out_end, first = [], [], [], []
    k = 0
    for t in range(T):
        anchor = w.copy()
        first.append(batch_loss(X[t], Y[t], w, loss, l2))
        for _ in range(K[t]):
            idx = slice(None) if rows is None else rows[k]
            Xs, ys = X[t][idx], Y[t][idx]
            if method == "nesterov":
                mu = k / (k + 3.0) if momentum == "nesterov" else momentum
                ahead = w + mu * (w - w_prev)
                w_prev, w = w, ahead - lr[t] * batch_loss_grad(Xs, ys, ahead, loss, l2)
            elif method == "prox":
                w = w - lr[t] * (batch_loss_grad(Xs, ys, w, loss, l2) + lam * (w - anchor))
            elif method == "heavy_ball":
                v = momentum * v + batch_loss_grad(Xs, ys, w, loss, l2)
                w = w - lr[t] * v
            elif method == "adam":
                g = batch_loss_grad(Xs, ys, w, loss, l2)
                b1, b2 = betas
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g * g
                m_hat, v_hat = m / (1 - b1 ** (k + 1)), v / (1 - b2 ** (k + 1))
                w = w - lr[t] * m_hat / (np.sqrt(v_hat) + eps)
            else:
                w = w - lr[t] * batch_loss_grad(Xs, ys, w, loss, l2)
            iterates.append(w)
            k += 1
        ends.append(w)
        out_last.append(w)
        out_avg.append(np.mean(iterates, axis=0))
        out_end.append(np.mean(ends, axis=0))
    out = np.array(out_last), np.array(out_avg), np.array(out_end)
    return (*out, np.array(first)) if first_loss else out
