"""Sweep configuration: a TOML file (or dict) ⇄ validated run specs, grid expansion, clear errors.

A config has four sections and an optional fifth::

    [problem]    what is optimised (LeastSquares, Logistic, Dataset)
    [pipeline]   the data pipeline that decides when batches arrive (optional)
    [optimizer]  method, learning rate, batch size B, echo factor K
    [sweep]      seeds, budget (fresh batches T or a wall-clock budget), target
    [joint]      parameters that vary together (optional)

Any scalar may be a list, and lists form a grid (benchopt's ``product_param``): the
runs are every combination, times ``sweep.repetitions`` seeds. A key of the form
``"a, b" = [[a1, b1], [a2, b2]]`` varies ``a`` and ``b`` jointly instead of crossing
them (benchopt's joint keys; ``[joint]`` takes full key paths such as
``"optimizer.batch_size, sweep.n_batches"``). Learning rates may also be
``"paper"`` (the 61 values 10^(-2 + i/20), 0.01 to 10) or a log-spaced table
``{start = 0.01, stop = 10, per_decade = 20}`` / ``{start, stop, num}``.

Every error is a `ConfigError` (a ValueError) whose message is one line naming the
key path, e.g. ``optimizer.lr[2]: must be a number >= 0, got -1``. The whole grid is
resolved, and every Problem, Optimizer and Pipeline constructed, before any run
starts. The full schema is in ``docs/sweep.md``.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import numbers
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "ConfigError",
    "RunSpec",
    "SweepConfig",
    "load_config",
    "parse_config",
    "default_config",
    "lr_grid",
    "PAPER_LRS",
    "build_problem",
    "build_optimizer",
    "build_pipeline",
    "canonical_json",
    "stable_hash",
]

SCHEMA = "echosim-run/1"
"""Version tag hashed into every run id; bump it when the meaning of a run changes."""

SECTIONS = ("problem", "pipeline", "optimizer", "sweep")
DEFAULT_TOML = "default_sweep.toml"


class ConfigError(ValueError):
    """A bad config: one line naming the key path and what is allowed."""


def _is_real(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


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
        n = int(math.floor(math.log10(stop / start) * per_decade + 1e-9))
        lo = math.log10(start)
        return [float(10 ** (lo + i / per_decade)) for i in range(n + 1)]
    if isinstance(num, bool) or not isinstance(num, numbers.Integral) or num < 1:
        raise ConfigError(f"lr.num: must be an integer >= 1, got {num!r}")
    if num == 1:
        return [float(start)]
    return [float(v) for v in np.geomspace(start, stop, int(num))]


PAPER_LRS = tuple(lr_grid(0.01, 10.0, per_decade=20))
"""Agarwal et al.'s grid: 61 learning rates 0.01 … 10, adjacent ratio 10^(1/20)."""


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Field:
    """One config key: its type, range, default, and where it applies."""

    kind: str  # int | float | str | bool | choice | service | lr | momentum | log_every
    default: Any = None
    lo: float | None = None
    lo_open: bool = False
    hi: float | None = None
    hi_open: bool = False
    choices: tuple = ()
    grid: bool = True
    required: bool = False
    applies: tuple = ()  # problem kinds / optimizer methods / pipeline policies; () = always
    doc: str = ""

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
            return ('a number >= 0, a list of them, "paper", or a table '
                    "{start, stop, per_decade} or {start, stop, num}")
        if self.kind == "momentum":
            return "'nesterov' or a number in [0, 1)"
        if self.kind == "log_every":
            return "'auto' or an integer >= 1"
        if self.kind == "standardize":
            return "true, false, 'zscore' or 'minmax'"
        what = "an integer" if self.kind == "int" else "a number"
        parts = []
        if self.lo is not None:
            parts.append(f"{'>' if self.lo_open else '>='} {self.lo:g}")
        if self.hi is not None:
            parts.append(f"{'<' if self.hi_open else '<='} {self.hi:g}")
        return what + (" " + " and ".join(parts) if parts else "")

    def check(self, label: str, value):
        """The value, normalised (ints for int fields, floats for float fields)."""
        bad = ConfigError(f"{label}: must be {self.describe()}, got {_show(value)}")
        k = self.kind
        if k == "int":
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
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
            if not _is_real(value) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{label}: must be a number >= 0, got {_show(value)}")
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
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise bad
            return int(value)
        else:  # pragma: no cover - schema bug
            raise AssertionError(k)
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            raise bad
        if self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)):
            raise bad
        return value


_PROBLEM_KINDS = ("logistic", "least_squares", "dataset")
_SYNTH = ("logistic", "least_squares")
_METHODS = {
    "minibatch_sgd": "MinibatchSGD",
    "echoed_gd": "EchoedGD",
    "echoed_sgd": "EchoedSGD",
    "echoed_nesterov": "EchoedNesterov",
    "echoed_prox": "EchoedProx",
}
_POLICIES = ("sync", "fixed", "greedy", "example")
_ECHO_POLICIES = ("fixed", "example")

FIELDS: dict[str, dict[str, Field]] = {
    "problem": {
        "kind": Field("choice", choices=_PROBLEM_KINDS, required=True, doc="which objective"),
        "dim": Field("int", lo=1, applies=_SYNTH, required=True, doc="dimension d"),
        "design": Field("choice", choices=("gaussian", "sphere"), applies=_SYNTH,
                        doc="x ~ N(0, diag(i^-decay)) or uniform on the sphere of radius r"),
        "decay": Field("float", 0.0, lo=0, applies=_SYNTH, doc="spectrum exponent (gaussian design)"),
        "radius": Field("float", 1.0, lo=0, lo_open=True, applies=_SYNTH, doc="sphere radius r"),
        "w_star_norm": Field("float", lo=0, applies=_SYNTH, doc="‖w*‖ (equal entries)"),
        "noise": Field("choice", "gaussian", choices=("gaussian", "uniform"), applies=("least_squares",),
                       doc="label noise law"),
        "noise_std": Field("float", 0.5, lo=0, applies=("least_squares",), doc="label noise σ"),
        "name": Field("str", applies=("dataset",),
                      doc="a named data set of echosim.datasets (breast_cancer, digits, iris, wine, covertype, mnist)"),
        "path": Field("str", applies=("dataset",), doc="a data file (.csv[.gz], .npz, .svm/.svmlight/.libsvm)"),
        "format": Field("choice", choices=("csv", "npz", "svmlight"), applies=("dataset",),
                        doc="file format (default: from the suffix)"),
        "loss": Field("choice", "logistic", choices=("logistic", "squared", "softmax"), applies=("dataset",)),
        "l2": Field("float", lo=0, applies=("dataset",), doc="L2 weight (default: 0, or 1e-4 if separable)"),
        "standardize": Field("standardize", True, applies=("dataset",), doc="true/'zscore', 'minmax' or false"),
        "task": Field("str", applies=("dataset",), doc="labels → ±1, e.g. '2-vs-rest', 'even-odd'"),
        "positive": Field("float", applies=("dataset",), doc="the label that is +1 (files)"),
        "intercept": Field("bool", False, applies=("dataset",), doc="append a column of ones"),
    },
    "pipeline": {
        "arrival": Field("service", required=True, doc="loader time per batch per worker (t_up)"),
        "workers": Field("int", 1, lo=1, doc="loader workers W"),
        "prefetch": Field("int", 2, lo=1, doc="prefetch buffer capacity C"),
        "step_time": Field("service", 1.0, doc="time of one optimizer step (t_down)"),
        "policy": Field("choice", "fixed", choices=_POLICIES, doc="echo policy"),
        "max_echo": Field("int", 64, lo=1, applies=("greedy",), doc="bound on K_t under greedy"),
        "shuffle_buffer": Field("int", lo=1, applies=("example",), doc="examples in the shuffle buffer"),
        "delivery": Field("choice", "ordered", choices=("ordered", "unordered")),
        "blocking": Field("choice", "after", choices=("after", "before")),
        "switch_overhead": Field("float", 0.0, lo=0, doc="time to switch to a new batch"),
    },
    "optimizer": {
        "method": Field("choice", "echoed_gd", choices=tuple(_METHODS)),
        "lr": Field("lr", required=True, doc="learning rate η"),
        "batch_size": Field("int", lo=1, required=True, doc="B"),
        "echo": Field("float", 1.0, lo=1, doc="K, steps per fresh batch"),
        "sub_batch": Field("int", 1, lo=1, applies=("echoed_sgd",)),
        "replace": Field("bool", True, applies=("echoed_sgd",)),
        "momentum": Field("momentum", "nesterov", applies=("echoed_nesterov",)),
        "lam": Field("float", 1.0, lo=0, applies=("echoed_prox",), doc="prox weight λ"),
    },
    "sweep": {
        "name": Field("str", grid=False, doc="label of the sweep (output directory name)"),
        "seed": Field("int", 0, lo=0, grid=False, doc="base seed"),
        "repetitions": Field("int", 1, lo=1, grid=False, doc="seeds per setting"),
        "n_batches": Field("int", lo=1, doc="fresh batches T per run"),
        "time_budget": Field("float", lo=0, lo_open=True, doc="simulated wall-clock per run"),
        "log_every": Field("log_every", "auto", doc="log every n fresh batches"),
        "dtype": Field("choice", "float64", choices=("float64", "float32")),
        "rtol": Field("float", lo=0, lo_open=True, grid=False, doc="target: loss <= (1 + rtol) F*"),
        "atol": Field("float", lo=0, lo_open=True, grid=False, doc="target: loss - F* <= atol"),
        "window": Field("int", 10, lo=1, grid=False, doc="trailing-mean window, logged points"),
        "iterate": Field("choice", "last", choices=("last", "avg", "end_avg"), grid=False),
        "tune_by": Field("choice", "batches", choices=("batches", "steps", "samples", "time"), grid=False),
    },
}

_PROBLEM_DEFAULTS = {
    "logistic": {"design": "sphere", "w_star_norm": 2.0},
    "least_squares": {"design": "gaussian", "w_star_norm": 1.0},
}
_RUN_KEYS = ("n_batches", "time_budget", "log_every", "dtype")
_SETTING_KEYS = ("name", "seed", "repetitions", "rtol", "atol", "window", "iterate", "tune_by")


def _show(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return repr(v)


# --------------------------------------------------------------------------- hashing


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def canonical_json(obj) -> str:
    """Sorted-key, compact JSON: the text that run ids and config hashes are taken of."""
    return json.dumps(_jsonable(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)


def stable_hash(obj, n: int = 16) -> str:
    """First `n` hex digits of the SHA-256 of `canonical_json(obj)`."""
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]


def _derive_seed(*words: int) -> int:
    """A 63-bit seed from `numpy.random.SeedSequence(words)` (order-sensitive, collision-free in practice)."""
    a, b = np.random.SeedSequence([int(w) for w in words]).generate_state(2, np.uint32)
    return ((int(a) << 32) | int(b)) >> 1


# --------------------------------------------------------------------------- run specs


@dataclass(frozen=True)
class RunSpec:
    """One fully resolved run: plain dicts (picklable, JSON-able), its seeds and id.

    ``problem``, ``optimizer``, ``pipeline`` (None without a pipeline) and ``run``
    (n_batches or time_budget, log_every, dtype) hold only the keys that apply.
    ``seed`` (the data seed) comes from (base seed, problem, B, repetition) and
    ``pipeline_seed`` from (base seed, the pipeline's timing keys, repetition), never
    from the run's position in the grid: runs that differ only in K, lr or method see
    the same batches and the same loader times (common random numbers).
    """

    problem: dict
    optimizer: dict
    pipeline: dict | None
    run: dict
    repetition: int
    base_seed: int
    seed: int
    pipeline_seed: int | None
    run_id: str
    labels: dict = field(default_factory=dict, compare=False, repr=False)

    def resolved(self) -> dict:
        """The dict whose hash is the run id."""
        return {
            "schema": SCHEMA,
            "problem": self.problem,
            "optimizer": self.optimizer,
            "pipeline": self.pipeline,
            "run": self.run,
            "repetition": self.repetition,
            "base_seed": self.base_seed,
            "seed": self.seed,
            "pipeline_seed": self.pipeline_seed,
        }

    def params(self) -> dict:
        """Flat parameter columns for result tables, named by config key path."""
        out: dict[str, Any] = {"run_id": self.run_id}
        for k, v in self.problem.items():
            if k != "digest":
                out[f"problem.{k}"] = v
        for k, v in self.optimizer.items():
            out[f"optimizer.{k}"] = v
        if self.pipeline is not None:
            p = self.pipeline
            for k, v in p.items():
                if k in ("arrival", "step_time"):
                    out[f"pipeline.{k}"] = p[k + "_name"]
                elif not k.endswith("_name"):
                    out[f"pipeline.{k}"] = v
        for k, v in self.run.items():
            out[f"sweep.{k}"] = str(v) if k == "log_every" else v
        if "momentum" in self.optimizer:
            out["optimizer.momentum"] = str(self.optimizer["momentum"])
        out.update(repetition=self.repetition, base_seed=self.base_seed, seed=self.seed,
                   pipeline_seed=self.pipeline_seed)
        return out


@dataclass(frozen=True)
class SweepConfig:
    """A validated sweep: its runs in grid order, the varying axes, the analysis settings."""

    runs: tuple
    settings: dict
    axes: tuple
    source: str
    text: str
    overrides: tuple
    n_points: int
    config_hash: str

    @property
    def name(self) -> str:
        return self.settings["name"]

    def default_out(self, root: str | Path = "echosim-results") -> Path:
        """``<root>/<name>-<hash>``: a new directory for every different config."""
        return Path(root) / f"{_slug(self.name)}-{self.config_hash[:10]}"

    def describe(self) -> str:
        axes = ", ".join(self.axes) if self.axes else "none"
        dup = self.n_points * self.settings["repetitions"] - len(self.runs)
        extra = f" ({dup} duplicate grid points merged)" if dup else ""
        return f"{len(self.runs)} runs{extra}; varying: {axes}; repetitions: {self.settings['repetitions']}"


def _slug(s: str) -> str:
    out = "".join(c if c.isalnum() or c in "-_." else "-" for c in s).strip("-.")
    return out or "sweep"


# --------------------------------------------------------------------------- loading


def default_config(overrides=()) -> SweepConfig:
    """The embedded Figure-2-style sweep (``echosim/default_sweep.toml``)."""
    from importlib import resources

    text = resources.files("echosim").joinpath(DEFAULT_TOML).read_text(encoding="utf-8")
    return _from_text(text, source="<default>", base_dir=Path.cwd(), overrides=overrides)


def load_config(path=None, overrides=()) -> SweepConfig:
    """Read and validate a TOML config (None: the embedded default).

    `overrides` are ``"key.path=value"`` strings, the value in TOML syntax (a bare
    word is taken as a string), applied before validation.
    """
    if path is None:
        return default_config(overrides)
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(f"cannot read config file {str(path)!r}: {reason}") from None
    return _from_text(text, source=str(path), base_dir=p.resolve().parent, overrides=overrides)


def _from_text(text, source, base_dir, overrides):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}") from None
    return parse_config(data, source=source, base_dir=base_dir, overrides=overrides, text=text)


def _parse_override(item: str):
    """"key.path=value" → (["key", "path"], value); keys may be quoted as in TOML."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. optimizer.echo=[1,2,4]")
    key, _, raw = item.partition("=")
    try:
        node = tomllib.loads(f"{key.strip()} = 0")
    except tomllib.TOMLDecodeError:
        node = None
    parts = []
    while isinstance(node, dict) and len(node) == 1:
        k, node = next(iter(node.items()))
        parts.append(k)
    if node != 0 or len(parts) < 2:
        raise ConfigError(f"--set {item!r}: KEY must be a dotted path such as optimizer.lr "
                          '(quote a joint key: joint."optimizer.batch_size, sweep.n_batches")')
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return parts, value


def _apply_overrides(data: dict, overrides) -> None:
    for item in overrides:
        parts, value = _parse_override(item)
        node = data
        for k in parts[:-1]:
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: {k} is not a table")
            node = nxt
        node[parts[-1]] = value


# --------------------------------------------------------------------------- parsing


@dataclass
class _Axis:
    paths: tuple  # key paths set together
    values: list  # one tuple per grid point
    labels: list  # one tuple of display labels per grid point


class _Grid:
    """Collects fixed values and axes from the raw tables."""

    def __init__(self, base_dir):
        self.fixed: dict[str, Any] = {}
        self.fixed_labels: dict[str, str] = {}
        self.axes: list[_Axis] = []
        self.declared: dict[str, str] = {}
        self.base_dir = base_dir

    def _declare(self, path, where):
        if path in self.declared:
            raise ConfigError(f"{path}: set twice ({self.declared[path]} and {where})")
        self.declared[path] = where

    def add(self, path: str, fld: Field, value, label: str):
        self._declare(path, label)
        if fld.kind == "service":
            return self._add_service(path, value, label)
        if fld.kind == "lr":
            values = _lr_values(label, value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.fixed[path], self.fixed_labels[path] = values[0], label
            else:
                self._axis((path,), [(v,) for v in values],
                           [(f"{label}[{i}]",) for i in range(len(values))], label)
            return
        if isinstance(value, list):
            if not fld.grid:
                raise ConfigError(f"{label}: cannot be a list (a sweep-wide setting); must be {fld.describe()}")
            checked = [fld.check(f"{label}[{i}]", v) for i, v in enumerate(value)]
            if path == "problem.path":
                checked = [self._absolute(v) for v in checked]
            self._axis((path,), [(v,) for v in checked], [(f"{label}[{i}]",) for i in range(len(value))], label)
        else:
            value = fld.check(label, value)
            if path == "problem.path":
                value = self._absolute(value)
            self.fixed[path], self.fixed_labels[path] = value, label

    def _absolute(self, p: str) -> str:
        q = Path(p).expanduser()
        return str(q if q.is_absolute() else self.base_dir / q)

    def _axis(self, paths, values, labels, label):
        if not values:
            raise ConfigError(f"{label}: an empty list gives no runs")
        self.axes.append(_Axis(tuple(paths), values, labels))

    def _add_service(self, path, value, label):
        if isinstance(value, list):
            if not value:
                raise ConfigError(f"{label}: an empty list gives no runs")
            for i, v in enumerate(value):
                _check_service_value(f"{label}[{i}]", v, allow_lists=False)
            vals = [(self._service_paths(copy.deepcopy(v)),) for v in value]
            self.axes.append(_Axis((path,), vals, [(f"{label}[{i}]",) for i in range(len(value))]))
            return
        _check_service_value(label, value, allow_lists=True)
        if not isinstance(value, dict):
            self.fixed[path], self.fixed_labels[path] = value, label
            return
        # a table: its list-valued keys are axes of their own
        template = {}
        for k, v in value.items():
            sub = f"{path}.{k}"
            if isinstance(v, list) and k != "times":
                if not v:
                    raise ConfigError(f"{label}.{k}: an empty list gives no runs")
                self.axes.append(_Axis((sub,), [(x,) for x in v], [(f"{label}.{k}[{i}]",) for i in range(len(v))]))
                template[k] = _AxisRef(sub)
            elif isinstance(v, dict) and any(isinstance(x, list) for x in v.values()):
                raise ConfigError(f"{label}.{k}: lists inside a nested table are not supported; "
                                  f"list whole alternatives instead ({label} = [{{...}}, {{...}}])")
            else:
                template[k] = v
        self.fixed[path], self.fixed_labels[path] = self._service_paths(template), label

    def _service_paths(self, d):
        if isinstance(d, dict) and d.get("kind") == "trace" and "path" in d and isinstance(d["path"], str):
            p = Path(d["path"])
            d["path"] = str(p if p.is_absolute() else (self.base_dir / p))
        return d


@dataclass(frozen=True)
class _AxisRef:
    path: str


def _check_service_value(label, v, allow_lists):
    if isinstance(v, dict):
        if not allow_lists:
            for k, x in v.items():
                if isinstance(x, list) and k != "times":
                    raise ConfigError(f"{label}.{k}: lists inside a list of alternatives are not supported; "
                                      "list the alternatives in full")
        return
    if not _is_real(v) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{label}: must be {FIELDS['pipeline']['arrival'].describe()}, got {_show(v)}")


def _lr_values(label, value) -> list[float]:
    fld = FIELDS["optimizer"]["lr"]
    if value == "paper":
        return list(PAPER_LRS)
    if isinstance(value, dict):
        allowed = {"start", "stop", "per_decade", "num"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ConfigError(f"{label}: unknown key(s) {unknown}; a learning-rate grid takes "
                              "start, stop and per_decade or num")
        for k in ("start", "stop"):
            if k not in value:
                raise ConfigError(f"{label}.{k}: required in a learning-rate grid table")
        try:
            return lr_grid(value["start"], value["stop"], value.get("per_decade"), value.get("num"))
        except ConfigError as exc:
            raise ConfigError(f"{label}: {str(exc).removeprefix('lr: ').removeprefix('lr.')}") from None
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{label}: an empty list gives no runs")
        return [fld.check(f"{label}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, str):
        raise ConfigError(f"{label}: must be {fld.describe()}, got {value!r}")
    return [fld.check(label, value)]


def _field_for(path: str, label: str) -> Field:
    section, _, key = path.partition(".")
    if section not in FIELDS:
        raise ConfigError(f"{label}: unknown section {section!r}; allowed: {', '.join(SECTIONS)}")
    if key not in FIELDS[section]:
        if section == "pipeline" and key == "echo":
            raise ConfigError(f"{label}: the echo factor K is optimizer.echo (used by pipeline.policy 'fixed')")
        raise ConfigError(f"{label}: unknown key {key!r}; allowed in [{section}]: {', '.join(FIELDS[section])}")
    return FIELDS[section][key]


def _joint(grid: _Grid, section: str | None, key: str, value):
    label = f'{section or "joint"}."{key}"'
    names = [k.strip() for k in key.split(",")]
    if any(not n for n in names) or len(names) < 2:
        raise ConfigError(f"{label}: a joint key names two or more keys separated by commas")
    paths = []
    for n in names:
        if "." in n:
            path = n
        elif section is None:
            raise ConfigError(f"{label}: in [joint] name keys by their full path, e.g. optimizer.batch_size")
        else:
            path = f"{section}.{n}"
        paths.append(path)
    fields = [_field_for(p, label) for p in paths]
    for p, f in zip(paths, fields):
        if not f.grid:
            raise ConfigError(f"{label}: {p} is a sweep-wide setting and cannot vary")
        grid._declare(p, label)
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{label}: must be a non-empty list of [{', '.join(names)}] lists")
    vals, labels = [], []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != len(paths):
            raise ConfigError(f"{label}[{i}]: must be a list of {len(paths)} values ({', '.join(paths)})")
        checked = []
        for j, (p, f, v) in enumerate(zip(paths, fields, row)):
            el = f"{label}[{i}][{j}] ({p})"
            if f.kind == "service":
                _check_service_value(el, v, allow_lists=False)
                checked.append(grid._service_paths(copy.deepcopy(v)))
            elif f.kind == "lr":
                checked.append(f.check(el, v))
            else:
                if isinstance(v, list):
                    raise ConfigError(f"{el}: must be {f.describe()}, got a list")
                checked.append(f.check(el, v))
        vals.append(tuple(checked))
        labels.append(tuple(f"{label}[{i}][{j}]" for j in range(len(paths))))
    grid.axes.append(_Axis(tuple(paths), vals, labels))


def parse_config(data: dict, *, source: str = "<dict>", base_dir=None, overrides=(), text: str = "") -> SweepConfig:
    """Validate a config dict (as from `tomllib`) and expand it into run specs.

    Raises `ConfigError` naming the key path on any problem; every run's Problem,
    Optimizer and Pipeline is constructed here, before anything runs.
    """
    data = copy.deepcopy(data)
    _apply_overrides(data, overrides)
    base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
    if not isinstance(data, dict):
        raise ConfigError("the config must be a table of sections")
    unknown = [k for k in data if k not in SECTIONS and k != "joint"]
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section; allowed: {', '.join(SECTIONS)}, joint")
    for s in ("problem", "optimizer", "sweep"):
        if s not in data:
            raise ConfigError(f"{s}: missing section [{s}]")
    grid = _Grid(base_dir)
    for section in SECTIONS:
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table [{section}], got {_show(table)}")
        for key, value in table.items():
            if "," in key:
                _joint(grid, section, key, value)
            else:
                path = f"{section}.{key}"
                grid.add(path, _field_for(path, path), value, path)
    joint = data.get("joint", {})
    if not isinstance(joint, dict):
        raise ConfigError(f"joint: must be a table [joint], got {_show(joint)}")
    for key, value in joint.items():
        if "," not in key:
            raise ConfigError(f'joint."{key}": a joint key names two or more keys separated by commas')
        _joint(grid, None, key, value)

    settings = _settings(grid, source)
    return _expand(grid, settings, source=source, text=text, overrides=tuple(overrides))


def _settings(grid: _Grid, source: str) -> dict:
    s = {}
    for k in _SETTING_KEYS:
        fld = FIELDS["sweep"][k]
        s[k] = grid.fixed.get(f"sweep.{k}", fld.default)
    if s["name"] is None:
        s["name"] = Path(source).stem if not source.startswith("<") else source.strip("<>")
    if s["rtol"] is not None and s["atol"] is not None:
        raise ConfigError("sweep.atol: give either rtol (relative to F*) or atol (excess risk), not both")
    if s["rtol"] is None and s["atol"] is None:
        s["rtol"] = 0.01
    has_T = "sweep.n_batches" in grid.declared
    has_budget = "sweep.time_budget" in grid.declared
    if has_T == has_budget:
        raise ConfigError("sweep.n_batches: set exactly one of sweep.n_batches (fresh batches T) "
                          "or sweep.time_budget (simulated wall-clock)")
    return s


# --------------------------------------------------------------------------- expansion


class _Usage:
    """Which declared keys applied to at least one run (the rest are errors)."""

    def __init__(self):
        self.used: set[str] = set()

    def use(self, path):
        self.used.add(path)


def _points(grid: _Grid):
    for combo in itertools.product(*[range(len(a.values)) for a in grid.axes]):
        point = dict(grid.fixed)
        labels = dict(grid.fixed_labels)
        for a, i in zip(grid.axes, combo):
            for p, v, lab in zip(a.paths, a.values[i], a.labels[i]):
                point[p] = v
                labels[p] = lab
        # fill service templates whose keys are axes
        for p, v in list(point.items()):
            if isinstance(v, dict):
                point[p] = {k: (point[x.path] if isinstance(x, _AxisRef) else x) for k, x in v.items()}
                for k, x in v.items():
                    if isinstance(x, _AxisRef):
                        labels[p] = labels[p] + f" ({k} from {labels[x.path]})"
        yield point, labels


def _expand(grid: _Grid, settings: dict, *, source, text, overrides) -> SweepConfig:
    usage = _Usage()
    caches: dict = {"problem": {}}
    runs, seen = [], set()
    n_points = 0
    for point, labels in _points(grid):
        n_points += 1
        base = _resolve(point, labels, usage, caches)
        for rep in range(settings["repetitions"]):
            spec = _make_spec(base, rep, settings["seed"])
            if spec.run_id in seen:
                continue
            seen.add(spec.run_id)
            runs.append(spec)
    # keys that applied to no run at all
    for path, where in grid.declared.items():
        if path.startswith("sweep.") and path.split(".", 1)[1] in _SETTING_KEYS:
            continue
        if path not in usage.used and not any(u.startswith(path + ".") for u in usage.used):
            section, _, key = path.partition(".")
            fld = FIELDS.get(section, {}).get(key.split(".")[0])
            why = _applies_text(section, key, fld)
            raise ConfigError(f"{where}: applies to no run of this grid{why}")
    if settings["tune_by"] == "time" and any(r.pipeline is None for r in runs):
        raise ConfigError("sweep.tune_by: 'time' needs a [pipeline] section (simulated wall-clock)")
    axes = tuple(dict.fromkeys(p for a in grid.axes for p in a.paths))
    chash = stable_hash({"schema": SCHEMA, "settings": settings, "runs": [r.run_id for r in runs]})
    return SweepConfig(runs=tuple(runs), settings=settings, axes=axes, source=source, text=text,
                       overrides=overrides, n_points=n_points, config_hash=chash)


def _applies_text(section, key, fld) -> str:
    if fld is None or not fld.applies:
        if section == "optimizer" and key == "echo":
            return (" (optimizer.echo applies to echoed methods without a pipeline or with pipeline.policy "
                    "'fixed' or 'example')")
        return ""
    what = {"problem": "problem.kind", "optimizer": "optimizer.method", "pipeline": "pipeline.policy"}[section]
    return f" (it applies only when {what} is {' or '.join(repr(a) for a in fld.applies)})"


def _get(point, usage, section, key, default, applies_to=None):
    path = f"{section}.{key}"
    fld = FIELDS[section][key]
    if fld.applies and applies_to not in fld.applies:
        return None, False
    if path in point:
        usage.use(path)
        return point[path], True
    return default, False


def _resolve(point, labels, usage, caches) -> dict:
    """Point (path → value) → resolved dicts plus the constructed objects' checks."""
    lab = lambda p: labels.get(p, p)  # noqa: E731

    # ---- problem
    kind = point.get("problem.kind")
    if kind is None:
        raise ConfigError("problem.kind: required; " + FIELDS["problem"]["kind"].describe())
    usage.use("problem.kind")
    problem = {"kind": kind}
    for key, fld in FIELDS["problem"].items():
        if key == "kind":
            continue
        default = _PROBLEM_DEFAULTS.get(kind, {}).get(key, fld.default)
        value, _ = _get(point, usage, "problem", key, default, kind)
        if fld.applies and kind not in fld.applies:
            continue
        if value is None:
            if fld.required:
                raise ConfigError(f"problem.{key}: required for kind {kind!r} ({fld.describe()})")
            continue
        problem[key] = value
    if kind == "dataset":
        problem = _resolve_dataset(problem, lab)
    pkey = canonical_json(problem)
    if pkey not in caches["problem"]:
        try:
            caches["problem"][pkey] = build_problem(problem)
        except ValueError as exc:
            where = ", ".join(sorted({lab(p) for p in point if p.startswith("problem.")}))
            raise ConfigError(f"problem ({where}): {exc}") from None
    problem_obj = caches["problem"][pkey]

    # ---- pipeline
    has_pipeline = any(p.startswith("pipeline.") for p in point)
    pipeline = None
    policy = None
    if has_pipeline:
        policy = point.get("pipeline.policy", "fixed")
        pipeline = {}
        for key, fld in FIELDS["pipeline"].items():
            value, _ = _get(point, usage, "pipeline", key, fld.default, policy)
            if fld.applies and policy not in fld.applies:
                continue
            if value is None and fld.required:
                raise ConfigError(f"pipeline.{key}: required in [pipeline] ({fld.describe()})")
            pipeline[key] = value

    # ---- optimizer
    method = point.get("optimizer.method", "echoed_gd")
    if "optimizer.method" in point:
        usage.use("optimizer.method")
    optimizer = {"method": method}
    for key, fld in FIELDS["optimizer"].items():
        if key in ("method", "echo"):
            continue
        value, _ = _get(point, usage, "optimizer", key, fld.default, method)
        if fld.applies and method not in fld.applies:
            continue
        if value is None and fld.required:
            raise ConfigError(f"optimizer.{key}: required ({fld.describe()})")
        optimizer[key] = value
    echo_applies = method != "minibatch_sgd" and (pipeline is None or policy in _ECHO_POLICIES)
    if echo_applies:
        K = point.get("optimizer.echo", 1.0)
        if "optimizer.echo" in point:
            usage.use("optimizer.echo")
        if pipeline is None and K != math.floor(K):
            raise ConfigError(f"{lab('optimizer.echo')}: a non-integer echo factor ({K:g}) needs "
                              "pipeline.policy 'fixed' (random rounding); without a pipeline K is an integer")
        optimizer["echo"] = int(K) if K == math.floor(K) else K
    elif method == "minibatch_sgd" and policy in ("greedy", "example"):
        raise ConfigError(f"{lab('optimizer.method')}: minibatch_sgd takes one step per fresh batch, but "
                          f"{lab('pipeline.policy')} = {policy!r} does not; use policy 'sync' or 'fixed'")
    elif policy == "greedy":
        pass
    else:
        optimizer["echo"] = 1
    if method == "echoed_sgd" and not optimizer["replace"] and optimizer["sub_batch"] > optimizer["batch_size"]:
        raise ConfigError(f"{lab('optimizer.sub_batch')}: sub_batch ({optimizer['sub_batch']}) exceeds "
                          f"{lab('optimizer.batch_size')} ({optimizer['batch_size']}) when sampling without replacement")
    try:
        build_optimizer(optimizer)
    except ValueError as exc:
        where = ", ".join(sorted({lab(p) for p in point if p.startswith("optimizer.")}))
        raise ConfigError(f"optimizer ({where}): {exc}") from None

    # ---- the pipeline object (needs K)
    if pipeline is not None:
        pipeline = _resolve_pipeline(pipeline, optimizer.get("echo"), point, lab)

    # ---- run budget
    run = {}
    for key in _RUN_KEYS:
        fld = FIELDS["sweep"][key]
        value, _ = _get(point, usage, "sweep", key, fld.default)
        if value is not None:
            run[key] = value
    if "time_budget" in run and pipeline is None:
        raise ConfigError(f"{lab('sweep.time_budget')}: a time budget needs a [pipeline] section "
                          "(simulated wall-clock); use sweep.n_batches without one")
    return {"problem": problem, "optimizer": optimizer, "pipeline": pipeline, "run": run,
            "labels": labels, "problem_obj": problem_obj}


def _resolve_pipeline(pipeline, K, point, lab) -> dict:
    from echosim.arrivals import as_service_time

    out = {}
    services = {}
    for key in ("arrival", "step_time"):
        try:
            svc = as_service_time(pipeline[key])
        except ValueError as exc:
            raise ConfigError(f"{lab('pipeline.' + key)}: {exc}") from None
        services[key] = svc
    for key, value in pipeline.items():
        if key in services:
            out[key] = _service_dict(services[key])
            out[key + "_name"] = repr(services[key])
            out[key + "_mean"] = float(services[key].mean)
        else:
            out[key] = value
    if out["policy"] in _ECHO_POLICIES:
        out["echo"] = float(K)
    try:
        build_pipeline(out)
    except ValueError as exc:
        where = ", ".join(sorted({lab(p) for p in point if p.startswith("pipeline.")}))
        raise ConfigError(f"pipeline ({where}): {exc}") from None
    return out


def _service_dict(svc) -> dict:
    d = svc.to_dict()
    return {k: _jsonable(v) for k, v in d.items()}


def _resolve_dataset(problem: dict, lab) -> dict:
    if ("name" in problem) == ("path" in problem):
        raise ConfigError("problem.path: a dataset needs exactly one of problem.name (a named data set: "
                          "breast_cancer, digits, iris, wine, covertype, mnist) or problem.path (a file)")
    out = dict(problem)
    if "name" in problem:
        if "format" in problem or "positive" in problem:
            key = "format" if "format" in problem else "positive"
            raise ConfigError(f"{lab('problem.' + key)}: applies only to a data file (problem.path)")
        return out
    p = Path(problem["path"])
    label = lab("problem.path")
    try:
        digest = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read data file {str(p)!r}: {exc.strerror or exc}") from None
    if "format" not in out:
        name = p.name.lower()
        out["format"] = ("npz" if name.endswith(".npz") else
                         "svmlight" if any(t in name for t in (".svm", ".svmlight", ".libsvm")) else "csv")
    out["digest"] = digest
    return out


def _make_spec(base: dict, rep: int, base_seed: int) -> RunSpec:
    problem, optimizer, pipeline, run = base["problem"], base["optimizer"], base["pipeline"], base["run"]
    h_problem = int(stable_hash(problem, 16), 16)
    seed = _derive_seed(base_seed, 0, h_problem >> 32, h_problem & 0xFFFFFFFF, optimizer["batch_size"], rep)
    pseed = None
    if pipeline is not None:
        timing = {k: pipeline[k] for k in ("arrival", "step_time", "workers", "prefetch", "delivery",
                                           "blocking", "switch_overhead")}
        h_pipe = int(stable_hash(timing, 16), 16)
        pseed = _derive_seed(base_seed, 1, h_pipe >> 32, h_pipe & 0xFFFFFFFF, rep)
    spec = RunSpec(problem=problem, optimizer=optimizer, pipeline=pipeline, run=run, repetition=rep,
                   base_seed=base_seed, seed=seed, pipeline_seed=pseed, run_id="", labels=base["labels"])
    object.__setattr__(spec, "run_id", stable_hash(spec.resolved(), 16))
    return spec


# --------------------------------------------------------------------------- builders

_PROBLEM_CACHE: dict[str, Any] = {}


def build_problem(problem: dict):
    """The Problem object of a resolved problem dict (cached per process)."""
    key = canonical_json(problem)
    cached = _PROBLEM_CACHE.get(key)
    if cached is not None:
        return cached
    from echosim.problems import LeastSquares, Logistic

    kind = problem["kind"]
    if kind == "dataset":
        obj = _build_dataset(problem)
    else:
        args = {k: v for k, v in problem.items() if k != "kind"}
        obj = Logistic(**args) if kind == "logistic" else LeastSquares(**args)
    if len(_PROBLEM_CACHE) > 64:
        _PROBLEM_CACHE.clear()
    _PROBLEM_CACHE[key] = obj
    return obj


def _build_dataset(problem: dict):
    from echosim import datasets

    opts = {"loss": problem["loss"], "l2": problem.get("l2"), "standardize": problem["standardize"],
            "intercept": problem["intercept"]}
    if "name" in problem:
        return datasets.load_dataset(problem["name"], task=problem.get("task"), **opts)
    loader = {"npz": datasets.from_npz, "csv": datasets.from_csv, "svmlight": datasets.from_svmlight}[problem["format"]]
    return loader(problem["path"], task=problem.get("task"), positive=problem.get("positive"), **opts)


def build_optimizer(optimizer: dict):
    """The optimizer spec of a resolved optimizer dict."""
    from echosim import optimizers

    cls = getattr(optimizers, _METHODS[optimizer["method"]])
    extra = {k: optimizer[k] for k in ("sub_batch", "replace", "momentum", "lam") if k in optimizer}
    return cls(lr=optimizer["lr"], **extra)


def build_pipeline(pipeline: dict):
    """The Pipeline of a resolved pipeline dict (echo included for policy 'fixed')."""
    from echosim.arrivals import as_service_time
    from echosim.pipeline import Pipeline

    kw = {k: pipeline[k] for k in ("workers", "prefetch", "policy", "delivery", "blocking", "switch_overhead")}
    if "max_echo" in pipeline:
        kw["max_echo"] = pipeline["max_echo"]
    if pipeline["policy"] in _ECHO_POLICIES:
        kw["echo"] = pipeline["echo"]
    if pipeline.get("shuffle_buffer") is not None:
        kw["shuffle_buffer"] = pipeline["shuffle_buffer"]
    return Pipeline(as_service_time(pipeline["arrival"]), step_time=as_service_time(pipeline["step_time"]), **kw)
