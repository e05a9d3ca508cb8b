"""The optional signals of what an echoed step is worth, from a loop's records: the
gradient-noise scale, and the carry-over of an echoed step's progress to unseen data.

Gradient-noise scale (McCandlish et al. 2018, "An empirical model of large-batch
training", appendix A). With G the full gradient and Sigma the per-example gradient
covariance, a gradient averaged over b examples has E|g_b|^2 = |G|^2 + tr(Sigma)/b. From
the squared norms at two sizes b < B on the same step,

    |G|^2 ~ (B |g_B|^2 - b |g_b|^2) / (B - b),    tr(Sigma) ~ (|g_b|^2 - |g_B|^2) / (1/b - 1/B),

each unbiased; their ratio B_noise = tr(Sigma)/|G|^2 is not, so, as McCandlish et al. and
AdaptDL do, the two are averaged (exponentially, over about `memory` measurements)
before dividing. Where B << B_noise a step mostly follows the batch's noise: echoed
steps then fit that noise; where B >> B_noise they follow G and are nearly as good as
fresh ones (the echo model of docs/background/auto-echo.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["noise_scale", "carry_over"]


def noise_scale(B: int, small_batch, sq_small, sq_full, memory: int = 32) -> np.ndarray:
    """B_noise after each entry (NaN before the first measurement, or where the smoothed |G|^2
    is not positive yet). Entries with ``small_batch == 0`` are not measurements."""
    b = np.asarray(small_batch, dtype=float)
    s, f = np.asarray(sq_small, dtype=float), np.asarray(sq_full, dtype=float)
    out = np.full(b.size, np.nan)
    g2 = tr = None
    n = 0
    for t in range(b.size):
        if b[t] > 0 and np.isfinite(s[t]) and np.isfinite(f[t]) and b[t] < B:
            g2_t = (B * f[t] - b[t] * s[t]) / (B - b[t])
            tr_t = (s[t] - f[t]) / (1.0 / b[t] - 1.0 / B)
            n += 1
            w = max(1.0 / memory, 1.0 / n)
            g2 = g2_t if g2 is None else (1 - w) * g2 + w * g2_t
            tr = tr_t if tr is None else (1 - w) * tr + w * tr_t
        if g2 is not None and g2 > 0:
            out[t] = max(tr, 0.0) / g2
    return out


def carry_over(paired, seen, window: int = 8) -> np.ndarray:
    """The fraction of the progress batch t's steps made on batch t itself that carried over to
    unseen data (the next batch), summed over windows of `window` fresh batches:
    sum(paired progress) / sum(seen progress) per window (NaN where either is missing or the
    seen progress is not positive). Near 1 an echoed step generalises like a fresh one; near
    0 (or below) echoed steps fit the batch alone."""
    p, q = np.asarray(paired, dtype=float), np.asarray(seen, dtype=float)
    n = p.size // window
    out = np.full(n, np.nan)
    for i in range(n):
        sl = slice(i * window, (i + 1) * window)
        ok = np.isfinite(p[sl]) & np.isfinite(q[sl])
        if ok.sum() >= 2 and q[sl][ok].sum() > 0:
            out[i] = p[sl][ok].sum() / q[sl][ok].sum()
    return out
