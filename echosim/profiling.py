"""Measure a real data loader and fit service-time families to what it does.

Two steps turn "my loader" into something echosim can simulate:

1. `profile` times how long an iterable (a ``torch.utils.data.DataLoader``, a
   ``tf.data`` iterator, any generator) takes to hand over each batch, giving a
   `~echosim.arrivals.Trace` that the simulator can replay directly;
2. `fit_service_times` fits parametric families to those times by maximum
   likelihood, so a sweep can vary the mean (``dist.scaled(c)``) or the variability
   of a distribution that looks like the measured one.

Examples
--------
>>> import numpy as np
>>> from echosim.arrivals import Gamma
>>> x = Gamma(mean=8.0, cv=0.5).sample(np.random.default_rng(1), 2000)
>>> best = fit_service_times(x, candidates=("exponential", "gamma"))[0]
>>> type(best.dist).__name__
'Gamma'
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from echosim.arrivals import (
    Deterministic,
    Exponential,
    Gamma,
    LogNormal,
    Pareto,
    ServiceTime,
    Trace,
    _check_times,
)

__all__ = ["Fit", "profile", "fit_service_times", "FAMILIES"]

#: Families `fit_service_times` knows, in its default order.
FAMILIES = ("exponential", "gamma", "lognormal", "pareto", "deterministic")

# Free parameters per family, for the AIC.
_N_PARAMS = {"exponential": 1, "gamma": 2, "lognormal": 2, "pareto": 2, "deterministic": 1}


def profile(
    iterable: Iterable,
    n: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 0,
    mode: str = "cycle",
) -> Trace:
    """Time how long ``iterable`` takes to produce each of its first ``n`` batches.

    Only the ``next()`` call is timed. Creating the iterator (``iter()``, e.g.
    starting worker processes), the warm-up batches and anything done between two
    ``next()`` calls (a consumer's training step; here only this function's
    bookkeeping) are not counted. The result is the time a consumer that is never the
    bottleneck waits for each batch. With a prefetching loader (several workers, a
    buffer) that is the *delivery* interval, not one worker's time per batch: profile
    with one worker and no prefetch to get the per-worker service times that
    `echosim.pipeline` expects.

    Parameters
    ----------
    iterable : iterable
        Anything ``iter()`` accepts. Its items are consumed and discarded.
    n : int
        Number of batches to time, ``n >= 1``.
    clock : callable, default time.perf_counter
        Returns the current time in seconds; injectable for tests.
    warmup : int, default 0
        Batches fetched first and not timed (a DataLoader's first batch includes
        starting its workers).
    mode : {"cycle", "resample"}
        Mode of the returned `Trace`.

    Returns
    -------
    Trace
        The ``n`` measured times, in seconds, in the order they were produced.

    Raises
    ------
    ValueError
        ``n < 1`` or ``warmup < 0``; the iterable yields nothing after the warm-up;
        the clock returns a non-positive duration (too coarse or not monotonic).

    Warns
    -----
    RuntimeWarning
        If the iterable is exhausted after ``1 <= k < n`` timed batches: the trace
        holds those ``k`` times (note `fit_service_times` needs at least 2).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, numbers.Integral) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not callable(clock):
        raise ValueError(f"clock must be a callable returning seconds, got {clock!r}")
    if mode not in ("cycle", "resample"):
        raise ValueError(f"mode must be one of ('cycle', 'resample'), got {mode!r}")

    it = iter(iterable)
    for k in range(warmup):
        try:
            next(it)
        except StopIteration:
            raise ValueError(
                f"iterable: exhausted during warm-up after {k} of {warmup} batches"
            ) from None

    times: list[float] = []
    for _ in range(n):
        t0 = clock()
        try:
            next(it)
        except StopIteration:
            break
        times.append(clock() - t0)

    if not times:
        raise ValueError("iterable: yielded no batch to time (it is empty after warm-up)")
    bad = [i for i, t in enumerate(times) if not t > 0.0]
    if bad:
        raise ValueError(
            f"clock: batch {bad[0]} took {times[bad[0]]!r} s; every duration must be > 0 "
            "(the clock is too coarse or not monotonic)"
        )
    if len(times) < n:
        warnings.warn(
            f"profile: iterable was exhausted after {len(times)} of n={n} batches; "
            "the trace holds only those",
            RuntimeWarning,
            stacklevel=2,
        )
    return Trace(np.asarray(times, dtype=np.float64), mode)


@dataclass(frozen=True, slots=True)
class Fit:
    """One fitted family.

    Attributes
    ----------
    dist : ServiceTime
        The fitted distribution (its repr names it in tables).
    ks_statistic : float
        Kolmogorov–Smirnov distance sup |F_n − F| between the data and ``dist``
        (smaller is better; no p-value, since the parameters were estimated from
        the same data).
    log_likelihood : float
        Log-likelihood of the data under ``dist`` (``-inf`` for a point mass and
        non-constant data, ``+inf`` for a point mass at constant data).
    aic : float
        Akaike information criterion ``2k - 2 log L`` (k free parameters).
    """

    dist: ServiceTime
    ks_statistic: float
    log_likelihood: float
    aic: float


def _scipy_frozen(dist: ServiceTime):
    """The scipy.stats distribution equal to a parametric ``dist`` (loc = 0)."""
    from scipy import stats

    if isinstance(dist, Exponential):
        return stats.expon(scale=dist.mean)
    if isinstance(dist, Gamma):
        return stats.gamma(a=dist.alpha, scale=dist.theta)
    if isinstance(dist, LogNormal):
        return stats.lognorm(s=dist.sigma, scale=math.exp(dist.mu))
    if isinstance(dist, Pareto):
        return stats.pareto(b=dist.shape, scale=dist.x_min)
    raise ValueError(f"no scipy.stats equivalent for {dist!r}")  # pragma: no cover


def _fit_one(family: str, x: np.ndarray) -> ServiceTime:
    from scipy import stats

    if family == "exponential":
        return Exponential(float(x.mean()))  # the MLE of the mean
    if family == "deterministic":
        return Deterministic(float(x.mean()))  # point mass at the mean (no MLE exists)
    if family == "gamma":
        a, _, scale = stats.gamma.fit(x, floc=0)
        return Gamma(mean=float(a * scale), cv=float(1.0 / math.sqrt(a)))
    if family == "lognormal":
        s, _, scale = stats.lognorm.fit(x, floc=0)
        mean = float(scale) * math.exp(0.5 * s * s)
        return LogNormal(mean=mean, cv=math.sqrt(math.expm1(s * s)))
    if family == "pareto":
        b, _, scale = stats.pareto.fit(x, floc=0)
        if not b > 1.0:
            raise ValueError(f"fitted Pareto shape {b:.3g} <= 1 (infinite mean)")
        dist = Pareto(mean=float(b * scale / (b - 1.0)), shape=float(b))
        # x_min is recomputed from the mean; keep it <= min(x) despite rounding, or
        # the smallest time would get zero density.
        while dist.x_min > x.min():
            dist = Pareto(mean=math.nextafter(dist.mean, 0.0), shape=dist.shape)
        return dist
    raise AssertionError(family)  # pragma: no cover


def _score(dist: ServiceTime, x: np.ndarray) -> tuple[float, float]:
    """(KS statistic, log-likelihood) of the data ``x`` under ``dist``."""
    from scipy import stats

    if isinstance(dist, Deterministic):
        v = dist.value
        ks = max(float(np.mean(x < v)), float(np.mean(x > v)))
        ll = math.inf if np.all(x == v) else -math.inf
        return ks, ll
    frozen = _scipy_frozen(dist)
    ks = float(stats.kstest(x, frozen.cdf).statistic)
    ll = float(np.sum(frozen.logpdf(x)))
    return ks, ll


def fit_service_times(
    trace_or_array: Trace | np.ndarray | Sequence[float],
    candidates: Sequence[str] = FAMILIES,
) -> list[Fit]:
    """Fit each candidate family by maximum likelihood and rank the fits.

    Parameters
    ----------
    trace_or_array : Trace or array_like
        At least 2 measured times, all finite and > 0.
    candidates : sequence of str
        Families to try, from ``exponential, gamma, lognormal, pareto,
        deterministic``. Fits use ``scipy.stats`` with ``loc`` fixed at 0; the
        Pareto is the classic one, so its fitted minimum is the smallest time.
        ``deterministic`` is the point mass at the sample mean.

    Returns
    -------
    list of Fit
        Sorted by KS statistic (best first), ties broken by AIC. A family whose
        fit does not exist for these data (constant data for gamma, lognormal and
        pareto; a Pareto shape <= 1) is left out with a RuntimeWarning.

    Notes
    -----
    Nested families fit alike: data from an exponential are fitted just as well by
    a gamma with cv near 1, and the extra parameter usually gives the gamma a
    slightly smaller KS statistic. Compare AICs, or restrict ``candidates``, when
    the question is "is it exponential?".
    """
    if isinstance(candidates, str):
        candidates = (candidates,)
    candidates = tuple(candidates)
    if not candidates:
        raise ValueError(f"candidates must name at least one of {FAMILIES}")
    unknown = [c for c in candidates if c not in FAMILIES]
    if unknown:
        raise ValueError(f"candidates: unknown family {unknown}; allowed: {list(FAMILIES)}")
    x = (
        trace_or_array.times
        if isinstance(trace_or_array, Trace)
        else _check_times("trace_or_array", trace_or_array)
    )
    if x.size < 2:
        raise ValueError(f"trace_or_array must hold at least 2 times to fit, got {x.size}")

    constant = bool(np.all(x == x[0]))
    fits: list[Fit] = []
    for family in dict.fromkeys(candidates):  # unique, in order
        if constant and family in ("gamma", "lognormal", "pareto"):
            warnings.warn(
                f"fit_service_times: data are constant; no {family} fit", RuntimeWarning, 2
            )
            continue
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                dist = _fit_one(family, x)
                ks, ll = _score(dist, x)
        except Exception as exc:  # a family that cannot describe the data is skipped
            warnings.warn(f"fit_service_times: no {family} fit: {exc}", RuntimeWarning, 2)
            continue
        aic = 2.0 * _N_PARAMS[family] - 2.0 * ll
        fits.append(Fit(dist, ks, ll, aic))
    if not fits:
        raise ValueError(f"no family in {list(candidates)} could be fitted to these data")
    fits.sort(key=lambda f: (f.ks_statistic, f.aic))
    return fits
