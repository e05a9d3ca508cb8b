"""What the records of the user's loop say about echoing itself, for the T(K, B) model:
the measured gradient-noise scale (the echo model's parameter) and, from paired next-batch
progress, how much a fresh batch's K steps move the loss on data they have not seen,
against K = 1.

Both read `echosim.loop.Records` and nothing else (the loop is not changed here):

- `measured_noise_scale`: ``Records.noise_scale()`` (McCandlish's tr Sigma / |G|^2 from
  gradient norms at two sizes), the median over the second half of each run that
  reported it: the noise scale where the target is reached, not at the start.
- `echo_gains`: for each (B, K) with both a fixed-K run and a sync run at the same B, the
  ratio of the progress per fresh batch under K to that under K = 1, with its standard
  error in log: the mean paired next-batch progress (``Records.paired_progress``: the
  loss of batch t+1 before and after batch t's steps) where the loop reported it, else
  the slope of the run's first-step losses (the loss curve of a pilot's segment). It is K_eff(K) of the echo model, measured: 1 where echoed
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


def _progress(r, min_batches: int):
    """(progress per fresh batch, its variance, n, how) of one run: the mean paired next-batch
    progress where the loop reported it, else minus the slope of the first-step losses over the
    run (a loss curve: the same quantity, noisier); None if neither has `min_batches` readings."""
    p = np.asarray(r.paired_progress, dtype=float)
    p = p[np.isfinite(p)]
    if p.size >= min_batches:
        return float(p.mean()), float(p.var(ddof=1) / p.size), int(p.size), "paired"
    fl = np.asarray(r.first_loss, dtype=float)
    t = np.arange(fl.size, dtype=float)
    ok = np.isfinite(fl)
    if r.epoch.size and int(np.max(r.epoch)) > 0:  # later epochs: training losses, not the population's
        ok &= np.asarray(r.epoch) == 0
    if ok.sum() < max(min_batches, 3):
        return None
    t, fl = t[ok], fl[ok]
    slope, icpt = np.polyfit(t, fl, 1)
    resid = fl - (slope * t + icpt)
    var = float(resid.var(ddof=2) / np.sum((t - t.mean()) ** 2))
    return float(-slope), var, int(t.size), "curve"


def echo_gains(records, min_batches: int = 8) -> dict:
    """{(B, K): (K_eff, log standard error, n)}: fixed-K runs against sync runs at the same B.
    Each run's progress per fresh batch is its mean paired next-batch progress
    (``Records.paired_progress``) or, where the loop did not report it, minus the slope of its
    first-step losses (the loss curve of a pilot segment); runs of one (B, K) are averaged.
    Needs `min_batches` readings per run and a positive progress under sync. K_eff is clipped
    to [1/K, K] (no K steps are worth more than K fresh ones). Segments compare like with like
    when they cover the same stretch of training (a pilot's interleaved segments)."""
    by_b: dict = {}
    for B, r in _flat(records):
        if B is None or r.policy not in ("sync", "fixed"):
            continue
        est = _progress(r, min_batches)
        if est is not None:
            K = 1 if r.policy == "sync" else int(r.echo)
            by_b.setdefault(int(B), {}).setdefault(K, []).append(est)
    out = {}
    for B, per_k in by_b.items():
        if 1 not in per_k:
            continue
        m1 = float(np.mean([e[0] for e in per_k[1]]))
        v1 = float(np.sum([e[1] for e in per_k[1]])) / len(per_k[1]) ** 2
        if m1 <= 0:
            continue
        for K, ests in per_k.items():
            if K == 1:
                continue
            mk = float(np.mean([e[0] for e in ests]))
            vk = float(np.sum([e[1] for e in ests])) / len(ests) ** 2
            ratio = float(np.clip(mk / m1, 1.0 / K, float(K)))
            # delta method on log(mk / m1); a progress that is not positive under K is at the floor
            se = math.sqrt(vk / mk ** 2 + v1 / m1 ** 2) if mk > 0 else math.sqrt(v1) / m1 + 1.0
            out[(B, K)] = (ratio, se, int(sum(e[2] for e in ests)))
    return out
