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
  loss of batch t+1 before and after batch t's steps), against sync's at the same loss
  level (a line through sync's readings in the level: progress per batch changes as
  training goes on), where the loop reported it, else
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

__all__ = ["echo_gains", "measured_noise_scale", "resolved"]


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


def _paired(r, min_batches: int):
    """(mean paired next-batch progress, its variance, n, mean loss level, (levels, progress) of
    the readings) of one run, or None with fewer than `min_batches` readings. The level is the
    loss before the progress (the next batch's loss at the weights the batch started from):
    where training stands."""
    p = np.asarray(r.paired_progress, dtype=float)
    level = np.full(p.size, np.nan)
    if p.size > 1:
        level[:-1] = np.asarray(r.lagged_before, dtype=float)[1:]
    ok = np.isfinite(p)
    p = p[ok]
    if p.size >= min_batches:
        lvs = level[ok]
        lv = float(np.mean(lvs[np.isfinite(lvs)])) if np.isfinite(lvs).any() else math.nan
        return float(p.mean()), float(p.var(ddof=1) / p.size), int(p.size), lv, (lvs, p)
    return None


def _reference(base: list, levels: list) -> list:
    """Sync's progress per fresh batch at each loss level in `levels`: a least-squares line
    through the sync runs' readings (level, progress), evaluated at each level clipped to
    the levels the readings span; the pooled mean where they do not span two levels or the
    line is not positive there. Progress per batch changes as the loss falls, so runs from
    different stretches of training are compared with sync where sync stood at the same
    loss. The line goes through the single readings, not the runs' means: a pilot whose
    segments all start from the same weights (`pilot(reset=...)`) gives sync's segments one
    mean level, higher than K's, while their readings span the levels K's segments reach."""
    pooled = float(np.average([e[0] for e in base], weights=[e[2] for e in base]))
    L = np.concatenate([e[4][0] for e in base])
    m = np.concatenate([e[4][1] for e in base])
    ok = np.isfinite(L)
    L, m = L[ok], m[ok]
    if L.size < 3 or np.ptp(L) <= 0:
        return [pooled] * len(levels)
    Lc = float(np.mean(L))
    slope = float(np.sum((L - Lc) * (m - m.mean())) / np.sum((L - Lc) ** 2))
    out = []
    for lv in levels:
        ref = float(m.mean()) + slope * (float(np.clip(lv, L.min(), L.max())) - Lc) if math.isfinite(lv) else pooled
        out.append(ref if ref > 0 else pooled)
    return out


def _curve(r, window: int = 3) -> np.ndarray | None:
    """The run's first-step losses per fresh batch (first epoch only), NaN gaps filled forward,
    smoothed by a trailing mean over `window` readings; None with fewer than 4 readings."""
    fl = np.asarray(r.first_loss, dtype=float)
    if r.epoch.size and int(np.max(r.epoch)) > 0:  # later epochs: training losses, not the population's
        fl = fl[np.asarray(r.epoch) == 0]
    ok = np.isfinite(fl)
    if ok.sum() < 4:
        return None
    idx = np.maximum.accumulate(np.where(ok, np.arange(fl.size), -1))
    fl = np.where(idx >= 0, fl[np.maximum(idx, 0)], np.nan)[int(np.argmax(ok)):]
    c = np.concatenate([[0.0], np.cumsum(fl)])
    n = np.arange(1, fl.size + 1)
    lo = np.maximum(n - window, 0)
    return (c[n] - c[lo]) / (n - lo)


def _batches_to(curve: np.ndarray, level: float) -> float:
    hit = np.flatnonzero(curve <= level)
    return float(hit[0] + 1) if hit.size else math.inf


def _curve_gain(base: list, echoed: list, levels: int = 8):
    """(K_eff, log standard error, n) from loss curves: the fresh batches each run needs from a
    first loss level to lower ones that every run reaches, K = 1's over K's, the median over
    the levels."""
    curves = base + echoed
    top = max(float(np.max(c[:2])) for c in curves)  # above every early reading: no run is at it yet
    floor = max(float(np.min(c)) for c in curves)    # the lowest level every run reaches
    if not floor < top:
        return None
    Ls = np.linspace(top, floor, levels + 2)[1:]
    t1 = [np.mean([_batches_to(c, L) for c in base]) for L in Ls]
    tk = [np.mean([_batches_to(c, L) for c in echoed]) for L in Ls]
    ratios = []
    for j in range(1, Ls.size):  # batches from the first level to each lower one: start-up offsets cancel
        d1, dk = t1[j] - t1[0], tk[j] - tk[0]
        if math.isfinite(d1) and math.isfinite(dk) and d1 > 0 and dk > 0:
            ratios.append(d1 / dk)
    if len(ratios) < 3:
        return None
    lr = np.log(ratios)
    return float(np.exp(np.median(lr))), max(float(np.std(lr)), 0.15), int(sum(c.size for c in echoed))


def echo_gains(records, min_batches: int = 8) -> dict:
    """{(B, K): (K_eff, log standard error, n)}: fixed-K runs against sync runs at the same B.

    Where every run of the pair reported paired next-batch progress (`min_batches` readings
    or more), K_eff is the ratio of its mean under K to sync's at the same loss levels (sync's
    readings fitted by a line in the level, `_reference`; runs of one (B, K) averaged by their
    readings; standard error by the delta method). Otherwise it comes from the loss curves:
    the fresh batches each run needs to bring its (smoothed) first-step loss from a first
    level down to lower ones every run reaches, K = 1's over K's, the median over the levels
    (standard error: their
    spread, at least 0.15). Either is clipped to [1/K, K], and left out where it is not
    `resolved` (its 2-SE interval wider than [1, K]). Runs compare like with like when
    they cover the same stretch of training: a pilot's interleaved segments, or runs from the
    same start."""
    by_b: dict = {}
    for B, r in _flat(records):
        if B is None or r.echo is None:  # a run's K is its records' echo (1 under sync); None: K_t varied
            continue
        K = int(r.echo)
        by_b.setdefault(int(B), {}).setdefault(K, []).append(r)
    out = {}
    for B, per_k in by_b.items():
        if 1 not in per_k:
            continue
        base_p = [_paired(r, min_batches) for r in per_k[1]]
        base_c = [c for c in (_curve(r) for r in per_k[1]) if c is not None and c.size >= min_batches]
        for K, runs in per_k.items():
            if K == 1:
                continue
            ps = [_paired(r, min_batches) for r in runs]
            est = None
            if all(p is not None for p in ps + base_p):
                # K's progress against sync's at the same loss levels (`_reference`), readings-weighted
                refs = _reference(base_p, [e[3] for e in ps])
                n_k = np.array([e[2] for e in ps], dtype=float)
                m1 = float(np.average(refs, weights=n_k))
                v1 = float(np.sum([e[1] for e in base_p])) / len(base_p) ** 2
                mk = float(np.average([e[0] for e in ps], weights=n_k))
                vk = float(np.sum(n_k ** 2 * np.array([e[1] for e in ps]))) / n_k.sum() ** 2
                if m1 > 0:
                    se = math.sqrt(vk / mk ** 2 + v1 / m1 ** 2) if mk > 0 else math.sqrt(v1) / m1 + 1.0
                    est = (mk / m1, se, int(sum(e[2] for e in ps)))
            if est is None and base_c:
                cs = [c for c in (_curve(r) for r in runs) if c is not None and c.size >= min_batches]
                est = _curve_gain(base_c, cs) if cs else None
            if est is not None and resolved(est[1], K):
                out[(B, K)] = (float(np.clip(est[0], 1.0 / K, float(K))), est[1], est[2])
    return out


def resolved(log_se: float, K: int) -> bool:
    """Does a K_eff measurement with this log standard error say anything? Only if its 2-SE
    interval is narrower than the whole range from "echoed steps are worthless" (K_eff = 1)
    to "as good as fresh" (K_eff = K): log-SE <= log(K) / 2. A wider one is noise, and is
    left out rather than weighed (its clipped value would still move the fit).

    >>> resolved(0.3, 4), resolved(1.3, 4), resolved(0.5, 2)
    (True, False, False)
    """
    return math.isfinite(log_se) and log_se <= math.log(K) / 2
