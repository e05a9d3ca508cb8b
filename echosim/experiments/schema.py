"""The sweep config schema: every key of every section, its type, range, default and
where it applies (`FIELDS`), the learning-rate grids, and `ConfigError`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from echosim._validate import is_int, is_real
from echosim.experiments.analysis import DEFAULT_HOLD, DEFAULT_RTOL, DEFAULT_RULE, DEFAULT_WINDOW, RULES
from echosim.control.auto import AUTO_DEFAULTS, AUTO_OPTIONS
from echosim.pipeline.model import BLOCKING, DELIVERIES, MAX_ECHO, POLICIES, policies_taking
from echosim.training.losses import LOSSES
from echosim.training.methods import DEFAULT_METHOD, HYPER_FIELDS, METHODS
from echosim.training.problems import DESIGNS, NOISES, PROBLEMS

__all__ = ["ConfigError", "ConfigWarning", "Field", "FIELDS", "lr_grid", "PAPER_LRS", "SCHEMA", "SECTIONS"]

SCHEMA = "echosim-run/2"
"""Version tag hashed into every run id; bump it when the meaning of a run changes."""

SECTIONS = ("problem", "pipeline", "optimizer", "sweep")
DEFAULT_TOML = "default_sweep.toml"
MAX_GRID_VALUES = 100_000
"""Values in one learning-rate grid table (`lr_grid`)."""
INT_MAX = 2**63 - 1
"""The largest integer of any key: result tables store integers as int64."""
MAX_LR_EXTEND = 100
"""Rounds of lr-grid extension: each adds 0.2 decades past an edge, so 100 reach 20 decades."""


class ConfigError(ValueError):
    """A bad config: one line naming the key path and what is allowed."""


class ConfigWarning(UserWarning):
    """A legal but pointless config value: one line naming the key path and why."""


_is_real = is_real  # a number, not a bool (echosim._validate)


def lr_grid(start: float, stop: float, per_decade: float | None = None, num: int | None = None) -> list[float]:
    """Log-spaced learning rates from `start` to `stop` inclusive.

    Give `per_decade` (values per factor of 10: ratio 10^(1/per_decade), the paper's
    grid is ``lr_grid(0.01, 10, per_decade=20)``: 61 values) or `num` (geomspace).
    Values are computed as start·10^(i/per_decade), so they are exact powers when
    start is one.
    """
    if not (_is_real(start) and _is_real(stop) and 0 < start <= stop and math.isfinite(stop)):
        raise ConfigError(f"lr: need 0 < start <= stop (finite), got start={start!r}, stop={stop!r}")
    if (per_decade is None) == (num is None):
        raise ConfigError("lr: give exactly one of per_decade or num")
    if per_decade is not None:
        if not (_is_real(per_decade) and per_decade > 0 and math.isfinite(per_decade)):
            raise ConfigError(f"lr.per_decade: must be a number > 0, got {per_decade!r}")
        decades = math.log10(stop) - math.log10(start)  # not log10(stop / start): that may overflow
        count = decades * per_decade + 1e-9
        if count + 1 > MAX_GRID_VALUES:
            raise ConfigError(f"lr.per_decade: {per_decade:g} values per decade from {start:g} to {stop:g} give "
                              f"{count + 1:.3g} learning rates, more than the limit of {MAX_GRID_VALUES:,}")
        n = math.floor(count)
        lo = math.log10(start)
        try:
            return [float(10 ** (lo + i / per_decade)) for i in range(n + 1)]
        except OverflowError:  # stop within rounding of the largest float
            raise ConfigError(f"lr: stop={stop:g} is too close to the largest float; give a smaller stop") from None
    if not is_int(num) or num < 1:
        raise ConfigError(f"lr.num: must be an integer >= 1, got {num!r}")
    if num > MAX_GRID_VALUES:
        raise ConfigError(f"lr.num: {num:,} learning rates, more than the limit of {MAX_GRID_VALUES:,}")
    if num == 1:
        return [float(start)]
    return [float(v) for v in np.geomspace(start, stop, int(num))]


PAPER_LRS = tuple(lr_grid(0.01, 10.0, per_decade=20))
"""Agarwal et al.'s grid: 61 learning rates 0.01 … 10, adjacent ratio 10^(1/20)."""


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Field:
    """One config key: its type, range, default, and where it applies."""

    kind: str  # int | float | str | bool | choice | service | lr | momentum | log_every | echo
    default: Any = None  # or {selector: default} where the default depends on the method
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False
    choices: tuple = ()
    grid: bool = True
    required: bool = False
    applies: tuple = ()  # problem kinds / optimizer methods / pipeline policies; () = always
    doc: str = ""

    def default_for(self, selector):
        """The default where this key applies to `selector` (a method, policy or problem kind)."""
        return self.default.get(selector) if isinstance(self.default, dict) else self.default

    def describe(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "bool":
            return "true or false"
        if self.kind == "str":
            return "a string"
        if self.kind == "service":
            return 'a number > 0 or a table like {kind = "gamma", mean = 8, cv = 0.5}'
        if self.kind == "lr":
            return ('a number >= 0, a list of them, "paper", "theory" (the bound\'s own step size), or a table '
                    "{start, stop, per_decade} or {start, stop, num}")
        if self.kind == "momentum":
            return "'nesterov' or a number in [0, 1)"
        if self.kind == "log_every":
            return "'auto' or an integer >= 1"
        if self.kind == "echo":
            return "a number >= 1 (an integer without a pipeline)"
        if self.kind == "standardize":
            return "true, false, 'zscore' or 'minmax'"
        what = "an integer" if self.kind == "int" else "a number"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {_bound(self.lo)}")
        hi = self.hi if self.hi is not None else (INT_MAX if self.kind == "int" else None)
        if hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {_bound(hi)}")
        return what + (" " + " and ".join(parts) if parts else "")

    def check(self, label: str, value):
        """The value, normalised (ints for int fields, floats for float fields)."""
        bad = ConfigError(f"{label}: must be {self.describe()}, got {_show(value)}")
        k = self.kind
        if k == "int":
            if not is_int(value) or value > INT_MAX:
                raise bad
            value = int(value)
        elif k == "float":
            if not _is_real(value) or not math.isfinite(value):
                raise bad
            value = float(value)
        elif k == "str":
            if not isinstance(value, str):
                raise bad
            return value
        elif k == "bool":
            if not isinstance(value, bool):
                raise bad
            return value
        elif k == "choice":
            if value not in self.choices:
                raise bad
            return value
        elif k == "lr":
            if value == "theory":  # a row of a [joint] table or a list
                return value
            if not _is_real(value) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{label}: must be a number >= 0 or \"theory\", got {_show(value)}")
            return float(value)
        elif k == "momentum":
            if value == "nesterov":
                return value
            if not _is_real(value) or not (0 <= value < 1):
                raise bad
            return float(value)
        elif k == "standardize":
            if value in (True, False, "zscore", "minmax"):
                return value
            raise bad
        elif k == "log_every":
            if value == "auto":
                return value
            if not is_int(value) or not 1 <= value <= INT_MAX:
                raise bad
            return int(value)
        elif k == "echo":  # K is checked once, by its owner, when the run is resolved (resolve.resolve_point)
            if isinstance(value, (list, dict)):
                raise bad
            return value
        else:  # pragma: no cover - schema bug
            raise AssertionError(k)
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            raise bad
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            raise bad
        return value


_SYNTH = tuple(name for name, row in PROBLEMS.items() if row.synthetic)
_DATA = tuple(name for name, row in PROBLEMS.items() if not row.synthetic)


def _problem_default(key: str):
    """The default of a problem key, from the problem rows (their constructors): one value,
    or {kind: value} where kinds differ (design: "gaussian" for least_squares, "sphere"
    for logistic)."""
    per = {name: row.defaults[key] for name, row in PROBLEMS.items() if key in row.defaults}
    values = list(dict.fromkeys(map(repr, per.values())))
    return next(iter(per.values())) if len(values) == 1 else per


def _kinds_taking(key: str) -> tuple[str, ...]:
    return tuple(name for name, row in PROBLEMS.items() if key in row.defaults)


def _method_defaults(key: str):
    """The default of an optimizer key: one value, or {method: value} where methods differ
    (momentum: "nesterov" for echoed_nesterov, 0.9 for echoed_heavy_ball)."""
    per = {m.name: m.defaults()[key] for m in METHODS.values() if key in m.fields}
    values = list(dict.fromkeys(map(repr, per.values())))
    return next(iter(per.values())) if len(values) == 1 else per

FIELDS: dict[str, dict[str, Field]] = {
    "problem": {
        "kind": Field("choice", choices=tuple(PROBLEMS), required=True, doc="which objective"),
        "dim": Field("int", lo=1, applies=_SYNTH, required=True, doc="dimension d"),
        "design": Field("choice", _problem_default("design"), choices=DESIGNS, applies=_SYNTH,
                        doc="x ~ N(0, diag(i^-decay)) or uniform on the sphere of radius r"),
        "decay": Field("float", _problem_default("decay"), lo=0, applies=_SYNTH,
                       doc="spectrum exponent (gaussian design)"),
        "radius": Field("float", _problem_default("radius"), lo=0, lo_open=True, applies=_SYNTH,
                        doc="sphere radius r"),
        "w_star_norm": Field("float", _problem_default("w_star_norm"), lo=0, applies=_SYNTH,
                             doc="‖w*‖ (equal entries)"),
        "noise": Field("choice", _problem_default("noise"), choices=NOISES, applies=_kinds_taking("noise"),
                       doc="label noise law"),
        "noise_std": Field("float", _problem_default("noise_std"), lo=0, applies=_kinds_taking("noise_std"),
                           doc="label noise σ"),
        "name": Field("str", applies=_DATA,
                      doc="a named data set of echosim.datasets (breast_cancer, digits, iris, wine, flights, "
                          "covertype, mnist)"),
        "path": Field("str", applies=_DATA, doc="a data file (.csv[.gz], .npz, .svm/.svmlight/.libsvm)"),
        "format": Field("choice", choices=("csv", "npz", "svmlight"), applies=_DATA,
                        doc="file format (default: from the suffix)"),
        "loss": Field("choice", _problem_default("loss"), choices=tuple(LOSSES), applies=_DATA,
                      doc="the loss (echosim.training.losses.LOSSES)"),
        "l2": Field("float", lo=0, applies=_DATA, doc="L2 weight (default: 0, or 1e-4 if separable)"),
        "standardize": Field("standardize", True, applies=_DATA, doc="true/'zscore', 'minmax' or false"),
        "task": Field("str", applies=_DATA, doc="labels → ±1, e.g. '2-vs-rest', 'even-odd'"),
        "positive": Field("float", applies=_DATA, doc="the label that is +1 (files)"),
        "intercept": Field("bool", False, applies=_DATA, doc="append a column of ones"),
        "eval_rows": Field("int", lo=1, applies=_DATA,
                           doc="evaluate the risk on a fixed subsample of this many rows (large tables)"),
    },
    "pipeline": {
        "arrival": Field("service", required=True, doc="loader time per batch per worker (t_up)"),
        "workers": Field("int", 1, lo=1, doc="loader workers W"),
        "prefetch": Field("int", 2, lo=1, doc="prefetch buffer capacity C"),
        "step_time": Field("service", 1.0, doc="time of one optimizer step (t_down)"),
        "policy": Field("choice", "fixed", choices=tuple(POLICIES), doc="echo policy"),
        "max_echo": Field("int", MAX_ECHO, lo=1, applies=policies_taking("max_echo"),
                          doc="bound on K_t under greedy and auto"),
        "window": Field("int", AUTO_DEFAULTS["window"], lo=AUTO_OPTIONS["window"][0], hi=AUTO_OPTIONS["window"][1],
                        applies=policies_taking("window"), doc="auto: fresh batches per run of the caps' comparisons"),
        "alpha": Field("float", AUTO_DEFAULTS["alpha"], lo=AUTO_OPTIONS["alpha"][0], hi=AUTO_OPTIONS["alpha"][1],
                       applies=policies_taking("alpha"), doc="auto: the chance of any wrong move in the job"),
        "min_effect": Field("float", AUTO_DEFAULTS["min_effect"], lo=AUTO_OPTIONS["min_effect"][0],
                            hi=AUTO_OPTIONS["min_effect"][1], applies=policies_taking("min_effect"),
                            doc="auto: relative difference in rate below which two caps are equal"),
        "start": Field("int", AUTO_DEFAULTS["start"], lo=AUTO_OPTIONS["start"][0], hi=AUTO_OPTIONS["start"][1],
                       applies=policies_taking("start"), doc="auto: the cap to start from (at most max_echo)"),
        "shuffle_buffer": Field("int", lo=1, applies=policies_taking("shuffle_buffer"),
                                doc="examples in the shuffle buffer"),
        "delivery": Field("choice", "ordered", choices=DELIVERIES),
        "blocking": Field("choice", "after", choices=BLOCKING),
        "switch_overhead": Field("float", 0.0, lo=0, doc="time to switch to a new batch"),
    },
    "optimizer": {
        "method": Field("choice", DEFAULT_METHOD, choices=tuple(METHODS)),
        "lr": Field("lr", required=True, doc="learning rate η"),
        "batch_size": Field("int", lo=1, required=True, doc="B"),
        "echo": Field("echo", 1.0, doc="K, steps per fresh batch"),
        **{key: Field(default=_method_defaults(key), applies=tuple(m.name for m in METHODS.values() if key in m.fields),
                      **spec)
           for key, spec in HYPER_FIELDS.items()},
    },
    "sweep": {
        "name": Field("str", grid=False, doc="label of the sweep (output directory name)"),
        "seed": Field("int", 0, lo=0, grid=False, doc="base seed"),
        "repetitions": Field("int", 1, lo=1, grid=False, doc="seeds per setting"),
        "n_batches": Field("int", lo=1, doc="fresh batches T per run"),
        "time_budget": Field("float", lo=0, lo_open=True, doc="simulated wall-clock per run"),
        "log_every": Field("log_every", "auto", doc="log every n units (fresh batches, or steps)"),
        "log_points": Field("int", lo=1, doc="log at n log-spaced points instead (with the last)"),
        "log_unit": Field("choice", "batch", choices=("batch", "step"),
                          doc="log after fresh batches or after every optimizer step"),
        "max_steps": Field("int", lo=1, doc="stop after this many optimizer steps (a per-run step budget)"),
        "dtype": Field("choice", "float64", choices=("float64", "float32")),
        "rtol": Field("float", lo=0, lo_open=True, grid=False,
                      doc=f"target: loss <= (1 + rtol) F* (default {DEFAULT_RTOL} if no target is given)"),
        "atol": Field("float", lo=0, lo_open=True, grid=False, doc="target: loss - F* <= atol"),
        "fraction": Field("float", lo=0, lo_open=True, hi=1, hi_open=True, grid=False,
                          doc="target: loss - F* <= fraction·(F(w0) - F*)"),
        "window": Field("int", DEFAULT_WINDOW, lo=1, grid=False,
                        doc="trailing-mean window, logged points (1: the loss itself)"),
        "rule": Field("choice", DEFAULT_RULE, choices=RULES, grid=False,
                      doc="converged where the loss enters the target band and stays in it for the next "
                          "sweep.hold fresh batches ('hold'), where it first enters ('first', the paper's rule), "
                          "or where it stays in it to the end of the budget ('stable', which depends on the budget)"),
        "hold": Field("int", DEFAULT_HOLD, lo=0, grid=False,
                      doc="fresh batches the loss must stay in the band under the 'hold' rule"),
        "lr_extend": Field("int", 8, lo=0, hi=MAX_LR_EXTEND, grid=False,
                           doc="rounds of extending the lr grid past an edge where the tuned lr sits "
                               "(each adds 0.2 decades)"),
        "iterate": Field("choice", "last", choices=("last", "avg", "end_avg"), grid=False),
        "tune_by": Field("choice", "batches", choices=("batches", "steps", "samples", "time"), grid=False),
    },
}

_RUN_KEYS = ("n_batches", "time_budget", "log_every", "log_points", "log_unit", "max_steps", "dtype")
_SETTING_KEYS = ("name", "seed", "repetitions", "rtol", "atol", "fraction", "window", "rule", "hold", "iterate",
                 "tune_by", "lr_extend")
TARGETS = ("rtol", "atol", "fraction")
"""The three ways to state the target; a config gives one (default rtol = `DEFAULT_RTOL`)."""


def _bound(x) -> str:
    if x == INT_MAX:
        return "2^63 - 1"
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}" if abs(x) >= 10_000 else f"{int(x)}"
    return f"{x:g}"


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return repr(v)


