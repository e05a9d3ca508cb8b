"""Numba kernels of the echoed optimizers: arrays in, arrays out.

`kernel_for(method, loss, wide)` gives the one kernel that runs a chunk of fresh
batches for L iterates at once (L = 1 for a single run), specialised to one method
(its update branch, by its code in `echosim.training.methods`), one loss (its
gradient, by its code in `echosim.training.losses`) and one layout; the codes are
constants of the compiled function, so a run compiles, and Numba's on-disk cache
keeps, only the branches it uses. The layouts:

- rows (``wide=False``): each iterate's gradient over the batch's rows in turn
  (`run`, and `run_many` for the softmax loss);
- wide (``wide=True``): the batch transposed once, the L gradients as matrix-matrix
  products with rows innermost (`run_many` for margin losses). A column's arithmetic
  does not depend on L or on its neighbours, so a run is bitwise the same whatever
  shares the call.

Everything random (the batches, the sub-batch rows) is drawn beforehand in NumPy and
passed in; the optimizer state lives in caller-owned arrays (`State`), so a long run is
a sequence of chunk calls, each through `call_chunk`, the one place that knows the
kernel's positional arguments. The gradients and batch losses it calls are in
`echosim.training.gradients`; the Python facade is `echosim.training.runner`; the
naive twin is ``tests/naive.py``.

`UPDATES` lists the method codes that have an update branch here, with what each
branch reads; `check_tables` compares it, and the losses with their own gradient path
(`OWN_GRADIENT`), with the tables of `echosim.training.methods` and
`echosim.training.losses` when this module is imported: a row without its branch is an
error there, before any run.
"""

import functools
import hashlib
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit

from echosim.training import gradients
from echosim.training.gradients import (
    BLOCK,
    FASTMATH,
    dlogistic_many,
    dmargin_many,
    first_losses,
    grad_many,
    logistic_grad_full,
    logistic_grad_rows,
    margin_grad_full,
    margin_grad_rows,
    margins_many,
    softmax_grad,
    transpose_rows,
)
from echosim.training.losses import LOGISTIC, LOSSES, SOFTMAX
from echosim.training.methods import ADAM, ADAMW, GD, HEAVY_BALL, METHODS, NESTEROV, PROX

UPDATES = {
    GD: (0, 0),  # w ← w − ηg
    NESTEROV: (1, 1),  # hyper: μ (< 0: μ_k = k/(k+3)); state: x_prev
    PROX: (1, 0),  # hyper: λ
    HEAVY_BALL: (1, 1),  # hyper: μ; state: the velocity
    ADAM: (3, 2),  # hyper: β₁, β₂, ε; state: m, v
    ADAMW: (4, 2),  # hyper: β₁, β₂, ε, λ (decoupled weight decay); state: m, v
}
"""The method codes with an update branch in ``echo_chunk`` (the ``METHOD == ...`` chain):
code → (hyper-parameters the branch reads, ``hyper[0..]``; state arrays it keeps, ``S[0..]``).
Written beside the branches and changed with them; `check_tables` holds the method
table to it."""

OWN_GRADIENT = (SOFTMAX,)
"""The loss codes with their own gradient path (a branch of ``echo_chunk``, its gradient in
`echosim.training.gradients`); every other loss of the table is a margin loss and takes
the generic path (ℓ' from `echosim.training.losses.deriv`)."""


def check_tables(methods: dict, losses: dict) -> None:
    """ValueError unless this module has a path for every row: each method's code has a
    branch (`UPDATES`) that reads exactly the row's hyper-parameters and state arrays, and
    each loss is a margin loss or has its own gradient path (`OWN_GRADIENT`). Run on
    `METHODS` and `LOSSES` when the module is imported."""
    for name, row in methods.items():
        if row.code not in UPDATES:
            raise ValueError(f"method {name!r}: code {row.code!r} has no update branch in echosim.training.kernel "
                             "(add its branch and its UPDATES entry)")
        n_hyper, n_state = UPDATES[row.code]
        if (len(row.hyper), len(row.state)) != (n_hyper, n_state):
            raise ValueError(f"method {name!r}: its row has {len(row.hyper)} hyper-parameters and {len(row.state)} "
                             f"state arrays; the update branch of code {row.code} reads {n_hyper} and {n_state}")
    for name, row in losses.items():
        if not row.margin and row.code not in OWN_GRADIENT:
            raise ValueError(f"loss {name!r}: code {row.code!r} is not a margin loss and has no gradient path in "
                             "echosim.training.kernel")


# --------------------------------------------------------------------------- the chunk kernel

GRADIENTS_DIGEST = int(hashlib.sha256(Path(gradients.__file__).read_bytes()).hexdigest()[:15], 16)
"""A digest of ``gradients.py``, a constant of every kernel: Numba's cache checks only the
stamp of the file that holds the cached function, and the kernel links in the compiled
gradients, so without it an edit there would leave the kernel's cached code stale."""


@njit(cache=True, fastmath=FASTMATH)
def _all_finite(w):
    for j in range(w.shape[0]):
        if not np.isfinite(w[j]):
            return False
    return True


@njit(cache=True)
def _log(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, row):
    """Row `row` of the logs, for each iterate: the last iterate, the step average, the
    batch-end average (the last iterate while no batch has ended yet)."""
    L, d = W.shape
    for l in range(L):
        for j in range(d):
            log_w[row, l, j] = W[l, j]
            log_avg[row, l, j] = avg_sum[l, j] / counters[0]
            log_end[row, l, j] = end_sum[l, j] / counters[1] if counters[1] > 0 else W[l, j]


@functools.lru_cache(maxsize=None)
def kernel_for(method: int, loss: int, wide: bool, sub: bool = False, first: bool = False):
    """The chunk kernel of one method code, loss code, layout, row set (`sub`: steps on
    sub-batch rows, else on the whole batch) and whether it records first-step losses; see
    the module docstring. The step's pieces are written out in the kernel, where the
    constants prune them, rather than as helpers: each function Numba compiles on its own
    costs it a fixed ~0.3 s, and a helper inlined by Numba is typed again in every kernel.

    Called as ``kernel(X, Y, K, lr, rows, hyper, l2, W, S, avg_sum, end_sum, counters,
    diverged, log_at, log_steps, log_w, log_avg, log_end, first_loss)``; returns the
    number of iterates still finite. X (n, B, d), Y (n, B): the chunk's batches. K
    (n,): steps per batch. lr (n, L): learning rate per batch and iterate. rows (steps,
    b): sub-batch rows per step (`sub`), or shape (0, 0) for full-batch steps. hyper: the
    method's parameters (`Optimizer.kernel_hyper`). l2: the problem's L2 weight.

    State, updated in place: W (L, d) the iterates, S (n_state, L, d) the method's
    extra state (its row's ``state``), avg_sum / end_sum (L, d) float64 sums of every
    step's and every batch end's iterate, counters = [steps so far, batches so far]
    (shared: every iterate takes the same steps), diverged (L,) −1 or the local batch
    at which that iterate first became non-finite (it is then carried along, unused).
    Logging: after local batch log_at[j] (after local step log_at[j] if `log_steps`),
    row j of log_w / log_avg / log_end (n_logs, L, d) receives the last iterate and the
    two averages. first_loss (n, L) with `first` (else shape (0, L), unused): the batch
    loss f_{S_t}(w) + (l2/2)‖w‖² at each iterate before its first step on batch t.
    """
    if method not in UPDATES or loss not in {row.code for row in LOSSES.values()}:
        raise ValueError(f"no kernel for method code {method!r} and loss code {loss!r}")
    if wide and loss == SOFTMAX:
        raise ValueError("the wide layout takes margin losses only")
    METHOD, LOSS, WIDE, SUB, FIRST = int(method), int(loss), bool(wide), bool(sub), bool(first)
    SOURCE = GRADIENTS_DIGEST  # in the closure, so in Numba's cache key

    @njit(cache=True, fastmath=FASTMATH, error_model="numpy")  # no zero-division checks (Adam's ε > 0)
    def echo_chunk(X, Y, K, lr, rows, hyper, l2, W, S, avg_sum, end_sum, counters, diverged,
                   log_at, log_steps, log_w, log_avg, log_end, first_loss):
        if SOURCE < 0:  # never (a digest is >= 0): this use keeps SOURCE in the closure, so in the key
            return 0
        L, d = W.shape
        Lp = L + (-L) % 4
        n = rows.shape[1] if SUB else X.shape[1]
        G = np.empty((Lp if WIDE else L, d), dtype=W.dtype)
        P = W  # the point the gradient is taken at: Nesterov's look-ahead, else the iterate
        if METHOD == NESTEROV:
            P = np.empty_like(W)
        anchor = W  # the prox centre w_{t−1}
        if METHOD == PROX:
            anchor = np.empty_like(W)
        X_T = np.empty((d if WIDE else 0, n), dtype=W.dtype)  # wide: the step's rows, transposed
        y_T = np.empty(n if WIDE else 0, dtype=Y.dtype)
        Rt = np.empty((Lp if WIDE else 0, n), dtype=W.dtype)
        logits = np.empty(max(1, d // X.shape[2]), dtype=np.float64)  # softmax: C classes
        r_block = np.empty(BLOCK, dtype=W.dtype)  # logistic rows: a block's margins, then ℓ'
        labels = np.empty(BLOCK, dtype=Y.dtype)
        no_rows = np.empty(0, dtype=np.int64)
        step_in_chunk = 0
        next_log = 0
        alive = 0
        for l in range(L):
            if diverged[l] < 0:
                alive += 1
        for t in range(X.shape[0]):
            Xt = X[t]
            Yt = Y[t]
            if FIRST:
                first_losses(Xt, Yt, W, LOSS, l2, logits, first_loss, t)
            if METHOD == PROX:
                for l in range(L):
                    for j in range(d):  # not anchor[:] = W: an array-to-array slice copy compiles seconds of error text
                        anchor[l, j] = W[l, j]
            if WIDE:
                if not SUB:  # full-batch steps: one copy per batch
                    transpose_rows(Xt, Yt, no_rows, X_T, y_T)
            for k_t in range(K[t]):
                r = rows[step_in_chunk] if SUB else no_rows
                k = counters[0]
                if METHOD == NESTEROV:  # the look-ahead y = x + μ_k(x − x_prev)
                    mu = k / (k + 3.0) if hyper[0] < 0.0 else hyper[0]
                    for l in range(L):
                        for j in range(d):
                            P[l, j] = W[l, j] + mu * (W[l, j] - S[0, l, j])
                # ---- G ← ∇f_S at P (+ l2·P)
                if WIDE:
                    if SUB:
                        transpose_rows(Xt, Yt, r, X_T, y_T)
                    margins_many(X_T, P, Rt)
                    if LOSS == LOGISTIC:
                        dlogistic_many(Rt, y_T, L, 1.0 / n)
                    else:
                        dmargin_many(Rt, y_T, L, 1.0 / n, LOSS)
                    grad_many(X_T, Rt, L, G)
                else:
                    for l in range(L):
                        if LOSS == SOFTMAX:
                            softmax_grad(Xt, Yt, r, P, l, G, logits)
                        elif LOSS == LOGISTIC:
                            if SUB:
                                logistic_grad_rows(Xt, Yt, r, P, l, G, r_block, labels)
                            else:
                                logistic_grad_full(Xt, Yt, r, P, l, G, r_block, labels)
                        elif SUB:
                            margin_grad_rows(Xt, Yt, r, P, l, LOSS, G)
                        else:
                            margin_grad_full(Xt, Yt, r, P, l, LOSS, G)
                if l2 != 0.0:
                    for l in range(L):
                        for j in range(d):
                            G[l, j] += l2 * P[l, j]
                # ---- the method's update
                if METHOD == GD:  # w ← w − ηg
                    for l in range(L):
                        eta = lr[t, l]
                        for j in range(d):
                            W[l, j] -= eta * G[l, j]
                elif METHOD == NESTEROV:  # x_prev ← x, x ← y − ηg
                    for l in range(L):
                        eta = lr[t, l]
                        for j in range(d):
                            S[0, l, j] = W[l, j]
                            W[l, j] = P[l, j] - eta * G[l, j]
                elif METHOD == PROX:  # a step on f_S + (λ/2)‖w − w_{t−1}‖²
                    lam = hyper[0]
                    for l in range(L):
                        eta = lr[t, l]
                        for j in range(d):
                            G[l, j] += lam * (W[l, j] - anchor[l, j])
                            W[l, j] -= eta * G[l, j]
                elif METHOD == HEAVY_BALL:  # torch's SGD momentum: v ← μv + g, w ← w − ηv
                    mu = hyper[0]
                    for l in range(L):
                        eta = lr[t, l]
                        for j in range(d):
                            S[0, l, j] = mu * S[0, l, j] + G[l, j]
                            W[l, j] -= eta * S[0, l, j]
                elif METHOD == ADAM or METHOD == ADAMW:
                    # torch's Adam at global step k: m, v and w ← w − (η/(1−β₁^{k+1}))·m/(√v/√(1−β₂^{k+1}) + ε);
                    # AdamW first shrinks w ← (1 − ηλ)w (torch's decoupled weight decay; g is taken before)
                    beta1, beta2, eps = hyper[0], hyper[1], hyper[2]
                    bias1 = 1.0 - beta1 ** (k + 1.0)
                    root2 = np.sqrt(1.0 - beta2 ** (k + 1.0))
                    for l in range(L):
                        step = lr[t, l] / bias1
                        if METHOD == ADAMW:
                            shrink = 1.0 - lr[t, l] * hyper[3]
                            for j in range(d):
                                W[l, j] *= shrink
                        for j in range(d):
                            gj = G[l, j]
                            S[0, l, j] = beta1 * S[0, l, j] + (1.0 - beta1) * gj
                            S[1, l, j] = beta2 * S[1, l, j] + (1.0 - beta2) * (gj * gj)
                            W[l, j] -= step * (S[0, l, j] / (np.sqrt(S[1, l, j]) / root2 + eps))
                else:  # a code admitted without its branch (kernel_for refuses codes not in UPDATES)
                    raise ValueError("echo_chunk: no update branch for this method code")
                for l in range(L):
                    for j in range(d):
                        avg_sum[l, j] += W[l, j]
                counters[0] += 1
                if log_steps and k_t < K[t] - 1:  # a batch's last step is logged once the batch ends
                    while next_log < log_at.shape[0] and log_at[next_log] == step_in_chunk:
                        _log(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
                        next_log += 1
                step_in_chunk += 1
            for l in range(L):
                for j in range(d):
                    end_sum[l, j] += W[l, j]
            counters[1] += 1
            for l in range(L):
                if diverged[l] < 0 and not _all_finite(W[l]):
                    diverged[l] = t
                    alive -= 1
            if alive == 0:
                return 0
            at = step_in_chunk - 1 if log_steps else t
            while next_log < log_at.shape[0] and log_at[next_log] == at:
                _log(W, avg_sum, end_sum, counters, log_w, log_avg, log_end, next_log)
                next_log += 1
        return alive

    return echo_chunk


# --------------------------------------------------------------------------- calling the kernel


class State(NamedTuple):
    """What a run carries from chunk to chunk, updated in place by the kernel (see `kernel_for`)."""

    W: np.ndarray
    """(L, d) the iterates, in the run's dtype."""
    S: np.ndarray
    """(n_state, L, d) the method's extra state, its row's ``state`` in order."""
    avg_sum: np.ndarray
    """(L, d) float64 sum of every step's iterate."""
    end_sum: np.ndarray
    """(L, d) float64 sum of every batch end's iterate."""
    counters: np.ndarray
    """[steps so far, batches so far]."""
    diverged: np.ndarray
    """(L,) −1, or the local batch at which that iterate first became non-finite."""

    @classmethod
    def start(cls, W: np.ndarray, method) -> "State":
        """The state before the first step from the iterates W (L, d) for method row `method`:
        its state arrays sized and started as its row says."""
        L, d = W.shape
        S = np.empty((len(method.state), L, d), dtype=W.dtype)
        for i, (_name, init) in enumerate(method.state):
            S[i] = W if init == "w0" else 0.0
        return cls(W, S, np.zeros((L, d)), np.zeros((L, d)), np.zeros(2, dtype=np.int64),
                   np.full(L, -1, dtype=np.int64))


def call_chunk(kernel, X, Y, K, lr, rows, hyper, l2, state: State, log_at, log_steps, logs, first_loss) -> int:
    """Run `kernel` (from `kernel_for`) on one chunk: the one place that spells out its
    positional arguments. `logs` is (log_w, log_avg, log_end); the rest as in `kernel_for`.
    Returns the number of iterates still finite."""
    log_w, log_avg, log_end = logs
    return kernel(X, Y, K, lr, rows, hyper, float(l2), state.W, state.S, state.avg_sum, state.end_sum,
                  state.counters, state.diverged, log_at, log_steps, log_w, log_avg, log_end, first_loss)


def warm_up(kernel, method, dtype, first: bool = False) -> None:
    """Call `kernel` of method row `method` once on tiny arrays of the types a run passes
    (hyper-parameters and state sized from the row, at their defaults), so that it compiles
    (or loads from Numba's cache) for `dtype`; lr = 0, so nothing moves."""
    dtype = np.dtype(dtype)
    X, Y = np.zeros((1, 1, 1), dtype=dtype), np.zeros((1, 1), dtype=dtype)
    rows = np.zeros((1, 1) if method.sub_batches else (0, 0), dtype=np.int64)
    logs = (np.empty((1, 1, 1), dtype=dtype), np.empty((1, 1, 1)), np.empty((1, 1, 1)))
    call_chunk(kernel, X, Y, np.ones(1, dtype=np.int64), np.zeros((1, 1)), rows, method.spec(lr=0.0).kernel_hyper(),
               0.0, State.start(np.zeros((1, 1), dtype=dtype), method), np.zeros(1, dtype=np.int64), False, logs,
               np.zeros((1 if first else 0, 1)))


check_tables(METHODS, LOSSES)
