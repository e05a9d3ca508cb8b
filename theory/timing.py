r"""Timing model of a laggard pipeline (Choi et al. 2019, §3) and wall-clock predictions.

Upstream (loading, decoding, augmentation) produces one fresh batch every $t_{up}$;
downstream (the accelerator) takes $t_{down}$ per optimizer step. With upstream and
downstream running in parallel and echo factor $e$ (steps per fresh batch), a fresh
batch is consumed every $\max\{t_{up}, e\,t_{down}\}$. $R = t_{up}/t_{down}$ is how
laggard the loader is; echoing up to $e = R$ uses otherwise idle accelerator time.

Derivations: ``docs/background/bounds.md#pipeline-timing``.
"""

from __future__ import annotations

import numpy as np

from theory import _validate as _v
from theory.sample_complexity import _lower_bound_constant, batches_to_accuracy

__all__ = [
    "pipeline_time",
    "echo_speedup",
    "rate_speedup_ceiling",
    "time_to_accuracy",
    "time_optimal_echo",
    "echo_speedup_ceiling",
    "minimax_speedup_ceiling",
]


@_v.named_broadcast
def pipeline_time(t_up, t_down, e):
    r"""Steady-state wall-clock time per fresh batch with echo factor $e$.

    Setting: one upstream stage delivering a batch every $t_{up}$ (with $w$ parallel
    workers of per-batch time $s$, $t_{up} = s/w$), one downstream step of $t_{down}$,
    unbounded overlap, no other overheads.

    $$\mathrm{time}(e) = \max\{t_{up},\ e\,t_{down}\}$$

    Source: Choi et al. (2019) §3 as reported [S]; see
    ``docs/background/bounds.md#pipeline-timing``.

    Examples
    --------
    >>> pipeline_time(t_up=8.0, t_down=1.0, e=4)
    8.0
    >>> pipeline_time(t_up=8.0, t_down=1.0, e=10)
    10.0
    """
    t_up, t_down = _v.positive("t_up", t_up), _v.positive("t_down", t_down)
    e = _v.at_least("e", e, 1.0)
    return _v.result(np.maximum(t_up, e * t_down))


@_v.named_broadcast
def echo_speedup(R, e, fresh_ratio=1.0):
    r"""Wall-clock speedup of echo factor $e$ over no echoing, at the same target.

    ``fresh_ratio`` $= N(1)/N(e)$ is how many times fewer fresh batches echoing needs
    to reach the target (1: echoed steps are worthless, $e$: as good as fresh ones).
    Time per fresh batch is $t_{down}\max\{R, 1\}$ without echoing and
    $t_{down}\max\{R, e\}$ with it, so

    $$\mathrm{speedup}(e) = \frac{N(1)}{N(e)}\cdot\frac{\max\{R, 1\}}{\max\{R, e\}}
    \;=\; \frac{N(1)}{N(e)}\min\Bigl\{1, \frac{R}{e}\Bigr\}\quad (R \ge 1)$$

    For $R < 1$ (the loader is not the bottleneck) this is ``fresh_ratio / e``.
    A theory-based ``fresh_ratio`` is
    ``batches_to_accuracy(..., K=1) / batches_to_accuracy(..., K=e)``.

    Source: derived here from Choi et al.'s time model, see
    ``docs/background/bounds.md#pipeline-timing``.

    Examples
    --------
    >>> echo_speedup(R=6.0, e=5, fresh_ratio=3.9)
    3.9
    >>> echo_speedup(R=2.0, e=4, fresh_ratio=3.0)
    1.5
    """
    R, e = _v.positive("R", R), _v.at_least("e", e, 1.0)
    fresh_ratio = _v.positive("fresh_ratio", fresh_ratio)
    return _v.result(fresh_ratio * np.maximum(R, 1.0) / np.maximum(R, e))


@_v.named_broadcast
def rate_speedup_ceiling(mean_echo, rate_echo, rate_sync):
    r"""Wall-clock speedup of an echo policy over no echoing if every echoed step were worth
    a fresh batch: the ceiling a measured or predicted speedup is compared with.

    Setting: any loader and step times (random, several workers, a prefetch buffer), summed
    up by the steady rate of fresh batches each policy runs at, $r_{\bar K}$ with echoing
    (mean $\bar K$ steps per fresh batch) and $r_1$ without. If $\bar K$ echoed steps did
    the work of $\bar K$ fresh ones, $T(\bar K) = T(1)/\bar K$ fresh batches would reach
    the target, and wall-clock is fresh batches over their rate, so

    $$\mathrm{speedup} \le \frac{T(1)/r_1}{T(1)/(\bar K\, r_{\bar K})}
    = \bar K\,\frac{r_{\bar K}}{r_1}.$$

    For a fixed $K$ behind a deterministic loader $R$ step times per batch ($r_K = 1/
    \max\{R, K\}$) this is Choi et al.'s $\min\{K, R\}$ (for $R \ge 1$), i.e.
    `echo_speedup` with ``fresh_ratio = e``. Theorem 7 says how far below it a problem
    falls: only the curvature term of $T$ is divided by $K$ (`echo_speedup_ceiling`).

    Source: derived here from Choi et al.'s time model, see
    ``docs/background/bounds.md#pipeline-timing``.

    Examples
    --------
    >>> float(rate_speedup_ceiling(mean_echo=4, rate_echo=1 / 6, rate_sync=1 / 6))   # K = 4 < R = 6
    4.0
    >>> float(rate_speedup_ceiling(mean_echo=8, rate_echo=1 / 8, rate_sync=1 / 6))   # K = 8 > R: min(K, R)
    6.0
    """
    mean_echo = _v.at_least("mean_echo", mean_echo, 1.0)
    rate_echo, rate_sync = _v.positive("rate_echo", rate_echo), _v.positive("rate_sync", rate_sync)
    return _v.result(mean_echo * rate_echo / rate_sync)


@_v.named_broadcast
def time_to_accuracy(eps, beta, rho, D, B, K, t_up=None, t_down=None, *, throughput=None):
    r"""Predicted wall-clock time until the tuned echoed-GD bound reaches $\varepsilon$.

    Combines the fresh batches needed (`batches_to_accuracy`) with the
    pipeline's throughput. Give either ``(t_up, t_down)`` (the model of
    `pipeline_time` with $e = K$) or a measured ``throughput`` (fresh batches
    per unit time, e.g. from a simulated Schedule):

    $$\mathrm{time}_\varepsilon = T_\varepsilon \cdot \max\{t_{up}, K t_{down}\}
    \qquad\text{or}\qquad \mathrm{time}_\varepsilon = T_\varepsilon / \mathrm{throughput}$$

    Source: derived here, see ``docs/background/bounds.md#pipeline-timing``.

    Examples
    --------
    >>> c = dict(eps=0.02625, beta=1.0, rho=1.0, D=1.0, B=64)
    >>> round(time_to_accuracy(**c, K=4, t_up=8.0, t_down=1.0), 6)
    800.0
    >>> round(time_to_accuracy(**c, K=4, throughput=0.125), 6)
    800.0
    """
    T_eps = np.asarray(batches_to_accuracy(eps, beta, rho, D, B, K))
    if throughput is None:
        if t_up is None or t_down is None:
            raise ValueError(
                "time_to_accuracy needs either both t_up and t_down, or throughput"
            )
        per_batch = pipeline_time(t_up, t_down, K)
    else:
        if t_up is not None or t_down is not None:
            raise ValueError(
                "throughput must not be combined with t_up/t_down: give one timing model"
            )
        per_batch = 1.0 / _v.positive("throughput", throughput)
    return _v.result(T_eps * np.asarray(per_batch))


def time_optimal_echo(eps, beta, rho, D, B, R, integer=True):
    r"""Echo factor $K^\star$ that minimises `time_to_accuracy` for a loader with ratio $R$.

    Setting: the "fixed" policy (every fresh batch gets exactly $K$ steps), the timing
    model of `pipeline_time` with $R = t_{up}/t_{down}$, and the tuned echoed-GD bound
    (Theorem 7 [S]) as the measure of progress. The predicted wall-clock time is
    $T_\varepsilon(K)\,\max\{t_{up}, K t_{down}\}$. $T_\varepsilon(K)$ is strictly
    decreasing and $K\,T_\varepsilon(K)$ strictly increasing in $K$, so the time falls
    while $K \le R$ and rises after it. Over real $K \ge 1$:

    $$K^\star = \max\{1, R\}$$

    whatever $\varepsilon, \beta, \rho, D, B$. With ``integer=True`` (the default; step
    counts are whole) the answer is whichever of $\lfloor R\rfloor$ and
    $\lceil R\rceil$ has the smaller predicted time (ties: the smaller $K$, which
    costs fewer steps); this choice does depend on the constants. $R < 1$ gives 1.

    It is the optimum *of the bound's prediction*, not of a simulated run; it says
    that echoing past $R$ never pays under the bound, since the accelerator then
    becomes the bottleneck and the bound's total step count $K T_\varepsilon$ only grows.

    Source: derived here, see ``docs/background/bounds.md#wall-clock-optimal-echo-factor``.

    Examples
    --------
    >>> c = dict(eps=0.01, beta=1.0, rho=1.0, D=1.0, B=6400)
    >>> time_optimal_echo(**c, R=6.0)
    6.0
    >>> time_optimal_echo(**c, R=2.5), time_optimal_echo(**c, R=2.5, integer=False)
    (3.0, 2.5)
    >>> time_optimal_echo(**c, R=0.5)
    1.0
    """
    R = _v.positive("R", R)
    K_real = np.maximum(R, 1.0)
    if not integer:
        T_eps = np.asarray(batches_to_accuracy(eps, beta, rho, D, B, K_real))  # validates
        K_real, _ = _v.broadcast(K=K_real, others=T_eps)
        return _v.result(K_real)
    lo, hi = np.floor(K_real), np.ceil(K_real)
    t_lo = np.asarray(time_to_accuracy(eps, beta, rho, D, B, lo, t_up=R, t_down=1.0))
    t_hi = np.asarray(time_to_accuracy(eps, beta, rho, D, B, hi, t_up=R, t_down=1.0))
    return _v.result(np.where(t_hi < t_lo, hi, lo))


def echo_speedup_ceiling(eps, beta, rho, B, R=None):
    r"""Largest wall-clock speedup over $K = 1$ that the tuned GD bound predicts for echoing.

    Setting: as `time_optimal_echo`. The speedup is the ratio of predicted times to
    $\varepsilon$ (`time_to_accuracy`) at $K = 1$ and at the time-optimal $K$. With
    ``R=None`` the loader is arbitrarily slow ($R \to \infty$) and every $K$ is free;
    the ceiling is $T_\varepsilon(1)/\lim_{K\to\infty}T_\varepsilon(K)$:

    $$S_{\max} = \Bigl(\frac{1 + \sqrt{1 + \kappa}}{2}\Bigr)^2,\qquad
    \kappa = \frac{\beta B\varepsilon}{2\rho^2} = 8K_{\mathrm{sat}}$$

    ($D$ cancels). With a finite ``R`` ($\ge 1$) it is the predicted speedup at
    $K^\star$ = `time_optimal_echo`, at most $\min\{R, S_{\max}\}$ (and 1 when
    $R \le 1$).

    What it is a ceiling of: the improvement echoing brings to the bound's
    *guaranteed* time to $\varepsilon$. A particular problem can gain more, or less,
    than its worst case; see `minimax_speedup_ceiling` for a ceiling that holds for
    every method, echoed or not.

    Source: derived here from Theorem 7 [S], see
    ``docs/background/bounds.md#how-much-can-echoing-help``.

    Examples
    --------
    >>> round(echo_speedup_ceiling(eps=0.01, beta=1.0, rho=1.0, B=6400), 4)  # K_sat = 4
    11.3723
    >>> round(echo_speedup_ceiling(eps=0.01, beta=1.0, rho=1.0, B=6400, R=4.0), 4)
    2.8431
    """
    eps = _v.positive("eps", eps)
    beta, rho = _v.positive("beta", beta), _v.positive("rho", rho)
    B = _v.positive("B", B)
    kappa = beta * B * eps / (2 * rho**2)
    if R is None:
        return _v.result(((1 + np.sqrt(1 + kappa)) / 2) ** 2)
    R = _v.positive("R", R)
    K = np.asarray(time_optimal_echo(eps, beta, rho, 1.0, B, R))
    baseline = np.asarray(time_to_accuracy(eps, beta, rho, 1.0, B, 1.0, t_up=R, t_down=1.0))
    echoed = np.asarray(time_to_accuracy(eps, beta, rho, 1.0, B, K, t_up=R, t_down=1.0))
    return _v.result(baseline / echoed)


def minimax_speedup_ceiling(eps, beta, rho, D, B):
    r"""Ceiling on the improvement any method can make to synchronous SGD's guarantee.

    Setting: the class of `minimax_lower_bound` (convex, $\beta$-smooth,
    $\rho$-Lipschitz, $\lVert w_0 - w^\star\rVert \le D$) and a loader that
    delivers one batch of $B$ fresh examples every $t_{up} \ge t_{down}$ ($R \ge 1$).
    Synchronous SGD is guaranteed $\varepsilon$ after $T_\varepsilon(1)$ batches
    (`batches_to_accuracy` at $K = 1$), i.e. at time $T_\varepsilon(1)\,t_{up}$. By the
    lower bound, no method (any $K$, any $K_t$, any step size, any optimizer) can be
    guaranteed $\varepsilon$ on the whole class before
    $T_{\mathrm{LB}} = c^2/(B\varepsilon^2)$ batches, $c$ the constant of
    `minimax_lower_bound`, so never before $T_{\mathrm{LB}}\,t_{up}$:

    $$S_{\mathrm{minimax}} = \frac{T_\varepsilon(1)}{T_{\mathrm{LB}}}
    = \frac{B\varepsilon^2\,T_\varepsilon(1)}{c^2}$$

    It bounds the ratio of *worst-case guaranteed* times, not a speedup on one
    problem. It is loose by construction: the constants of the two bounds ($2\rho D$
    against $c \le \rho D/5$) already make it at least 100, so read it as a scaling
    statement (it grows like `echo_speedup_ceiling`, times that constant gap).

    Source: derived here, see ``docs/background/bounds.md#how-much-can-echoing-help``.

    Examples
    --------
    >>> round(minimax_speedup_ceiling(eps=0.01, beta=1.0, rho=1.0, D=4.0, B=6400), 1)
    2021.7
    """
    T1 = np.asarray(batches_to_accuracy(eps, beta, rho, D, B, 1.0))  # validates
    eps, beta, rho, D, B = (np.asarray(v, dtype=float) for v in (eps, beta, rho, D, B))
    c = _lower_bound_constant(beta, rho, D)
    return _v.result(T1 * B * eps**2 / c**2)
