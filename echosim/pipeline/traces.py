"""Measured service times: `Trace` (replayed or resampled), read from files, and
maximum-likelihood fits of the parametric families to them (`fit_service_times`).

Examples
--------
>>> import numpy as np
>>> from echosim.pipeline.service_times import Gamma
>>> x = Gamma(mean=8.0, cv=0.5).sample(np.random.default_rng(1), 2000)
>>> best = fit_service_times(x, candidates=("exponential", "gamma"))[0]
>>> type(best.dist).__name__
'Gamma'
"""

from __future__ import annotations

import hashlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from echosim._validate import check_int, check_real
from echosim.pipeline import service_times
from echosim.pipeline.sizes import check_file_size
from echosim.pipeline.service_times import (
    Deterministic,
    Exponential,
    Gamma,
    LogNormal,
    Pareto,
    ServiceTime,
    check_n,
    check_rng,
)

__all__ = ["Trace", "Fit", "fit_service_times", "FITTED"]

_TRACE_REPR_MAX = 8
_TRACE_MODES = ("cycle", "resample")
_TRACE_COLUMNS = ("time", "seconds")
MAX_TRACE_BYTES = 256 << 20
"""Bytes of a trace file (about 25 million times as text)."""


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
    keys: ClassVar[tuple] = ((), ("path", "times", "mode", "column", "scale"))
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
        with np.errstate(over="ignore", invalid="ignore"):
            mean, var = float(times.mean()), float(times.var())
        if not (math.isfinite(mean) and math.isfinite(var)):
            raise ValueError(f"Trace.times: times up to {times.max():.3g} overflow their mean or variance; "
                             "express them in a larger unit (scale=...)")
        object.__setattr__(self, "times", times)
        object.__setattr__(self, "_mean", mean)
        object.__setattr__(self, "_variance", var)
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
        check_rng(rng)
        n = check_n(n)
        check_int("start", start, lo=0)
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

    @classmethod
    def _from_args(cls, args: dict) -> Trace:
        mode = args.get("mode", "cycle")
        if ("path" in args) == ("times" in args):
            raise ValueError("a trace dict needs exactly one of 'path' or 'times'")
        if "path" in args:
            return cls.from_file(args["path"], mode, column=args.get("column"), scale=args.get("scale", 1.0))
        if "column" in args:
            raise ValueError("Trace.column applies only with 'path'")
        trace = cls(args["times"], mode)
        return trace.scaled(args["scale"]) if "scale" in args else trace

    def fit(self, candidates=None):
        """Maximum-likelihood fits of parametric families; see
        `echosim.pipeline.traces.fit_service_times`."""
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
        scale = check_real("Trace.scale", scale, lo=0.0, lo_open=True)
        p = Path(path)
        if not p.exists():
            raise ValueError(f"Trace.path: file {str(path)!r} does not exist")
        check_file_size(p, MAX_TRACE_BYTES, "Trace.path: file")  # not a directory, device or pipe
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
        """Write the times to ``.npy`` or ``.csv`` (one column with header ``time``), atomically."""
        from echosim._files import atomic_file

        p = Path(path)
        suffix = p.suffix.lower()
        if suffix not in (".npy", ".csv"):
            raise ValueError(f"path: unsupported file type {p.suffix!r}; allowed: .npy, .csv")
        with atomic_file(p) as fh:  # a temp file, fsync, rename: never half a trace, never through a link
            if suffix == ".npy":
                np.save(fh, self.times, allow_pickle=False)
            else:
                fh.write(b"time\n")
                fh.write("".join(f"{t!r}\n" for t in self.times.tolist()).encode("utf-8"))

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

    def _repr_html_(self) -> str:
        """A notebook's view: how many times, their mean, spread and range, the mode and the file."""
        import html

        t = self.times
        cv = math.sqrt(self._variance) / self._mean if self._mean > 0 else math.nan
        rows = [("times", f"{t.size}"), ("mean", f"{self._mean:.4g}"), ("cv (std / mean)", f"{cv:.3g}"),
                ("min / median / max", f"{t.min():.4g} / {float(np.median(t)):.4g} / {t.max():.4g}"),
                ("mode", "replayed in order (cycle)" if self.mode == "cycle" else "drawn with replacement (resample)")]
        if self.source is not None:
            rows.append(("read from", f"{self.source[0]}" + (f" (times x {self.source[1]:g})"
                                                             if self.source[1] != 1.0 else "")))
        rows.append(("digest", self._digest))
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        caption = "Trace (times in the pipeline's time unit; seconds in the planner)"
        return f"<table><caption>{caption}</caption>{body}</table>"

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




service_times.FAMILIES[Trace.kind] = Trace

FITTED = tuple(kind for kind, cls in service_times.FAMILIES.items() if cls.fit_params)
"""The families of `service_times.FAMILIES` that `fit_service_times` fits, in its default order."""


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
    candidates: Sequence[str] = FITTED,
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
        raise ValueError(f"candidates must name at least one of {FITTED}")
    unknown = [c for c in candidates if c not in FITTED]
    if unknown:
        raise ValueError(f"candidates: unknown family {unknown}; allowed: {list(FITTED)}")
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
        aic = 2.0 * service_times.FAMILIES[family].fit_params - 2.0 * ll
        fits.append(Fit(dist, ks, ll, aic))
    if not fits:
        raise ValueError(f"no family in {list(candidates)} could be fitted to these data")
    fits.sort(key=lambda f: (f.ks_statistic, f.aic))
    return fits
