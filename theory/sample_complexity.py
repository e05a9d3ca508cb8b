r"""What the bounds say about fresh batches: how many reach a target, and how few can.

`batches_to_accuracy` inverts the tuned echoed-GD bound (Theorem 7, `theory.bounds`)
for the fresh batches $T_\varepsilon$ that reach an excess risk $\varepsilon$;
`saturation_echo` is the echo factor beyond which $T_\varepsilon$ stops falling; and
`minimax_lower_bound` is the excess risk that no method, echoed or not, can be
guaranteed to beat with $n = BT$ fresh examples. The setting is that of
`theory.bounds`; the derivations are in ``docs/background/bounds.md``
(``#accuracy-targets-and-saturation``, ``#minimax-lower-bound``).

Vectorised like the bounds: any argument may be an array, and a scalar call returns a
Python float.
"""

from __future__ import annotations

import numpy as np

from theory import _validate as _v
from theory.bounds import _problem

__all__ = [  # noqa: RUF022 - the reading order, which the docs page follows
    "batches_to_accuracy",
    "saturation_echo",
    "minimax_lower_bound",
]


# --------------------------------------------------------------- derived counts


@_v.named_broadcast
def batches_to_accuracy(eps, beta, rho, D, B, K):
    r"""Fresh batches $T_\varepsilon$ at which the tuned echoed-GD bound equals $\varepsilon$.

    Solves $a/T + b/\sqrt{T} = \varepsilon$ with $a = \beta D^2/(2K)$ and
    $b = 2\rho D/\sqrt{B}$:

    $$T_\varepsilon = \Bigl(\frac{b + \sqrt{b^2 + 4a\varepsilon}}{2\varepsilon}\Bigr)^2$$

    A real number (take the ceiling for a whole batch count). Wall-clock is
    proportional to $T_\varepsilon$ when the loader is the bottleneck; optimizer
    steps are $K T_\varepsilon$.

    Source: derived here from Theorem 7 [S], see
    ``docs/background/bounds.md#accuracy-targets-and-saturation``.

    Examples
    --------
    >>> round(batches_to_accuracy(eps=0.02625, beta=1.0, rho=1.0, D=1.0, B=64, K=4), 6)
    100.0
    """
    eps = _v.positive("eps", eps)
    beta, rho, D = _problem(beta, rho, D)
    B, K = _v.positive("B", B), _v.at_least("K", K, 1.0)
    a = beta * D**2 / (2 * K)
    b = 2 * rho * D / np.sqrt(B)
    return _v.result(((b + np.sqrt(b**2 + 4 * a * eps)) / (2 * eps)) ** 2)


@_v.named_broadcast
def saturation_echo(eps, beta, rho, B):
    r"""Echo factor $K_{\mathrm{sat}}$ beyond which echoing stops paying off.

    Split the target $\varepsilon$ evenly between the two terms of Theorem 7: the
    curvature term needs $T \ge \beta D^2/(K\varepsilon)$, the noise term
    $T \ge 16\rho^2 D^2/(B\varepsilon^2)$. They are equal at

    $$K_{\mathrm{sat}} = \frac{\beta B \varepsilon}{16\rho^2}$$

    (independent of $D$). For $K \ll K_{\mathrm{sat}}$, $T_\varepsilon \propto 1/K$
    (linear speedup); for $K \gg K_{\mathrm{sat}}$, $T_\varepsilon$ plateaus at about
    $16\rho^2D^2/(B\varepsilon^2)$. A value below 1 means even $K = 1$ is noise-bound.

    Source: derived here, see ``docs/background/bounds.md#accuracy-targets-and-saturation``.

    Examples
    --------
    >>> saturation_echo(eps=0.01, beta=1.0, rho=1.0, B=6400)
    4.0
    """
    eps = _v.positive("eps", eps)
    beta, rho = _v.positive("beta", beta), _v.positive("rho", rho)
    B = _v.positive("B", B)
    return _v.result(beta * B * eps / (16 * rho**2))


# ----------------------------------------------------------------- lower bound


def _lower_bound_constant(beta, rho, D):
    r"""$c = \tilde\rho\,(D - \tilde\rho/\beta)/5$ with $\tilde\rho = \min\{\rho, \beta D/2\}$."""
    rho_eff = np.minimum(rho, beta * D / 2)
    return rho_eff * (D - rho_eff / beta) / 5


def minimax_lower_bound(beta, rho, D, B, T):
    r"""Minimax lower bound for any method that sees $n = BT$ fresh examples.

    Setting: the class of problems the upper bounds cover: per-example losses
    $\ell(w; z)$ convex, $\beta$-smooth and $\rho$-Lipschitz on all of
    $\mathbb R^d$, with a population minimiser $w^\star$, $\lVert w_0 - w^\star\rVert
    \le D$. Any algorithm whose output is a (possibly randomised) function of the $n$
    examples, in particular echoed GD, SGD, prox or AGD with any $K$, any
    $K_t$ and any step sizes, has on some problem of the class

    $$\mathbb E[F(\hat w)] - F^\star \ge \frac{\tilde\rho\,(D - \tilde\rho/\beta)}{5\sqrt{BT}},
    \qquad \tilde\rho = \min\{\rho,\ \beta D/2\}.$$

    For $\rho \le \beta D/2$ the constant is $\rho D(1 - \rho/(\beta D))/5 \ge \rho D/10$;
    as $\beta \to \infty$ it tends to $\rho D/5$ (the non-smooth class). The cap
    $\tilde\rho$ reflects that a $\beta$-smooth loss with its minimiser within $D$
    cannot carry a useful signal larger than about $\beta D$.

    Echoing changes the number of steps $KT$, not $n$, so no echoing (and no other use of
    the same $n$ examples) can be *guaranteed* a smaller excess risk over the whole class;
    compare the $2\rho D/\sqrt{BT}$ term of Theorem 7 (`echoed_gd_bound`), which is
    therefore optimal up to the constant ($2$ against at least $1/10$). It is a statement
    about the worst problem of the class: on a particular problem, less hard than that
    one, a run can end well below this value (the docs' figure 2 shows such runs).

    Source: derived here (Le Cam's two-point method on a one-dimensional Huber
    construction, explicit constant), see ``docs/background/bounds.md#minimax-lower-bound``.
    The rate is classical (Nemirovski and Yudin 1983; Agarwal, Bartlett, Ravikumar
    and Wainwright 2012); the constant is ours.

    Examples
    --------
    >>> round(minimax_lower_bound(beta=1.0, rho=1.0, D=4.0, B=8, T=50), 6)
    0.03
    >>> round(minimax_lower_bound(beta=0.25, rho=1.0, D=4.0, B=8, T=50), 6)  # rho capped at beta*D/2
    0.01
    """
    beta, rho, D = _problem(beta, rho, D)
    B, T = _v.positive("B", B), _v.positive("T", T)
    return _v.result(_lower_bound_constant(beta, rho, D) / np.sqrt(B * T))
