"""The planner's timing inputs: durations with units, service-time specs as text
(``gamma(mean=80ms, cv=0.5)``), measured traces, and times per batch that are affine
in the batch size (a + b·B, fitted from measurements at two or more batch sizes): the
loader's and the step's; and each candidate's timing (`candidate_timing`), from these
specs or from the records of the user's own run.

Every time is in seconds inside the planner. Text must carry a unit (``ns``, ``us``,
``ms``, ``s``, ``min``, ``h``): ``"10"`` is refused, since a step of 10 s and one of 10
ms give opposite advice; a Python number means seconds.

Examples
--------
>>> parse_duration("80ms", "loader")
0.08
>>> parse_service_time("gamma(mean=80ms, cv=0.5)", "loader")
Gamma(mean=0.08, cv=0.5)
>>> parse_service_time("10ms", "step_time")
Deterministic(value=0.01)
>>> m = fit_loader({64: [0.03, 0.03], 256: [0.09, 0.09]})
>>> round(m.intercept, 4), round(m.per_example, 7)
(0.01, 0.0003125)
>>> step = as_time_model({64: "15ms", 512: "40ms"}, "step_time")
>>> format_duration(step.mean_at(256))
'25.7 ms'

"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from echosim._validate import check_int
from echosim.pipeline.batch_time import affine_fit
from echosim.pipeline.model import POLICIES
from echosim.pipeline.service_times import FAMILIES, ServiceTime, as_service_time
from echosim.pipeline.traces import Trace

__all__ = ["UNITS", "parse_duration", "parse_service_time", "TimeModel", "fit_loader", "fit_times", "as_loader",
           "as_time_model", "format_duration", "format_count", "CandidateTiming", "candidate_timing"]

UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0}
"""Time units accepted in text input, in seconds."""

_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_DURATION = re.compile(rf"^\s*({_NUMBER})\s*([a-zA-Zµ]*)\s*$")
_CALL = re.compile(r"^\s*([a-zA-Z_]+)\s*\((.*)\)\s*$", re.S)

# parameters of each family that are times (take units); the others are dimensionless
_TIME_PARAMS = {"deterministic": ("value",), "exponential": ("mean",), "gamma": ("mean",),
                "lognormal": ("mean",), "pareto": ("mean",), "stall": ("base", "length")}
_POSITIONAL = {"deterministic": ("value",), "exponential": ("mean",), "gamma": ("mean", "cv"),
               "lognormal": ("mean", "cv"), "pareto": ("mean", "shape"), "stall": ("base", "p", "length")}


def parse_duration(text, name: str) -> float:
    """A duration in seconds from ``"80ms"``, ``"0.08 s"``, ``"1.5e-3 s"`` or a number (seconds).

    Raises ValueError naming `name` if the text is not a finite positive time with a
    known unit (text without a unit is refused: is ``"10"`` seconds or milliseconds?).
    """
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        value = float(text)
        unit = "s"
    else:
        m = _DURATION.match(str(text))
        if not m:
            raise ValueError(f"{name}: cannot read {text!r} as a time; expected a number with a unit "
                             f"({', '.join(u for u in UNITS if u != 'µs')}), e.g. '80ms'")
        value, unit = float(m.group(1)), m.group(2)
        if not unit:
            raise ValueError(f"{name}: {text!r} has no unit; write e.g. '{m.group(1)}ms' or '{m.group(1)}s'")
        if unit not in UNITS:
            raise ValueError(f"{name}: unknown time unit {unit!r} in {text!r}; allowed: "
                             f"{', '.join(u for u in UNITS if u != 'µs')}")
    seconds = value * UNITS[unit]
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{name}: a time must be finite and > 0, got {text!r}")
    return seconds


def split_args(body: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in body:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts]


def _read_trace(args: dict, name: str) -> Trace:
    path = args.pop("path", None)
    unit = args.pop("unit", "s")
    mode = args.pop("mode", "resample")
    if args:
        raise ValueError(f"{name}: trace(...) takes path, unit and mode; got {', '.join(args)}")
    if path is None:
        raise ValueError(f"{name}: trace(...) needs a path, e.g. trace(times.csv, unit=ms)")
    if unit not in UNITS:
        raise ValueError(f"{name}: unknown time unit {unit!r} for the trace; allowed: "
                         f"{', '.join(u for u in UNITS if u != 'µs')}")
    try:
        return Trace.from_file(path, mode=mode, scale=UNITS[unit])
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def parse_service_time(spec, name: str) -> ServiceTime:
    """A service time (seconds) from text, a number, a dict, a ServiceTime or a Trace.

    Text forms: a duration (``"10ms"``: every batch takes it), a family call with
    keyword or positional arguments (``"gamma(mean=80ms, cv=0.5)"``,
    ``"exponential(80ms)"``, ``"stall(base=50ms, p=0.05, length=1s)"``), a trace
    (``"trace(loader.csv, unit=ms)"``, ``mode=resample`` by default) or the path of a
    ``.csv``/``.npy`` file of times in seconds. Bad input raises ValueError naming `name`.
    """
    if isinstance(spec, ServiceTime):
        return spec
    if isinstance(spec, Mapping) or (isinstance(spec, numbers.Real) and not isinstance(spec, bool)):
        try:
            return as_service_time(spec)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    if not isinstance(spec, str):
        raise ValueError(f"{name}: expected a time, a distribution like 'gamma(mean=80ms, cv=0.5)' or a "
                         f"trace file, got {type(spec).__name__}")
    text = spec.strip()
    if _DURATION.match(text):
        return as_service_time(parse_duration(text, name))
    if text.lower().endswith((".csv", ".npy")) and "(" not in text:
        return _read_trace({"path": text}, name)
    m = _CALL.match(text)
    if not m:
        raise ValueError(f"{name}: cannot read {spec!r}; expected a time ('10ms'), a distribution "
                         f"({', '.join(_TIME_PARAMS)}, e.g. 'gamma(mean=80ms, cv=0.5)') or a trace "
                         "('trace(file.csv, unit=ms)')")
    family, body = m.group(1).lower(), m.group(2)
    if family != "trace" and family not in _TIME_PARAMS:
        raise ValueError(f"{name}: unknown distribution {family!r}; allowed: {', '.join(_TIME_PARAMS)}, trace")
    raw: dict = {}
    pos = 0
    for arg in split_args(body):
        key, eq, value = arg.partition("=")
        if eq:
            raw[key.strip()] = value.strip()
        else:
            order = ("path",) if family == "trace" else _POSITIONAL.get(family, ())
            if pos >= len(order):
                raise ValueError(f"{name}: too many positional arguments in {spec!r}")
            raw[order[pos]] = arg
            pos += 1
    if family == "trace":
        return _read_trace(raw, name)
    if family not in _TIME_PARAMS:
        raise ValueError(f"{name}: unknown distribution {family!r}; allowed: {', '.join(_TIME_PARAMS)}, trace")
    args: dict = {}
    for key, value in raw.items():
        if key in _TIME_PARAMS[family]:
            args[key] = parse_duration(value, f"{name} ({family}.{key})")
        else:
            try:
                args[key] = float(value)
            except ValueError:
                raise ValueError(f"{name}: {family}.{key} must be a number, got {value!r}") from None
    try:
        return FAMILIES[family](**args)
    except TypeError:
        required, optional = FAMILIES[family].keys
        raise ValueError(f"{name}: {family}(...) takes {', '.join(required + optional)}; got "
                         f"{', '.join(raw) or 'nothing'}") from None
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class TimeModel:
    """A time per batch that depends on the batch size B: the loader's or the step's.

    Mean time per batch at B: ``intercept + per_example·B`` (a fixed cost plus a cost
    per example), with the shape (variability) of the measurement whose batch size is
    nearest to B, rescaled to that mean. A single time or distribution has
    ``per_example = 0`` and holds at every B.
    """

    intercept: float
    per_example: float
    shapes: tuple  # ((B, ServiceTime), ...) measured at each batch size, sorted by B
    intercept_se: float = math.nan
    per_example_se: float = math.nan
    name: str = "loader"

    def mean_at(self, batch_size: int) -> float:
        return self.intercept + self.per_example * batch_size

    def at(self, batch_size: int) -> ServiceTime:
        """The time of one batch of `batch_size` examples (seconds)."""
        if len(self.shapes) == 1 and self.per_example == 0.0:
            return self.shapes[0][1]
        sizes = np.array([b for b, _ in self.shapes], dtype=float)
        b0, dist = self.shapes[int(np.argmin(np.abs(np.log(sizes) - math.log(batch_size))))]
        mean = self.mean_at(batch_size)
        if not mean > 0:
            raise ValueError(f"batch_size: the fitted {self.name} time {self.intercept:.3g} s + "
                             f"{self.per_example:.3g} s × B is not positive at B = {batch_size}")
        return dist if abs(mean - dist.mean) <= 1e-12 * dist.mean else dist.scaled(mean / dist.mean)

    def describe(self) -> str:
        if len(self.shapes) == 1 and self.per_example == 0.0:
            return repr(self.shapes[0][1])
        if len(self.shapes) == 1:
            return f"{format_duration(self.intercept)} + {format_duration(self.per_example)} × B"
        se = ""
        if math.isfinite(self.intercept_se):
            se = f" (standard errors {format_duration(self.intercept_se)}, {format_duration(self.per_example_se)})"
        return (f"{format_duration(self.intercept)} + {format_duration(self.per_example)} × B per batch, "
                f"fitted at B = {', '.join(str(b) for b, _ in self.shapes)}{se}")


def fit_times(measured: Mapping, name: str = "loader") -> TimeModel:
    """Fit time per batch = a + b·B from times measured at one or more batch sizes.

    With one batch size the time holds at every B. With two or more: least squares on
    every measured time (so a batch size measured more often weighs more), with
    standard errors of a and b from the residuals (NaN with exactly two single times).

    Parameters
    ----------
    measured : mapping B -> a `Trace`, an array of times (seconds), a time or a service-time spec
    name : what is timed ("loader", "step_time"), for the messages.
    """
    if not isinstance(measured, Mapping) or not measured:
        raise ValueError(f"{name}: expected a mapping batch size -> time (e.g. {{64: '15ms', 512: '40ms'}}), "
                         f"got {measured!r:.60}")
    shapes, xs, ys = [], [], []
    for B, prof in measured.items():
        check_int(f"{name}: a batch size", B, lo=1)
        if isinstance(prof, (list, tuple, np.ndarray)):
            try:
                prof = Trace(np.asarray(prof, dtype=float), "resample")
            except ValueError as exc:
                raise ValueError(f"{name} (at B={B}): {exc}") from None
        dist = parse_service_time(prof, f"{name} (at B={B})")
        shapes.append((int(B), dist))
        times = dist.times if isinstance(dist, Trace) else np.array([dist.mean])
        xs.append(np.full(times.size, float(B)))
        ys.append(times)
    shapes.sort(key=lambda t: t[0])
    if len(shapes) == 1:
        return TimeModel(float(shapes[0][1].mean), 0.0, ((0, shapes[0][1]),), name=name)
    a, b, a_se, b_se = affine_fit(np.concatenate(xs), np.concatenate(ys))
    return TimeModel(a, b, tuple(shapes), a_se, b_se, name=name)


def fit_loader(profiles: Mapping) -> TimeModel:
    """Fit the loader's time per batch = a + b·B from profiles at two or more batch sizes."""
    if not isinstance(profiles, Mapping) or len(profiles) < 2:
        n = len(profiles) if isinstance(profiles, Mapping) else 0
        raise ValueError(f"loader: fitting time per batch = a + b·B needs profiles at two or more batch sizes, "
                         f"got {n}")
    return fit_times(profiles, "loader")


def as_time_model(spec, name: str) -> TimeModel:
    """A `TimeModel` from a spec (text, number, ServiceTime, Trace), a mapping batch size ->
    time (one B: that time everywhere; two or more: a + b·B fitted), or a TimeModel."""
    if isinstance(spec, TimeModel):
        return spec
    if isinstance(spec, Mapping) and "kind" not in spec:
        return fit_times(spec, name)
    dist = parse_service_time(spec, name)
    return TimeModel(float(dist.mean), 0.0, ((0, dist),), name=name)


def as_loader(loader) -> TimeModel:
    """The loader's `TimeModel`: a spec, or profiles at two or more batch sizes."""
    if isinstance(loader, Mapping) and "kind" not in loader:
        return fit_loader(loader)
    return as_time_model(loader, "loader")


def format_duration(seconds: float) -> str:
    """A duration in the unit that reads best: ``'80 ms'``, ``'1.74 s'``, ``'3.2 min'``
    (three significant digits, rounded before the unit is chosen: 0.99996 s is ``'1 s'``)."""
    if seconds is None or not math.isfinite(seconds):
        return "never" if seconds == math.inf else "-"
    a = float(f"{abs(seconds):.3g}")
    for unit, scale in (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if a >= scale * (1 - 1e-12) or unit == "us":
            return f"{math.copysign(a, seconds) / scale:.3g} {unit}"
    return f"{seconds:.3g} s"  # pragma: no cover


def format_count(v) -> str:
    """A count of batches or steps, or an echo factor, as the plan shows it: ``'12'``,
    ``'2.5'``; ``'never'`` for None or a non-finite value."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "never"
    v = float(v)
    return str(int(round(v))) if abs(v - round(v)) < 1e-9 or v >= 100 else f"{v:.3g}"


# --------------------------------------------------------------------------- each candidate's timing


@dataclass(frozen=True)
class CandidateTiming:
    """Where each candidate's loader and step times come from: specs (the same for every
    policy), or the records of runs through `echoing` (per policy and batch size)."""

    load: TimeModel | None = None
    step: TimeModel | None = None
    recorded: dict | None = None  # B -> [(mean echo, policy, loader dist or None, step dist, record index)]
    describe: str = ""

    def for_candidate(self, policy: str, echo: float, B: int):
        """(loader ServiceTime, step ServiceTime, note) for a candidate."""
        if self.recorded is None:
            return self.load.at(B), self.step.at(B), None
        groups = self.recorded[B]
        row = POLICIES[policy]  # K: given, varied with the loader's waits (None), or 1
        k = float(echo) if row.takes_echo else (None if row.capped else 1.0)
        same = [g for g in groups if g[1] == policy and (k is None or abs(g[0] - k) < 1e-9)]
        pool = same or sorted(groups, key=lambda g: abs(math.log(g[0]) - math.log(k if k else groups[-1][0])))
        g = pool[0]
        loader = g[2] if g[2] is not None else next((h[2] for h in sorted(
            groups, key=lambda h: abs(math.log(h[0]) - math.log(g[0]))) if h[2] is not None), None)
        if same:
            return loader, g[3], None
        if k is not None:  # a K no record ran: its step time from a model of step time in K
            from echosim.planner.recorded import step_time_at

            return loader, step_time_at(groups, k), (f"{_policy_text(policy, echo)} at B = {B}: loader timed from the "
                                                     f"{g[1]} run's records, step time from a model of step time in K")
        return loader, g[3], f"{_policy_text(policy, echo)} at B = {B}: timed from the {g[1]} run's records"

    def for_candidates(self, cands) -> tuple[list, list[str]]:
        """[(loader, step)] for each `Candidate`, and the notes (each once) on candidates timed
        from another policy's records."""
        times, notes = [], []
        for c in cands:
            loader_time, step_dist, note = self.for_candidate(c.policy, c.echo, c.batch_size)
            times.append((loader_time, step_dist))
            if note and note not in notes:
                notes.append(note)
        return times, notes

    def mean_loader(self, B: int) -> float:
        if self.recorded is None:
            return self.load.mean_at(B)
        return min(g[2].mean for g in self.recorded[B] if g[2] is not None)

    def mean_step(self, B: int) -> float:
        if self.recorded is None:
            return self.step.mean_at(B)
        return min(g[3].mean for g in self.recorded[B])

    def ratio(self, B: int, W: int) -> float:
        """R = t_load / (W t_step): how many steps the mean loader time per batch is with W workers."""
        return self.mean_loader(B) / (W * self.mean_step(B))


def _policy_text(policy, echo) -> str:
    return f"{policy} K={format_count(echo)}" if POLICIES[policy].takes_echo else policy


def candidate_timing(loader, step_time, records, batch_sizes, workers) -> CandidateTiming:
    """`plan`'s timing: from the loader and step-time specs (checked at every batch size), or
    from `records` of the user's own run (one loader worker); ValueError naming the argument."""
    if records is None:
        if loader is None or step_time is None:
            raise ValueError(f"{'loader' if loader is None else 'step_time'}: required (a time per batch such as "
                             "'80ms' or 'gamma(mean=80ms, cv=0.5)'), unless records= gives both from a run")
        load = as_loader(loader)
        step = as_time_model(step_time, "step_time")
        for B in batch_sizes:  # a fitted a + b·B must be positive at every candidate B
            load.at(B)
            step.at(B)
        return CandidateTiming(load=load, step=step, describe=f"loader {load.describe()}; step {step.describe()}")
    if loader is not None or step_time is not None:
        raise ValueError("records: give either records (timing from your own run) or loader and step_time, not both")
    if list(workers) != [1]:
        raise ValueError("workers: records time your loader as it ran, with its own workers; to compare worker "
                         "counts, profile one worker alone (loader=) instead")
    from echosim.planner.recorded import recorded_timing

    recorded = recorded_timing(records, batch_sizes)
    parts = []
    for B, groups in recorded.items():
        parts.append(f"B = {B}: " + "; ".join(
            f"{p} (mean K {k:.3g}): loader {format_duration(ld.mean) if ld is not None else 'ran ahead'}, "
            f"step {format_duration(st.mean)}" for k, p, ld, st, _ in groups))
    return CandidateTiming(recorded=recorded, describe="in-run timing from the records: " + " | ".join(parts))
