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
through `echosim.profiling`).

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
>>> service_time_from_dict({"kind": "gamma", "mean": 8, "cv": 0.5}) == d
True
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "ServiceTime",
    "Deterministic",
    "Exponential",
    "Gamma",
    "LogNormal",
    "Pareto",
    "Stall",
    "Trace",
    "as_service_time",
    "service_time_from_dict",
]

# Draws that underflow to 0.0 (Gamma with a large cv, an exponential draw of exactly
# 0) are raised to the smallest normal float so every time is strictly positive.
# This moves the moments by less than 1e-300.
_TINY = np.finfo(np.float64).tiny

# A trace longer than this gets a short, non-round-trippable repr.
_TRACE_REPR_MAX = 8

_TRACE_MODES = ("cycle", "resample")
_TRACE_COLUMNS = ("time", "seconds")


# ---------------------------------------------------------------------------
# validation helpers: each raises ValueError naming the field and what is allowed


def _real(owner: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{owner}.{name} must be a real number, got {value!r}")
    return float(value)


def _positive(owner: str, name: str, value: Any) -> float:
    x = _real(owner, name, value)
    if not (math.isfinite(x) and x > 0.0):
        raise ValueError(f"{owner}.{name} must be finite and > 0, got {value!r}")
    return x


def _nonnegative(owner: str, name: str, value: Any) -> float:
    x = _real(owner, name, value)
    if not (math.isfinite(x) and x >= 0.0):
        raise ValueError(f"{owner}.{name} must be finite and >= 0, got {value!r}")
    return x


def _check_rng(rng: Any) -> None:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            "rng must be a numpy.random.Generator (e.g. np.random.default_rng(seed)), "
            f"got {type(rng).__name__}"
        )


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    return int(n)


def _check_times(owner: str, times: Any) -> np.ndarray:
    try:
        arr = np.asarray(times)
    except Exception as exc:  # ragged nested lists and the like
        raise ValueError(f"{owner}.times must be a 1-D array of numbers: {exc}") from None
    if arr.dtype.kind not in "iuf":
        raise ValueError(
            f"{owner}.times must be numeric (int or float), got dtype {arr.dtype}"
        )
    if arr.ndim != 1:
        raise ValueError(f"{owner}.times must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{owner}.times must hold at least one time, got an empty array")
    arr = np.array(arr, dtype=np.float64)  # always a private copy
    bad = ~(np.isfinite(arr) & (arr > 0.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{owner}.times must be finite and > 0; times[{i}] = {arr[i]!r} "
            f"({int(bad.sum())} bad value(s))"
        )
    arr.setflags(write=False)
    return arr


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
        _check_rng(rng)
        return self._sample(rng, _check_n(n))

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
        return self._scaled(_positive(type(self).__name__ + ".scaled", "c", c))

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
    value: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", _positive("Deterministic", "value", self.value))

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
    mean: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _positive("Exponential", "mean", self.mean))

    @property
    def variance(self) -> float:
        return self.mean**2

    def _sample(self, rng, n):
        return np.maximum(rng.exponential(self.mean, n), _TINY)

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
    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _positive("Gamma", "mean", self.mean))
        object.__setattr__(self, "cv", _nonnegative("Gamma", "cv", self.cv))

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
        return np.maximum(rng.gamma(self.alpha, self.theta, n), _TINY)

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
    mean: float
    cv: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _positive("LogNormal", "mean", self.mean))
        object.__setattr__(self, "cv", _nonnegative("LogNormal", "cv", self.cv))

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
        return np.maximum(rng.lognormal(self.mu, self.sigma, n), _TINY)

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
    mean: float
    shape: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "mean", _positive("Pareto", "mean", self.mean))
        shape = _real("Pareto", "shape", self.shape)
        if not (math.isfinite(shape) and shape > 1.0):
            raise ValueError(
                f"Pareto.shape must be finite and > 1 (finite mean), got {self.shape!r}"
            )
        object.__setattr__(self, "shape", shape)

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
        p = _real("Stall", "p", self.p)
        if not (0.0 <= p <= 1.0):
            raise ValueError(f"Stall.p must be in [0, 1], got {self.p!r}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "length", _positive("Stall", "length", self.length))

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


# ---------------------------------------------------------------------------
# measured times


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class Trace(ServiceTime):
    """Measured per-batch times, replayed in order or resampled.

    Parameters
    ----------
    times : array_like
        1-D, numeric, non-empty, every time finite and > 0. Stored as a read-only
        float64 copy.
    mode : {"cycle", "resample"}
        ``"cycle"`` replays the times in order: ``sample(rng, n)`` returns
        ``times[0], times[1], ...`` wrapping around, and ignores ``rng``. Each call
        starts again at ``times[0]`` (the object is stateless); pass ``start=`` or
        draw all the times you need in one call to continue a replay.
        ``"resample"`` draws i.i.d. with replacement from ``times``.

    Notes
    -----
    ``mean`` and ``variance`` are those of the empirical distribution (population
    variance, ddof = 0), for both modes.

    The repr of a trace of at most 8 times is round-trippable, e.g.
    ``Trace(times=(7.5, 8.5), mode='cycle')``. A longer trace prints a short summary,
    ``Trace(n=1000, mean=8.02, mode='cycle', digest='3f9a0c1e')``, which is **not** a
    valid constructor call; the digest (a hash of the times) keeps two traces with
    the same length and mean apart in result tables. To rebuild a long trace, use
    `to_dict` (which refers to the file it was read from, if any) or `to_file`.
    """

    kind: ClassVar[str] = "trace"
    times: np.ndarray
    mode: str = "cycle"
    # Where the times came from, (path, scale), so to_dict can refer to the file
    # instead of inlining every time. Not part of equality.
    source: tuple[str, float] | None = field(default=None, compare=False, repr=False)
    _mean: float = field(init=False, compare=False, repr=False)
    _variance: float = field(init=False, compare=False, repr=False)
    _digest: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        times = _check_times("Trace", self.times)
        if self.mode not in _TRACE_MODES:
            raise ValueError(f"Trace.mode must be one of {_TRACE_MODES}, got {self.mode!r}")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "_mean", float(times.mean()))
        object.__setattr__(self, "_variance", float(times.var()))
        digest = hashlib.blake2b(times.tobytes(), digest_size=4).hexdigest()
        object.__setattr__(self, "_digest", digest)

    @property
    def n(self) -> int:
        """Number of measured times."""
        return int(self.times.size)

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def variance(self) -> float:
        return self._variance

    def sample(self, rng: np.random.Generator, n: int, *, start: int = 0) -> np.ndarray:
        """Draw ``n`` times; in ``"cycle"`` mode begin the replay at ``times[start]``."""
        _check_rng(rng)
        n = _check_n(n)
        if isinstance(start, bool) or not isinstance(start, numbers.Integral) or start < 0:
            raise ValueError(f"start must be an integer >= 0, got {start!r}")
        if self.mode == "cycle":
            idx = (int(start) + np.arange(n)) % self.times.size
        else:
            idx = rng.integers(0, self.times.size, n)
        return self.times[idx]  # fancy indexing: a fresh, writable array

    def _sample(self, rng, n):
        return self.sample(rng, n)

    def _scaled(self, c):
        source = None if self.source is None else (self.source[0], self.source[1] * c)
        return Trace(self.times * c, self.mode, source=source)

    def fit(self, candidates=None):
        """Maximum-likelihood fits of parametric families; see
        `echosim.profiling.fit_service_times`."""
        from echosim.profiling import fit_service_times  # lazy: profiling imports us

        if candidates is None:
            return fit_service_times(self)
        return fit_service_times(self, candidates)

    # -- files and dicts ---------------------------------------------------

    @classmethod
    def from_file(
        cls, path, mode: str = "cycle", *, column: str | None = None, scale: float = 1.0
    ) -> Trace:
        """Read measured times from a ``.npy`` or ``.csv`` file.

        A ``.npy`` file holds a 1-D array (or an ``(n, 1)`` array, or a structured
        array with a field named ``time`` or ``seconds``). A ``.csv`` file holds one
        column of numbers, or several columns with a header naming one of them
        ``time`` or ``seconds`` (case-insensitive); the header is optional for a
        single column. Blank lines and lines starting with ``#`` are skipped.
        ``column`` picks another column by name; ``scale`` multiplies every time
        (e.g. to convert milliseconds to step units).
        """
        if mode not in _TRACE_MODES:
            raise ValueError(f"Trace.mode must be one of {_TRACE_MODES}, got {mode!r}")
        if column is not None and not isinstance(column, str):
            raise ValueError(f"Trace.column must be a column name (str), got {column!r}")
        scale = _positive("Trace", "scale", scale)
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"Trace.path: file {str(path)!r} does not exist")
        suffix = p.suffix.lower()
        if suffix == ".npy":
            times = _read_npy(p, column)
        elif suffix == ".csv":
            times = _read_csv(p, column)
        else:
            raise ValueError(
                f"Trace.path: unsupported file type {p.suffix!r} for {str(path)!r}; "
                "allowed: .npy, .csv"
            )
        times = _check_times(f"Trace (from {str(path)!r})", times)
        return cls(times * scale if scale != 1.0 else times, mode, source=(str(path), scale))

    def to_file(self, path) -> None:
        """Write the times to ``.npy`` or ``.csv`` (one column with header ``time``)."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix == ".npy":
            np.save(p, self.times, allow_pickle=False)
        elif suffix == ".csv":
            with open(p, "w", encoding="utf-8") as fh:
                fh.write("time\n")
                fh.writelines(f"{t!r}\n" for t in self.times.tolist())
        else:
            raise ValueError(f"path: unsupported file type {p.suffix!r}; allowed: .npy, .csv")

    def to_dict(self) -> dict[str, Any]:
        """``{"kind": "trace", "path": ..., "mode": ...}`` if read from a file
        (plus ``"scale"`` if scaled since), else the times inline."""
        if self.source is not None:
            path, scale = self.source
            d: dict[str, Any] = {"kind": self.kind, "path": path, "mode": self.mode}
            if scale != 1.0:
                d["scale"] = scale
            return d
        return {"kind": self.kind, "times": self.times.tolist(), "mode": self.mode}

    # -- value semantics (an ndarray field needs explicit eq/hash) -----------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return self.mode == other.mode and np.array_equal(self.times, other.times)

    def __hash__(self) -> int:
        return hash((Trace, self.mode, self._digest, self.times.size))

    def __repr__(self) -> str:
        if self.times.size <= _TRACE_REPR_MAX:
            return f"Trace(times={tuple(self.times.tolist())!r}, mode={self.mode!r})"
        return (
            f"Trace(n={self.times.size}, mean={self._mean:.4g}, mode={self.mode!r}, "
            f"digest={self._digest!r})"
        )


def _pick_column(names: list[str], column: str | None, where: str) -> int:
    lowered = [s.strip().strip('"').strip("'").lower() for s in names]
    wanted = (column.lower(),) if column is not None else _TRACE_COLUMNS
    for w in wanted:
        if w in lowered:
            return lowered.index(w)
    if column is None and len(names) == 1:
        return 0
    raise ValueError(
        f"Trace.column: {where} has columns {names}; need one named "
        f"{' or '.join(repr(w) for w in wanted)} (or pass column=...)"
    )


def _read_npy(p: Path, column: str | None) -> np.ndarray:
    try:
        arr = np.load(p, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"Trace.path: cannot read {str(p)!r} as .npy: {exc}") from None
    if arr.dtype.names:
        arr = arr[arr.dtype.names[_pick_column(list(arr.dtype.names), column, str(p))]]
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    return arr


def _read_csv(p: Path, column: str | None) -> np.ndarray:
    import csv  # stdlib; only needed here

    with open(p, newline="", encoding="utf-8") as fh:
        rows = [
            [cell.strip() for cell in row]
            for row in csv.reader(fh)
            if row and any(c.strip() for c in row) and not row[0].lstrip().startswith("#")
        ]
    if not rows:
        raise ValueError(f"Trace.times: {str(p)!r} holds no times")

    def is_number(s: str) -> bool:
        try:
            float(s)
        except ValueError:
            return False
        return True

    if all(is_number(c) for c in rows[0]):  # no header
        if column is not None:
            raise ValueError(f"Trace.column: {str(p)!r} has no header, cannot pick {column!r}")
        if len(rows[0]) != 1:
            raise ValueError(
                f"Trace.path: {str(p)!r} has {len(rows[0])} columns and no header; "
                f"add a header naming the times column {' or '.join(_TRACE_COLUMNS)}"
            )
        j, body, first_line = 0, rows, 1
    else:
        j, body, first_line = _pick_column(rows[0], column, repr(str(p))), rows[1:], 2
    out = np.empty(len(body), dtype=np.float64)
    for i, row in enumerate(body):
        try:
            out[i] = float(row[j])
        except (ValueError, IndexError):
            cell = row[j] if j < len(row) else "<missing>"
            raise ValueError(
                f"Trace.times: {str(p)!r} data row {i + first_line}: {cell!r} is not a number"
            ) from None
    return out


# ---------------------------------------------------------------------------
# coercion and dict round trip

_FAMILIES: dict[str, type[ServiceTime]] = {
    cls.kind: cls for cls in (Deterministic, Exponential, Gamma, LogNormal, Pareto, Stall, Trace)
}
_KEYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required keys, optional keys)
    "deterministic": (("value",), ()),
    "exponential": (("mean",), ()),
    "gamma": (("mean", "cv"), ()),
    "lognormal": (("mean", "cv"), ()),
    "pareto": (("mean", "shape"), ()),
    "stall": (("base", "p", "length"), ()),
    "trace": ((), ("path", "times", "mode", "column", "scale")),
}


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
        raise ValueError(f"service time dict needs a 'kind'; allowed: {sorted(_FAMILIES)}")
    kind = d["kind"]
    key = kind.lower() if isinstance(kind, str) else kind
    if key not in _FAMILIES:
        raise ValueError(f"unknown service time kind {kind!r}; allowed: {sorted(_FAMILIES)}")
    required, optional = _KEYS[key]
    given = set(d) - {"kind"}
    unknown = sorted(given - set(required) - set(optional))
    if unknown:
        raise ValueError(
            f"unknown key(s) {unknown} for kind {key!r}; allowed: {sorted(required + optional)}"
        )
    missing = [k for k in required if k not in given]
    if missing:
        raise ValueError(f"missing key(s) {missing} for kind {key!r}")
    args = {k: d[k] for k in given}
    if key == "trace":
        mode = args.get("mode", "cycle")
        if ("path" in args) == ("times" in args):
            raise ValueError("a trace dict needs exactly one of 'path' or 'times'")
        if "path" in args:
            return Trace.from_file(
                args["path"], mode, column=args.get("column"), scale=args.get("scale", 1.0)
            )
        if "column" in args:
            raise ValueError("Trace.column applies only with 'path'")
        trace = Trace(args["times"], mode)
        return trace.scaled(args["scale"]) if "scale" in args else trace
    return _FAMILIES[key](**args)


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
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return Deterministic(x)
    raise ValueError(
        "a service time must be a ServiceTime, a number > 0 or a dict with a 'kind', "
        f"got {x!r}"
    )
