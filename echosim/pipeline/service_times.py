"""Service-time processes: how long a loader worker (or the accelerator) needs per batch.

Each process is a small frozen value object, modelled on Ciw's
``ciw/dists/distributions.py``:

- ``sample(rng, n)`` draws ``n`` strictly positive float64 times from an explicit
  ``numpy.random.Generator`` (no global random state);
- ``mean`` and ``variance`` are exact (``math.inf`` where the variance is infinite);
- ``scaled(c)`` multiplies every time by ``c``, which is how a sweep varies how
  laggard the loader is (Choi et al.'s R = t_up / t_down);
- ``repr`` is a valid Python expression that rebuilds the object (except for long
  traces, see `Trace`) and is the name written into result tables;
- ``to_dict()`` / `service_time_from_dict` map to and from a TOML table such as
  ``{kind = "gamma", mean = 8, cv = 0.5}``.

Families are parametrised by what a systems engineer measures, the mean time per
batch and its variability:

==============================  =====================================================
``Deterministic(value)``        every batch takes ``value``
``Exponential(mean)``           memoryless; cv = 1
``Gamma(mean, cv)``             shape ``1/cv**2``, scale ``mean*cv**2``
``LogNormal(mean, cv)``         ``log T ~ Normal(mu, sigma)``, ``sigma**2 = log(1+cv**2)``
``Pareto(mean, shape)``         classic (type I) Pareto: heavy tail above a minimum
``Stall(base, p, length)``      ``base`` plus, with probability ``p``, a stall ``length``
``Trace(times, mode)``          measured per-batch times, replayed or resampled
==============================  =====================================================

Only NumPy is imported at module load (``scipy.stats`` is used lazily by `Trace.fit`
through `echosim.pipeline.profiling`).

Examples
--------
>>> import numpy as np
>>> d = Gamma(mean=8, cv=0.5)
>>> d
Gamma(mean=8.0, cv=0.5)
>>> d.mean, d.variance
(8.0, 16.0)
>>> d.scaled(0.5)
Gamma(mean=4.0, cv=0.5)
>>> d.sample(np.random.default_rng(0), 3).shape
(3,)
>>> as_service_time({"kind": "gamma", "mean": 8, "cv": 0.5}) == d
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

from echosim._validate import check_int, check_real, is_real

__all__ = [
    "FAMILIES",
    "as_service_time",
    "service_time_from_dict",
    "ServiceTime",
    "Deterministic",
    "Exponential",
    "Gamma",
    "LogNormal",
    "Pareto",
    "Stall",
]

FAMILIES: dict[str, type] = {}
"""The registry of service-time families, kind → class (`Trace` adds itself in its module)."""

# Draws that underflow to 0.0 (Gamma with a large cv, an exponential draw of exactly
# 0) are raised to the smallest normal float so every time is strictly positive.
# This moves the moments by less than 1e-300.
_TINY = np.finfo(np.float64).tiny


def _at_least_tiny(draws: np.ndarray) -> np.ndarray:
    """`draws` raised to `_TINY` where below, in place (a large draw needs no copy)."""
    return np.maximum(draws, _TINY, out=draws)



# ---------------------------------------------------------------------------
# validation: echosim._validate's checks, and the generator every draw takes


def check_rng(rng: Any) -> None:
    """`rng` must be a `numpy.random.Generator` (no global random state anywhere)."""
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def check_n(n: Any) -> int:
    """The number of draws: an integer >= 0."""
    return check_int("n", n, lo=0)


# ---------------------------------------------------------------------------
# the base class


@dataclass(frozen=True, slots=True, repr=False)
class ServiceTime:
    """Base class of service-time processes (time per batch, strictly positive).

    Subclasses provide ``mean`` (a field or a property: it is deliberately not
    declared here, because a base-class property would become the dataclass default
    of a subclass field named ``mean``), ``variance``, ``_sample`` and ``_scaled``.
    """

    kind: ClassVar[str] = ""
    keys: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = ((), ())
    """(required, optional) keys of the family's TOML table, besides ``kind``."""
    fit_params: ClassVar[int | None] = None
    """Free parameters when `echosim.pipeline.traces.fit_service_times` fits the family
    (for its AIC); None for a family it does not fit."""

    @classmethod
    def _from_args(cls, args: dict) -> ServiceTime:
        return cls(**args)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Draw ``n`` times.

        Parameters
        ----------
        rng : numpy.random.Generator
            The only source of randomness (no global state).
        n : int
            Number of times, ``n >= 0`` (``n = 0`` gives an empty array).

        Returns
        -------
        numpy.ndarray
            float64, shape ``(n,)``, every entry finite and > 0.
        """
        check_rng(rng)
        return self._sample(rng, check_n(n))

    def _sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        raise NotImplementedError

    @property
    def variance(self) -> float:
        """Exact variance (``math.inf`` if infinite)."""
        raise NotImplementedError

    def scaled(self, c: float) -> ServiceTime:
        """The same family with every time multiplied by ``c > 0``.

        The mean scales by ``c`` and the variance by ``c**2``; sweeping ``c`` varies
        how laggard the loader is relative to a fixed step time.
        """
        return self._scaled(check_real(type(self).__name__ + ".scaled.c", c, lo=0.0, lo_open=True))

    def _scaled(self, c: float) -> ServiceTime:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (TOML/JSON friendly) that `service_time_from_dict` inverts."""
        return {"kind": self.kind, **{f.name: getattr(self, f.name) for f in fields(self)}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServiceTime:
        """Build from a dict; on a subclass the ``kind`` key may be left out."""
        if cls is not ServiceTime and isinstance(d, Mapping) and "kind" not in d:
            d = {"kind": cls.kind, **d}
        out = service_time_from_dict(d)
        if not isinstance(out, cls):
            raise ValueError(
                f"{cls.__name__}.from_dict: kind {out.kind!r} is not a {cls.__name__}"
            )
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return f"{type(self).__name__}({args})"


# ---------------------------------------------------------------------------
# parametric families


@dataclass(frozen=True, slots=True, repr=False)
class Deterministic(ServiceTime):
    """Every batch takes exactly ``value`` (e.g. a steady accelerator step)."""

    kind: ClassVar[str] = "deterministic"
    fit_params: ClassVar[int] = 1
    keys: ClassVar[tuple] = (("value",), ())
    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", check_real("Deterministic.value", self.value, lo=0.0, lo_open=True))

    @property
    def mean(self) -> float:
        return self.value

    @property
    def variance(self) -> float:
        return 0.0

    def _sample(self, rng, n):
        return np.full(n, self.value, dtype=np.float64)

    def _scaled(self, c):
        return Deterministic(self.value * c)


@dataclass(frozen=True, slots=True, repr=False)
class Exponential(ServiceTime):
    """Memoryless times with the given ``mean`` (cv = 1)."""

    kind: ClassVar[str] = "exponential"
    fit_params: ClassVar[int] = 1
    keys: ClassVar[tuple] = (("mean",), ())
    mean: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_real("Exponential.mean", self.mean, lo=0.0, lo_open=True))

    @property
    def variance(self) -> float:
        return self.mean**2

    def _sample(self, rng, n):
        return _at_least_tiny(rng.exponential(self.mean, n))

    def _scaled(self, c):
        return Exponential(self.mean * c)


@dataclass(frozen=True, slots=True, repr=False)
class Gamma(ServiceTime):
    """Gamma times with the given ``mean`` and coefficient of variation ``cv``.

    Shape ``alpha = 1/cv**2``, scale ``theta = mean*cv**2``; ``cv = 1`` is the
    exponential. ``cv = 0`` is allowed and is the degenerate limit: every time equals
    ``mean`` (handy when a sweep runs cv over ``[0, 0.5, 1]``).
    """

    kind: ClassVar[str] = "gamma"
    fit_params: ClassVar[int] = 2
    keys: ClassVar[tuple] = (("mean", "cv"), ())
    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_real("Gamma.mean", self.mean, lo=0.0, lo_open=True))
        object.__setattr__(self, "cv", check_real("Gamma.cv", self.cv, lo=0.0))

    @property
    def alpha(self) -> float:
        """Shape parameter ``1/cv**2`` (``inf`` when ``cv = 0`` or ``cv**2`` underflows)."""
        cv2 = self.cv**2
        return math.inf if cv2 == 0.0 else 1.0 / cv2

    @property
    def theta(self) -> float:
        """Scale parameter ``mean*cv**2``."""
        return self.mean * self.cv**2

    @property
    def variance(self) -> float:
        return (self.mean * self.cv) ** 2

    def _sample(self, rng, n):
        if math.isinf(self.alpha):  # cv = 0, the degenerate limit
            return np.full(n, self.mean, dtype=np.float64)
        return _at_least_tiny(rng.gamma(self.alpha, self.theta, n))

    def _scaled(self, c):
        return Gamma(self.mean * c, self.cv)


@dataclass(frozen=True, slots=True, repr=False)
class LogNormal(ServiceTime):
    """Log-normal times with the given ``mean`` and coefficient of variation ``cv``.

    ``log T ~ Normal(mu, sigma**2)`` with ``sigma**2 = log(1 + cv**2)`` and
    ``mu = log(mean) - sigma**2/2``. ``cv = 0`` is the degenerate limit (every time
    equals ``mean``), as for `Gamma`.
    """

    kind: ClassVar[str] = "lognormal"
    fit_params: ClassVar[int] = 2
    keys: ClassVar[tuple] = (("mean", "cv"), ())
    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_real("LogNormal.mean", self.mean, lo=0.0, lo_open=True))
        object.__setattr__(self, "cv", check_real("LogNormal.cv", self.cv, lo=0.0))

    @property
    def sigma(self) -> float:
        """Standard deviation of ``log T``."""
        return math.sqrt(math.log1p(self.cv**2))

    @property
    def mu(self) -> float:
        """Mean of ``log T``."""
        return math.log(self.mean) - 0.5 * math.log1p(self.cv**2)

    @property
    def variance(self) -> float:
        return (self.mean * self.cv) ** 2

    def _sample(self, rng, n):
        if self.cv == 0.0:
            return np.full(n, self.mean, dtype=np.float64)
        return _at_least_tiny(rng.lognormal(self.mu, self.sigma, n))

    def _scaled(self, c):
        return LogNormal(self.mean * c, self.cv)


@dataclass(frozen=True, slots=True, repr=False)
class Pareto(ServiceTime):
    """Heavy-tailed times: the classic (type I) Pareto, not the Lomax.

    Every time is at least ``x_min = mean*(shape-1)/shape`` and
    ``P(T > t) = (x_min/t)**shape`` above it, so a batch never takes less than a
    floor and occasionally takes much longer. ``shape > 1`` is required for a finite
    mean; the variance ``mean**2 / (shape*(shape-2))`` is infinite for
    ``shape <= 2``. In SciPy terms: ``scipy.stats.pareto(b=shape, scale=x_min)``.
    """

    kind: ClassVar[str] = "pareto"
    fit_params: ClassVar[int] = 2
    keys: ClassVar[tuple] = (("mean", "shape"), ())
    mean: float
    shape: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", check_real("Pareto.mean", self.mean, lo=0.0, lo_open=True))
        shape = self.shape
        if not (is_real(shape) and math.isfinite(shape) and shape > 1.0):
            raise ValueError(
                f"Pareto.shape must be finite and > 1 (finite mean), got {self.shape!r}"
            )
        object.__setattr__(self, "shape", float(shape))

    @property
    def x_min(self) -> float:
        """The minimum time (Pareto scale), ``mean*(shape-1)/shape``."""
        return self.mean * (self.shape - 1.0) / self.shape

    @property
    def variance(self) -> float:
        if self.shape <= 2.0:
            return math.inf
        return self.mean**2 / (self.shape * (self.shape - 2.0))

    def _sample(self, rng, n):
        # log(T/x_min) ~ Exponential(rate=shape): exact and never below x_min.
        return self.x_min * np.exp(rng.standard_exponential(n) / self.shape)

    def _scaled(self, c):
        return Pareto(self.mean * c, self.shape)


@dataclass(frozen=True, slots=True, repr=False)
class Stall(ServiceTime):
    """Bursty times: a time from ``base``, plus a stall of ``length`` with probability ``p``.

    Models a loader that is usually steady but sometimes blocks (a cache miss, a
    remote read, a garbage collection). The stall is independent of the base time,
    so ``mean = base.mean + p*length`` and
    ``variance = base.variance + p*(1-p)*length**2`` exactly. ``base`` may be given
    as a number (a `Deterministic` time).
    """

    kind: ClassVar[str] = "stall"
    keys: ClassVar[tuple] = (("base", "p", "length"), ())
    base: ServiceTime
    p: float
    length: float

    def __post_init__(self) -> None:
        base = self.base
        if isinstance(base, Mapping):
            base = service_time_from_dict(base)
        elif not isinstance(base, ServiceTime):
            try:
                base = as_service_time(base)
            except ValueError:
                raise ValueError(
                    "Stall.base must be a ServiceTime or a positive number, "
                    f"got {self.base!r}"
                ) from None
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "p", check_real("Stall.p", self.p, lo=0.0, hi=1.0))
        object.__setattr__(self, "length", check_real("Stall.length", self.length, lo=0.0, lo_open=True))

    @property
    def mean(self) -> float:
        return self.base.mean + self.p * self.length

    @property
    def variance(self) -> float:
        return self.base.variance + self.p * (1.0 - self.p) * self.length**2

    def _sample(self, rng, n):
        out = self.base.sample(rng, n)
        out += self.length * (rng.random(n) < self.p)
        return out

    def _scaled(self, c):
        return Stall(self.base.scaled(c), self.p, self.length * c)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "base": self.base.to_dict(), "p": self.p, "length": self.length}


FAMILIES.update({cls.kind: cls for cls in (Exponential, Gamma, LogNormal, Pareto, Deterministic, Stall)})


# ---------------------------------------------------------------------------
# coercion and dict round trip


def service_time_from_dict(d: Mapping[str, Any]) -> ServiceTime:
    """Build a service time from a dict such as ``{"kind": "gamma", "mean": 8, "cv": 0.5}``.

    ``kind`` is one of ``deterministic, exponential, gamma, lognormal, pareto, stall,
    trace`` (case-insensitive). A stall's ``base`` is itself such a dict or a number.
    A trace takes ``path`` (a .npy/.csv file, see `Trace.from_file`) or ``times``,
    and optionally ``mode``, ``column`` and ``scale``. Unknown kinds, unknown keys and
    missing keys raise ValueError naming them and listing the allowed ones.
    """
    if not isinstance(d, Mapping):
        raise ValueError(f"a service time dict must be a mapping, got {type(d).__name__}")
    if "kind" not in d:
        raise ValueError(f"service time dict needs a 'kind'; allowed: {sorted(FAMILIES)}")
    kind = d["kind"]
    key = kind.lower() if isinstance(kind, str) else kind
    if key not in FAMILIES:
        raise ValueError(f"unknown service time kind {kind!r}; allowed: {sorted(FAMILIES)}")
    required, optional = FAMILIES[key].keys
    given = set(d) - {"kind"}
    unknown = sorted(given - set(required) - set(optional))
    if unknown:
        raise ValueError(
            f"unknown key(s) {unknown} for kind {key!r}; allowed: {sorted(required + optional)}"
        )
    missing = [k for k in required if k not in given]
    if missing:
        raise ValueError(f"missing key(s) {missing} for kind {key!r}")
    return FAMILIES[key]._from_args({k: d[k] for k in given})


def as_service_time(x: Any) -> ServiceTime:
    """Coerce ``x`` into a service time.

    A `ServiceTime` is returned as is, a positive finite number becomes
    `Deterministic` (so ``step_time=1.0`` works), and a mapping goes through
    `service_time_from_dict`.

    >>> as_service_time(1.0)
    Deterministic(value=1.0)
    """
    if isinstance(x, ServiceTime):
        return x
    if isinstance(x, Mapping):
        return service_time_from_dict(x)
    if is_real(x):
        return Deterministic(x)
    raise ValueError(
        "a service time must be a ServiceTime, a number > 0 or a dict with a 'kind', "
        f"got {x!r}"
    )
