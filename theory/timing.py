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
from theory.bounds import batches_to_accuracy

__all__ = ["pipeline_time", "echo_speedup", "time_to_accuracy"]


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
