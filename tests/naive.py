"""Naive NumPy twins of the Numba kernels: the obvious loops, written for reading."""

import numpy as np


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
               rows=None, w0=None):
    """Run K[t] steps on every batch; return (last, avg, end_avg) iterates after each batch.

    method: "gd" (minibatch SGD / echoed GD / echoed SGD with `rows`), "nesterov", "prox".
    rows: a list with one index array per step (sub-batches), or None for full batches.
    """
    T, _, d = X.shape
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float)  # pass w0 for softmax (C·d)
    w_prev = w.copy()
    iterates, ends = [], []
    out_last, out_avg, out_end = [], [], []
    k = 0
    for t in range(T):
        anchor = w.copy()
        for _ in range(K[t]):
            idx = slice(None) if rows is None else rows[k]
            Xs, ys = X[t][idx], Y[t][idx]
            if method == "nesterov":
                mu = k / (k + 3.0) if momentum == "nesterov" else momentum
                ahead = w + mu * (w - w_prev)
                w_prev, w = w, ahead - lr[t] * batch_loss_grad(Xs, ys, ahead, loss, l2)
            elif method == "prox":
                w = w - lr[t] * (batch_loss_grad(Xs, ys, w, loss, l2) + lam * (w - anchor))
            else:
                w = w - lr[t] * batch_loss_grad(Xs, ys, w, loss, l2)
            iterates.append(w)
            k += 1
        ends.append(w)
        out_last.append(w)
        out_avg.append(np.mean(iterates, axis=0))
        out_end.append(np.mean(ends, axis=0))
    return np.array(out_last), np.array(out_avg), np.array(out_end)
