r"""Closed-form bounds on the expected excess risk of data-echoed optimizers.

Setting shared by every function here (Agarwal, Anil, Koren, Talwar, Zhang,
"Stochastic Optimization with Laggard Data Pipelines", NeurIPS 2020): the loss
$\ell(w; z)$ is convex, $\beta$-smooth and $\rho$-Lipschitz in $w$ (on a domain that
contains every iterate), $F(w) = \mathbb{E}_z \ell(w; z)$, $w^\star$ minimises $F$ and
$D = \|w_0 - w^\star\|$. The optimizer receives $T$ fresh i.i.d. batches of size $B$
and takes $K$ steps on each. Every bound is on $\mathbb{E}[F(\hat w)] - F(w^\star)$
for the output $\hat w$ named in its docstring.

Derivations: ``docs/background/bounds.md``. Tags: [S] the paper's result as reported
by third-party notes, "derived here" our own derivation (see the docs page).

All functions are vectorised: any argument may be an array, results broadcast, and a
scalar call returns a Python float. What the bounds imply for the fresh batches a target
needs, and the lower bound, are in `theory.sample_complexity`.
"""

from __future__ import annotations

import numpy as np

from theory import _validate as _v

__all__ = [
    "minibatch_sgd_bound",
    "echoed_gd_bound",
    "echoed_gd_lr",
    "stability_gd",
    "echoed_prox_bound",
    "echoed_prox_param",
    "echoed_agd_bound",
    "echoed_agd_lr",
    "variable_echo_bound",
    "variable_echo_lr",
    "echoed_gd_strongly_convex_bound",
    "echoed_gd_strongly_convex_lr",
]

_SQRT2 = float(np.sqrt(2.0))


def _problem(beta, rho, D):
    return _v.positive("beta", beta), _v.positive("rho", rho), _v.positive("D", D)


def _setting(beta, rho, D, B, T, K):
    """Validate the common setting (β, ρ, D, B, T, K) of the echoed bounds."""
    beta, rho, D = _problem(beta, rho, D)
    return beta, rho, D, _v.positive("B", B), _v.positive("T", T), _v.at_least("K", K, 1.0)


# --------------------------------------------------------------------------- GD


@_v.named_broadcast
def minibatch_sgd_bound(beta, rho, D, B, T):
    r"""Bound for synchronous minibatch SGD (one step per fresh batch).

    Setting: convex, $\beta$-smooth, $\rho$-Lipschitz loss; $T$ fresh batches of size
    $B$; step $\eta = \min\{1/\beta, (D/2\rho)\sqrt{B/T}\}$; output the average
    iterate (``avg`` = ``end_avg`` when $K = 1$).

    $$\frac{\beta D^2}{2T} + \frac{2\rho D}{\sqrt{BT}}$$

    Source: Theorem 7 of the paper with $K = 1$ [S]; derived here, see
    ``docs/background/bounds.md#echoed-gd``.

    Examples
    --------
    >>> round(minibatch_sgd_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=100), 6)
    0.03
    """
    return echoed_gd_bound(beta, rho, D, B, T, K=1)


@_v.named_broadcast
def echoed_gd_bound(beta, rho, D, B, T, K, lr=None):
    r"""Bound for echoed GD: $K$ full-batch GD steps on each fresh batch.

    Setting: convex, $\beta$-smooth, $\rho$-Lipschitz loss; $T$ fresh batches of size
    $B$, $K \ge 1$ steps each. The bound holds for the ``avg`` output (uniform average
    of all inner iterates) and the ``end_avg`` output (average of batch-end iterates).

    With a fixed step ``lr`` $= \eta \le 1/\beta$:

    $$\frac{D^2}{2\eta K T} + \frac{2\eta\rho^2 K}{B}$$

    Without ``lr`` (tuned step, `echoed_gd_lr`):

    $$\frac{\beta D^2}{2KT} + \frac{2\rho D}{\sqrt{BT}}$$

    Source: the tuned form is Theorem 7 as reported [S]; both forms are derived here,
    see ``docs/background/bounds.md#echoed-gd``.

    Examples
    --------
    >>> round(echoed_gd_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4), 6)
    0.02625
    >>> round(echoed_gd_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4, lr=0.1), 6)
    0.025
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    if lr is None:
        value = beta * D**2 / (2 * K * T) + 2 * rho * D / np.sqrt(B * T)
    else:
        lr = _v.lr_at_most("lr", lr, 1.0 / beta, "1/beta")
        value = D**2 / (2 * lr * K * T) + 2 * lr * rho**2 * K / B
    return _v.result(value)


@_v.named_broadcast
def echoed_gd_lr(beta, rho, D, B, T, K):
    r"""Step size that minimises the fixed-step echoed-GD bound over $(0, 1/\beta]$.

    $$\eta^\star = \min\Bigl\{\frac{1}{\beta},\ \frac{D}{2\rho K}\sqrt{\frac{B}{T}}\Bigr\}$$

    At $\eta^\star$ the fixed-step bound of `echoed_gd_bound` is at most the
    tuned one. In the noise-dominated regime $\eta^\star \propto 1/K$.

    Source: derived here, see ``docs/background/bounds.md#echoed-gd``.

    Examples
    --------
    >>> round(echoed_gd_lr(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4), 6)
    0.1
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    return _v.result(np.minimum(1.0 / beta, D / (2 * rho * K) * np.sqrt(B / T)))


@_v.named_broadcast
def stability_gd(lr, rho, K, B, beta=None):
    r"""Uniform stability of $K$ GD steps on one batch of size $B$.

    Setting: convex, $\beta$-smooth, $\rho$-Lipschitz loss, step $\eta \le 2/\beta$
    (the GD map is then non-expansive). Replacing one example moves the batch
    gradient by at most $2\rho/B$, so after $K$ steps the iterates differ by at most
    $2\eta\rho K/B$:

    $$\varepsilon_{\mathrm{stab}} = \frac{2\eta\rho^2 K}{B}$$

    The formula does not involve $\beta$: give ``beta`` and the precondition
    $\eta \le 2/\beta$ is checked (a ValueError otherwise); without it, the
    precondition is the caller's to ensure, and above $2/\beta$ the value is not a
    stability bound.

    Source: the lemma as reported [S]; Hardt-Recht-Singer argument, see
    ``docs/background/bounds.md#echoed-gd``.

    Examples
    --------
    >>> round(stability_gd(lr=0.1, rho=1.0, K=4, B=64), 6)
    0.0125
    """
    lr, rho = _v.positive("lr", lr), _v.positive("rho", rho)
    K, B = _v.at_least("K", K, 1.0), _v.positive("B", B)
    if beta is not None:
        lr = _v.lr_at_most("lr", lr, 2.0 / _v.positive("beta", beta), "2/beta")
    return _v.result(2 * lr * rho**2 * K / B)


# ------------------------------------------------------------------ variable K_t


def _echo_counts(K_t):
    """Validate a per-batch step-count array; return (S1, S2) over its last axis."""
    arr = _v.as_float("K_t", K_t)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise ValueError(
            "K_t must be an array with at least one batch on its last axis, "
            f"got shape {arr.shape}"
        )
    if (arr < 0).any():
        raise ValueError(f"K_t must be >= 0 and finite, got {float(arr[arr < 0].flat[0])}")
    fractional = (arr > 0) & (arr < 1)
    if fractional.any():
        raise ValueError(
            "K_t must be 0 or >= 1 (steps on a batch; the bound uses "
            f"K_t(K_t+1) <= 2 K_t^2, false for 0 < K_t < 1), got {float(arr[fractional].flat[0])}"
        )
    S1 = arr.sum(axis=-1)
    if (S1 <= 0).any():
        raise ValueError("K_t must have a positive sum over its last axis (batches), got 0")
    return S1, (arr**2).sum(axis=-1)


@_v.named_broadcast(batches_last=("K_t",))
def variable_echo_bound(beta, rho, D, B, K_t, lr=None):
    r"""Echoed-GD bound when batch $t$ gets $K_t$ steps (``K_t``: last axis = batches).

    Setting: as `echoed_gd_bound`, with the step counts $K_t$ fixed in advance
    or random but independent of the data (pipeline timing never looks at the data).
    Output ``avg``: the uniform average of all $\sum_t K_t$ inner iterates.
    With $S_1 = \sum_t K_t$, $S_2 = \sum_t K_t^2$ and a fixed step $\eta \le 1/\beta$:

    $$\frac{D^2}{2\eta S_1} + \frac{2\eta\rho^2 S_2}{B S_1}$$

    Without ``lr`` (tuned step, `variable_echo_lr`):

    $$\frac{\beta D^2}{2 S_1} + \frac{2\rho D\sqrt{S_2}}{\sqrt{B}\,S_1}$$

    Both reduce to `echoed_gd_bound` when $K_t \equiv K$. Entries $K_t = 0$ (a
    batch never stepped on) are allowed; each series needs $S_1 > 0$. Fractional
    entries $0 < K_t < 1$ are refused: the derivation uses $K_t(K_t+1) \le 2K_t^2$,
    which fails there. A ``K_t`` with several axes holds one series per leading index;
    those axes must broadcast with the other arguments (the error names ``K_t``).

    Source: derived here, see ``docs/background/bounds.md#variable-echo``.

    Examples
    --------
    >>> K_t = [4] * 100
    >>> round(variable_echo_bound(beta=1.0, rho=1.0, D=1.0, B=64, K_t=K_t), 6)
    0.02625
    >>> round(variable_echo_bound(beta=1.0, rho=1.0, D=1.0, B=64, K_t=[1, 7] * 50), 6)
    0.0325
    """
    S1, S2 = _echo_counts(K_t)
    beta, rho, D = _problem(beta, rho, D)
    B = _v.positive("B", B)
    if lr is None:
        value = beta * D**2 / (2 * S1) + 2 * rho * D * np.sqrt(S2 / B) / S1
    else:
        lr = _v.lr_at_most("lr", lr, 1.0 / beta, "1/beta")
        value = D**2 / (2 * lr * S1) + 2 * lr * rho**2 * S2 / (B * S1)
    return _v.result(value)


@_v.named_broadcast(batches_last=("K_t",))
def variable_echo_lr(beta, rho, D, B, K_t):
    r"""Step size minimising the fixed-step variable-echo bound over $(0, 1/\beta]$.

    $$\eta^\star = \min\Bigl\{\frac{1}{\beta},\ \frac{D}{2\rho}\sqrt{\frac{B}{S_2}}\Bigr\},
    \qquad S_2 = \sum_t K_t^2$$

    Source: derived here, see ``docs/background/bounds.md#variable-echo``.

    Examples
    --------
    >>> round(variable_echo_lr(beta=1.0, rho=1.0, D=1.0, B=64, K_t=[4] * 100), 6)
    0.1
    """
    S1, S2 = _echo_counts(K_t)
    beta, rho, D = _problem(beta, rho, D)
    B = _v.positive("B", B)
    return _v.result(np.minimum(1.0 / beta, D / (2 * rho) * np.sqrt(B / S2)))


# ------------------------------------------------------------ strongly convex


def _strong_convexity(lam, beta):
    lam = _v.positive("lam", lam)
    bad = lam > beta
    if np.broadcast_to(bad, np.broadcast_shapes(np.shape(lam), np.shape(beta))).any():
        lam_b, beta_b = np.broadcast_arrays(lam, beta)
        raise ValueError(
            f"lam must be in (0, beta] (a lam-strongly convex, beta-smooth loss has lam <= beta), "
            f"got {float(lam_b[bad].flat[0])!r} with beta = {float(beta_b[bad].flat[0])!r}"
        )
    return lam


def _sc_log(rho, D, B, T, lam):
    """L = log(1 + lam^2 D^2 B T / (4 rho^2)), the horizon factor of the tuned step."""
    return np.log1p(lam**2 * D**2 * B * T / (4 * rho**2))


def echoed_gd_strongly_convex_lr(beta, rho, D, B, T, K, lam):
    r"""Step size of the tuned strongly convex echoed-GD bound.

    $$\eta^\star = \min\Bigl\{\frac1\beta,\ \frac{L}{\lambda K T}\Bigr\},\qquad
    L = \log\Bigl(1 + \frac{\lambda^2 D^2 B T}{4\rho^2}\Bigr)$$

    It falls like $1/K$ once $L/(\lambda KT) < 1/\beta$, as in the convex case.

    Source: derived here, see ``docs/background/bounds.md#strongly-convex-echoed-gd``.

    Examples
    --------
    >>> round(echoed_gd_strongly_convex_lr(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4, lam=0.1), 6)
    0.07083
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    lam = _strong_convexity(lam, beta)
    return _v.result(np.minimum(1.0 / beta, _sc_log(rho, D, B, T, lam) / (lam * K * T)))


def echoed_gd_strongly_convex_bound(beta, rho, D, B, T, K, lam, lr=None):
    r"""Bound for echoed GD on $\lambda$-strongly convex losses (exponentially weighted average).

    Setting: l2-regularised losses $\ell(w; z) = \ell_0(w; z) + \frac\lambda2\lVert
    w\rVert^2$ with $\ell_0$ convex and $\rho$-Lipschitz, $\ell$ $\beta$-smooth
    ($\lambda \le \beta$; `Dataset` with ``l2`` $=\lambda$ gives this $\beta$). Here
    $\rho$ is the Lipschitz constant of the *unregularised* part: the regulariser
    cancels in the stability argument (for logistic loss, $\rho = \max\lVert x\rVert$,
    with no domain assumption). Echoed GD with a
    constant step $\eta \le 1/\beta$, $N = KT$ steps in all, $u_j$ the $j$-th step's
    iterate. Output: $\hat w = \sum_j q^{-j}u_j / \sum_j q^{-j}$ with
    $q = 1 - \eta\lambda$, a weighted average that favours late iterates (not one
    of the kernels' outputs; compute it from the iterates).

    With a fixed step ``lr`` $= \eta$:

    $$\frac{\lambda D^2}{2}\,\frac{q^{KT}}{1 - q^{KT}} + \frac{2\rho^2}{\lambda B}\bigl(1 - q^{K}\bigr)$$

    Without ``lr`` (tuned step, `echoed_gd_strongly_convex_lr`):

    $$\frac{\lambda D^2/2}{e^{\lambda KT/\beta} - 1} + \frac{2\rho^2\,(1 + L)}{\lambda BT},
    \qquad L = \log\Bigl(1 + \frac{\lambda^2D^2BT}{4\rho^2}\Bigr)$$

    Echoing speeds up the curvature term exponentially (it decays in $KT$); the
    statistical term is $\rho^2/(\lambda BT)$ up to the factor $2(1+L)$ and does not
    depend on $K$. As $\lambda \to 0$ the fixed-step form tends to the fixed-step
    bound of `echoed_gd_bound`.

    Source: derived here (exponentially weighted potential and the strongly convex
    Hardt-Recht-Singer stability), see
    ``docs/background/bounds.md#strongly-convex-echoed-gd``. No strongly convex result
    of the paper was recovered.

    Examples
    --------
    >>> c = dict(beta=1.0, rho=1.0, D=1.0, B=64, T=100, lam=0.1)
    >>> round(echoed_gd_strongly_convex_bound(**c, K=1), 6)
    0.011981
    >>> round(echoed_gd_strongly_convex_bound(**c, K=4, lr=0.1), 6)
    0.013228
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    lam = _strong_convexity(lam, beta)
    if lr is None:
        with np.errstate(over="ignore"):  # exp overflow: the curvature term is 0
            curvature = lam * D**2 / 2 / np.expm1(lam * K * T / beta)
        statistical = 2 * rho**2 * (1 + _sc_log(rho, D, B, T, lam)) / (lam * B * T)
        return _v.result(curvature + statistical)
    lr = _v.lr_at_most("lr", lr, 1.0 / beta, "1/beta")
    with np.errstate(divide="ignore", over="ignore"):
        log_q = np.log1p(-lr * lam)  # -inf when lr * lam = 1 (q = 0)
        curvature = lam * D**2 / 2 / np.expm1(-K * T * log_q)
        stability = 2 * rho**2 / (lam * B) * -np.expm1(K * log_q)
    return _v.result(curvature + stability)


# ------------------------------------------------------------------------- prox


@_v.named_broadcast
def echoed_prox_param(beta, rho, D, B, T, K):
    r"""Proximal parameter $\lambda$ and inner step $\gamma$ for echoed proximal GD.

    On batch $t$ the kernel takes $K$ gradient steps of size $\gamma$ on
    $h_t(u) = f_{S_t}(u) + \tfrac{\lambda}{2}\|u - w_{t-1}\|^2$ from $u_0 = w_{t-1}$.
    This choice does not depend on $K$ (the argument is accepted for symmetry):

    $$\lambda = \frac{2\rho}{D}\sqrt{\frac{T}{B}}, \qquad \gamma = \frac{1}{\beta + \lambda}$$

    With it, `echoed_prox_bound` holds for any $K \ge 1$.

    Source: derived here, see ``docs/background/bounds.md#echoed-proximal-gd``.

    Returns
    -------
    (lam, inner_lr) : tuple of float or ndarray

    Examples
    --------
    >>> lam, inner_lr = echoed_prox_param(beta=1.0, rho=1.0, D=1.0, B=64, T=16, K=4)
    >>> lam, inner_lr
    (1.0, 0.5)
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    lam = 2 * rho / D * np.sqrt(T / B)
    inner_lr = 1.0 / (beta + lam)
    lam, inner_lr, _ = _v.broadcast(lam=lam, inner_lr=inner_lr, K=K)
    return _v.result(lam), _v.result(inner_lr)


@_v.named_broadcast
def echoed_prox_bound(beta, rho, D, B, T, K, lam=None, inner_lr=None):
    r"""Bound for echoed proximal GD (output ``end_avg``: average of $w_1..w_T$).

    Setting: convex, $\beta$-smooth, $\rho$-Lipschitz loss; $K$ inner GD steps of size
    $\gamma \le 1/(\beta+\lambda)$ on $f_{S_t}(u) + \frac{\lambda}{2}\|u - w_{t-1}\|^2$.

    Default (the parameters of `echoed_prox_param`), Theorem 10 as reported:

    $$\sqrt{1 + 1/K}\,\frac{2\rho D}{\sqrt{BT}} + \frac{\beta D^2}{2KT}$$

    With ``lam`` and/or ``inner_lr`` given (a missing one takes its default), the
    bound derived here for those parameters, with
    $\lambda_K = \lambda / (1 - (1 - \gamma\lambda)^K)$:

    $$\frac{\lambda_K D^2}{2T} + \frac{2\rho^2}{\lambda_K B}$$

    At the default parameters the derived bound is at most
    $2\rho D/\sqrt{BT} + \beta D^2/(2KT)$, below the reported form.

    Source: Theorem 10 as reported [S]; derived here (a sharper bound),
    see ``docs/background/bounds.md#echoed-proximal-gd``.

    Examples
    --------
    >>> round(echoed_prox_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=16, K=3), 6)
    0.082585
    >>> round(echoed_prox_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=16, K=3, lam=1.0), 6)
    0.063058
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    if lam is None and inner_lr is None:
        value = np.sqrt(1 + 1 / K) * 2 * rho * D / np.sqrt(B * T) + beta * D**2 / (2 * K * T)
        return _v.result(value)
    lam = 2 * rho / D * np.sqrt(T / B) if lam is None else _v.positive("lam", lam)
    limit = 1.0 / (beta + lam)
    inner_lr = limit if inner_lr is None else _v.lr_at_most(
        "inner_lr", inner_lr, limit, "1/(beta+lam)"
    )
    # 1 - (1 - gamma*lam)^K, accurate when gamma*lam is tiny
    contraction_gap = -np.expm1(K * np.log1p(-inner_lr * lam))
    lam_k = lam / contraction_gap
    return _v.result(lam_k * D**2 / (2 * T) + 2 * rho**2 / (lam_k * B))


# -------------------------------------------------------------------------- AGD


def _agd_sigma(K, T):
    r"""$\Sigma_{K,T}$: the weighted sum of per-step stability constants (docs)."""
    return K * (K + 1) * T * ((K - 1) / 3 + K**2 * (T + 1) * (2 * T + 1) / 6
                              + 2 * K * (T + 1) + 4)


@_v.named_broadcast
def echoed_agd_lr(beta, rho, D, B, T, K):
    r"""Step size assumed by the tuned echoed-Nesterov bound.

    It minimises $2D^2/\eta + \sqrt{2}\,\eta\rho^2\Sigma_{K,T}/B$ over
    $(0, 1/\beta]$:

    $$\eta^\star = \min\Bigl\{\frac{1}{\beta},\
    \frac{D}{\rho}\sqrt{\frac{\sqrt{2}\,B}{\Sigma_{K,T}}}\Bigr\},\quad
    \Sigma_{K,T} = K(K+1)T\Bigl[\tfrac{K-1}{3} + \tfrac{K^2(T+1)(2T+1)}{6}
    + 2K(T+1) + 4\Bigr]$$

    In the noise-dominated regime and for large $T$,
    $\eta^\star \approx 2.06\,D\sqrt{B}/(\rho K^{3/2}\sqrt{K+1}\,T^{3/2})$: much smaller than the GD step, because momentum amplifies the
    sensitivity to each batch.

    Source: derived here, see ``docs/background/bounds.md#echoed-nesterov-on-quadratics``.

    Examples
    --------
    >>> round(echoed_agd_lr(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4), 8)
    0.00090751
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    sigma = _agd_sigma(K, T)
    return _v.result(np.minimum(1.0 / beta, D / rho * np.sqrt(_SQRT2 * B / sigma)))


@_v.named_broadcast
def echoed_agd_bound(beta, rho, D, B, T, K, lr=None):
    r"""Bound for echoed Nesterov AGD on convex quadratics (output: last iterate).

    Setting: $\ell(w; x, y) = \frac12(x^\top w - y)^2$ with $\|x\|^2 \le \beta$ and
    per-example gradients bounded by $\rho$ on a convex set containing all iterates
    and extrapolation points; one momentum sequence over all $N = KT$ steps,
    $\mu_k = k/(k+3)$, never reset; step $\eta \le 1/\beta$; $K$ steps per batch.
    The bound is on $F(x_N)$, the last iterate.

    With a fixed step ``lr`` $= \eta$:

    $$\frac{2D^2/\eta + \tfrac32\beta D^2 + \sqrt{2}\,\eta\rho^2\Sigma_{K,T}/B}{(KT+2)^2}$$

    Without ``lr`` (tuned step, `echoed_agd_lr`, where $\Sigma_{K,T}$ is defined):

    $$\frac{3.5\,\beta D^2 + 2^{7/4}\rho D\sqrt{\Sigma_{K,T}/B}}{(KT)^2}
    \;\approx\; \frac{3.5\,\beta D^2}{(KT)^2} + 1.94\sqrt{1 + \tfrac1K}\,
    \frac{\rho D}{\sqrt{BT}}\quad (T \to \infty)$$

    The [S] rate is $O(\beta D^2/(KT)^2 + \rho D/\sqrt{BT})$ without constants; these
    constants are ours. Valid only for quadratic losses (the stability step uses
    linearity of the gradient).

    Source: derived here, see ``docs/background/bounds.md#echoed-nesterov-on-quadratics``.

    Examples
    --------
    >>> round(echoed_agd_bound(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4), 6)
    0.02757
    >>> round(echoed_agd_bound(beta=1.0, rho=0.01, D=1.0, B=64, T=100, K=4), 6)
    0.000297
    """
    beta, rho, D, B, T, K = _setting(beta, rho, D, B, T, K)
    sigma = _agd_sigma(K, T)
    if lr is None:
        value = (3.5 * beta * D**2 + 2**1.75 * rho * D * np.sqrt(sigma / B)) / (K * T) ** 2
    else:
        lr = _v.lr_at_most("lr", lr, 1.0 / beta, "1/beta")
        value = (2 * D**2 / lr + 1.5 * beta * D**2 + _SQRT2 * lr * rho**2 * sigma / B) / (
            K * T + 2
        ) ** 2
    return _v.result(value)
