"""One rule for choosing among echo factors (or any candidates) by time to target: the
sweep's answer (`report.in_words`) and the planner's recommendation both use it.

The rule, in order:

1. **Robust, not best in the median.** Each candidate is scored by an upper quantile of
   its time over seeds (`QUANTILE`, the 75th percentile; inf where a seed never reached
   the target): a K that is fastest in the median but on a quarter of the seeds needs
   as long as no echoing is not chosen for its median.
2. **The fastest within the noise.** Every candidate whose score is within `TOLERANCE`
   (3%) of the best score, or within the best one's own seed noise (its standard error
   of the median, from the interquartile range), is as fast as the fastest.
3. **Then the fewest steps.** Among those, the one with the fewest optimizer steps (the
   accelerator's work); with as many steps, the one given first (callers list the
   simplest first: K ascending, sync before greedy), since a difference within the noise
   is no reason for the more complex choice.

With one value per candidate (no seeds) the rule is: the fewest steps within 3% of the
fastest.

Examples
--------
>>> times = [[40.0, 41, 42, 39], [32.0, 32.5, 60, 33], [33.5, 33, 34, 33]]   # K = 1, 8, 4 over 4 seeds
>>> c = choose(times, steps=[40, 264, 134])
>>> c.index, c.fastest_median        # K = 4: K = 8 is faster in the median, not on its slow seed
(2, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["choose", "Choice", "TOLERANCE", "QUANTILE", "spread"]

TOLERANCE = 0.03
"""Relative difference in time below which two candidates are as fast as each other."""
QUANTILE = 0.75
"""The quantile over seeds that scores a candidate (robust: a bad quarter of seeds counts)."""


def _values(t) -> np.ndarray:
    v = np.atleast_1d(np.asarray(t, dtype=float)).ravel()
    return np.where(np.isnan(v), np.inf, v)


def _q(v: np.ndarray, q: float) -> float:
    """Quantile letting +inf (never reached) through."""
    big = np.finfo(float).max / 4
    x = float(np.quantile(np.where(np.isinf(v), big, v), q))
    return math.inf if x >= big / 2 else x


def spread(t) -> tuple[float, float]:
    """(10%, 90%) quantiles of a candidate's times over seeds (inf: never)."""
    v = _values(t)
    return _q(v, 0.1), _q(v, 0.9)


@dataclass(frozen=True)
class Choice:
    """What `choose` found.

    index : the chosen candidate
    fastest_median : the candidate with the shortest median time (may differ from `index`)
    scores : the robust score of each candidate (the `QUANTILE` of its times)
    near : the candidates as fast as the fastest, within the noise
    why : "fastest", "fewer steps" (within the noise of a faster one), "simpler" (as many
        steps as a faster one within the noise, and given before it) or "robust" (the
        median's fastest is slower on a quarter of its seeds)
    """

    index: int
    fastest_median: int
    scores: tuple
    near: tuple
    why: str


def choose(times, steps, *, tolerance: float = TOLERANCE, quantile: float = QUANTILE) -> Choice:
    """The rule above. `times`: per candidate, its time to target (a number, or one per seed;
    inf or NaN: never); `steps`: per candidate, its optimizer steps to target (a number, or one
    per seed: the median is used). ValueError if no candidate is given or their counts differ."""
    if len(times) == 0 or len(times) != len(steps):
        raise ValueError(f"choose: expected as many step counts as times (at least one), got {len(times)} "
                         f"and {len(steps)}")
    vals = [_values(t) for t in times]
    n_steps = [_q(_values(s), 0.5) for s in steps]
    medians = [_q(v, 0.5) for v in vals]
    scores = [_q(v, quantile) if v.size > 1 else float(v[0]) for v in vals]
    best = int(np.argmin(scores))
    fastest_median = int(np.argmin(medians))
    if not math.isfinite(scores[best]):
        return Choice(fastest_median, fastest_median, tuple(scores), (), "fastest")
    v = vals[best]
    noise = 0.0
    if v.size > 3 and np.isfinite(v).all():  # standard error of a median ~ 1.25 sigma / sqrt(n), sigma ~ IQR / 1.35
        noise = 1.25 * (np.quantile(v, 0.75) - np.quantile(v, 0.25)) / 1.35 / math.sqrt(v.size) / scores[best]
    limit = scores[best] * (1.0 + max(tolerance, noise))
    near = tuple(i for i, s in enumerate(scores) if s <= limit)
    pick = min(near, key=lambda i: (n_steps[i], i))
    if pick != best:
        why = "fewer steps" if n_steps[pick] < n_steps[best] else "simpler"
    elif pick != fastest_median and medians[pick] > medians[fastest_median] * (1.0 + tolerance):
        why = "robust"
    else:
        why = "fastest"
    return Choice(pick, fastest_median, tuple(scores), near, why)
