"""Naive NumPy twins of the Numba kernels: the obvious loops, written for reading.

A loss's twin is its ℓ and ℓ' in `MARGIN_LOSSES` (the softmax loss is written out
below); a method's twin is its step in `STEPS`, under its row name of
`echosim.training.methods.METHODS`. An unknown loss or method is an error here, never
another one's formula.
"""

import numpy as np

from echosim.training.losses import HUBER_DELTA

MARGIN_LOSSES = {
    "squared": (lambda z, y: 0.5 * (z - y) ** 2, lambda z, y: z - y),
    "logistic": (lambda z, y: np.logaddexp(0.0, -y * z), lambda z, y: -y / (1.0 + np.exp(y * z))),
    "huber": (lambda z, y: np.where(np.abs(z - y) <= HUBER_DELTA, 0.5 * (z - y) ** 2,
                                    HUBER_DELTA * (np.abs(z - y) - 0.5 * HUBER_DELTA)),
              lambda z, y: np.clip(z - y, -HUBER_DELTA, HUBER_DELTA)),
}
"""Margin loss name → (ℓ(z; y), ℓ'(z; y)) at the margins z = X @ w."""


def _margin_loss(loss):
    if loss not in MARGIN_LOSSES:
        raise ValueError(f"no naive twin for loss {loss!r} (tests/naive.py: MARGIN_LOSSES)")
    return MARGIN_LOSSES[loss]


def batch_loss(X, y, w, loss, l2):
    """f_S(w) + (l2/2)‖w‖² for the batch (X, y): the mean per-example loss."""
    if loss == "softmax":
        Z = X @ w.reshape(-1, X.shape[1]).T
        top = Z.max(axis=1)
        losses = top + np.log(np.exp(Z - top[:, None]).sum(axis=1)) - Z[np.arange(len(y)), y.astype(int)]
    else:
        losses = _margin_loss(loss)[0](X @ w, y)
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
    r = _margin_loss(loss)[1](X @ w, y)
    return X.T @ r / len(y) + l2 * w


# Steps: (grad, w, state, k, eta, h) → the next w. grad(u) is ∇f_S(u) + l2·u on the step's
# rows, state a dict the step keeps across batches (state["anchor"] is the batch's starting
# point), k the global step from 0, h the method's config keys (`Optimizer.config`).


def _gd(grad, w, state, k, eta, h):
    return w - eta * grad(w)


def _nesterov(grad, w, state, k, eta, h):
    mu = k / (k + 3.0) if h["momentum"] == "nesterov" else h["momentum"]
    ahead = w + mu * (w - state.get("w_prev", w))
    state["w_prev"] = w
    return ahead - eta * grad(ahead)


def _prox(grad, w, state, k, eta, h):
    return w - eta * (grad(w) + h["lam"] * (w - state["anchor"]))


def _heavy_ball(grad, w, state, k, eta, h):  # torch's SGD momentum: v ← μv + g, w ← w − ηv
    state["v"] = h["momentum"] * state.get("v", 0.0) + grad(w)
    return w - eta * state["v"]


def _adam(grad, w, state, k, eta, h):  # torch's Adam
    g = grad(w)
    b1, b2 = h["beta1"], h["beta2"]
    state["m"] = b1 * state.get("m", 0.0) + (1 - b1) * g
    state["v"] = b2 * state.get("v", 0.0) + (1 - b2) * g * g
    m_hat, v_hat = state["m"] / (1 - b1 ** (k + 1)), state["v"] / (1 - b2 ** (k + 1))
    return w - eta * m_hat / (np.sqrt(v_hat) + h["eps"])


def _adamw(grad, w, state, k, eta, h):  # torch's AdamW: w ← (1 − ηλ)w, then Adam's step with g at the old w
    g = grad(w)
    return _adam(lambda _: g, (1 - eta * h["weight_decay"]) * w, state, k, eta, h)


STEPS = {
    "minibatch_sgd": _gd,
    "echoed_gd": _gd,
    "echoed_sgd": _gd,  # its sub-batches are the `rows` of echoed_run
    "echoed_prox": _prox,
    "echoed_nesterov": _nesterov,
    "echoed_heavy_ball": _heavy_ball,
    "echoed_adam": _adam,
    "echoed_adamw": _adamw,
}
"""Method row name → its naive step."""


def echoed_run(X, Y, K, lr, optimizer, loss="squared", l2=0.0, rows=None, w0=None, first_loss=False):
    """Run K[t] steps of `optimizer` (a spec: its row name and hyper-parameters; lr comes
    from `lr`, one per batch) on every batch; return (last, avg, end_avg) iterates after each
    batch (and, with `first_loss`, the batch loss at the iterate before each batch's first step).

    rows: a list with one index array per step (sub-batches), or None for full batches.
    """
    if optimizer.name not in STEPS:
        raise ValueError(f"no naive twin for method {optimizer.name!r} (tests/naive.py: STEPS)")
    step, h = STEPS[optimizer.name], optimizer.config()
    T, _, d = X.shape
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=float)  # pass w0 for softmax (C·d)
    state = {}
    iterates, ends = [], []
    out_last, out_avg, out_end, first = [], [], [], []
    k = 0
    for t in range(T):
        state["anchor"] = w.copy()
        first.append(batch_loss(X[t], Y[t], w, loss, l2))
        for _ in range(K[t]):
            idx = slice(None) if rows is None else rows[k]
            Xs, ys = X[t][idx], Y[t][idx]
            w = step(lambda u: batch_loss_grad(Xs, ys, u, loss, l2), w, state, k, lr[t], h)
            iterates.append(w)
            k += 1
        ends.append(w)
        out_last.append(w)
        out_avg.append(np.mean(iterates, axis=0))
        out_end.append(np.mean(ends, axis=0))
    out = np.array(out_last), np.array(out_avg), np.array(out_end)
    return (*out, np.array(first)) if first_loss else out
