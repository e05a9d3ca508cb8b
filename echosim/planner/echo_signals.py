"""What the records of the user's loop say about echoing itself, for the T(K, B) model:
the measured gradient-noise scale (the echo model's parameter) and, from paired next-batch
progress, how much a fresh batch's K steps move the loss on data they have not seen,
against K = 1.

Both read `echosim.loop.Records` and nothing else (the loop is not changed here):

- `measured_noise_scale`: ``Records.noise_scale()`` (McCandlish's tr Sigma / |G|^2 from
  gradient norms at two sizes), the median over the second half of each run that
  reported it: the noise scale where the target is reached, not at the start.
- `echo_gains`: for each (B, K) with both a fixed-K run and a sync run at the same B, the
  ratio of mean paired progress per fresh batch (``Records.paired_progress``: the loss
  of batch t+1 before and after batch t's steps) under K to that under K = 1, with its
  standard error in log. It is K_eff(K) of the echo model, measured: 1 where echoed
  steps only fit the batch's noise, K where each is worth a fresh one. It compares like
  with like only when the runs cover the same stretch of training (a pilot's interleaved
  segments do; two runs from the same start over the same number of batches roughly do).

Examples
--------
>>> measured_noise_scale([]) is None
True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["measured_noise_scale", "echo_gains"]


def _flat(records) -> list:
    from echosim.planner.recorded import _flatten

    if records is None or (isinstance(records, (list, tuple)) and not records):
        return []
    return [(B if B is not None else r.batch_size, r) for B, r in _flatten(records)]


def measured_noise_scale(records) -> float | None:
    """The median of ``Records.noise_scale()`` over the second half of the fresh batches of each
    run that reported gradient norms at two sizes (pooled); None if none did."""
    vals = []
    for _, r in _flat(records):
        ns = np.asarray(r.noise_scale(), dtype=float)
        tail = ns[ns.size // 2:]
        vals.extend(tail[np.isfinite(tail) & (tail > 0)])
    return float(np.median(vals)) if vals else None


def echo_gains(records, min_batches: int = 8) -> dict:
    """{(B, K): (K_eff, log standard error, n)} from paired progress: fixed-K runs against a sync
    run at the same B, each with at least `min_batches` finite paired-progress readings and a
    positive mean progress under sync. K_eff is clipped to [1/K, K] (no K steps are worth
    more than K fresh ones)."""
    by_b: dict = {}
    for B, r in _flat(records):
        if B is None or r.policy not in ("sync", "fixed"):
            continue
        K = 1 if r.policy == "sync" else int(r.echo)
        p = np.asarray(r.paired_progress, dtype=float)
        p = p[np.isfinite(p)]
        if p.size:
            by_b.setdefault(int(B), {}).setdefault(K, []).append(p)
    out = {}
    for B, per_k in by_b.items():
        if 1 not in per_k:
            continue
        base = np.concatenate(per_k[1])
        if base.size < min_batches or base.mean() <= 0:
            continue
        for K, parts in per_k.items():
            if K == 1:
                continue
            p = np.concatenate(parts)
            if p.size < min_batches:
                continue
            ratio = float(np.clip(p.mean() / base.mean(), 1.0 / K, float(K)))
            # delta method: var(log ratio) ~ var(p)/(n mean^2) + var(base)/(n_b mean_b^2)
            se = math.sqrt(p.var(ddof=1) / (p.size * max(p.mean(), 1e-300) ** 2) if p.mean() > 0 else math.inf
                           ) if p.size > 1 else math.inf
            se = math.hypot(se, math.sqrt(base.var(ddof=1) / (base.size * base.mean() ** 2)))
            out[(B, K)] = (ratio, se, int(p.size))
    return out
