"""Run specs: one resolved run as plain dicts, its seeds (derived from its data-defining
axes, never its grid position), its content hash (the run id), and the builders that
turn it into Problem, Optimizer and Pipeline objects."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from echosim._version import __version__
from echosim.experiments.schema import SCHEMA
from echosim.pipeline.model import POLICIES

__all__ = ["RunSpec", "SweepConfig", "canonical_json", "jsonable", "strict_jsonable", "stable_hash", "make_spec",
           "with_lr", "build_problem", "build_optimizer", "build_pipeline", "loss_of"]


# --------------------------------------------------------------------------- hashing


_PLAIN = frozenset({str, int, float, bool, type(None)})


def jsonable(v):
    """`v` with NumPy values as Python ones, tuples and arrays as lists and keys as
    strings: what `json.dumps` takes (NaN and ±inf stay floats; see `strict_jsonable`).
    The one conversion of NumPy values to JSON: run ids, store rows, manifests, reports."""
    if type(v) in _PLAIN:  # most values: returned as they are, before the isinstance checks
        return v
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return [jsonable(x) for x in v.tolist()]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def strict_jsonable(v):
    """`jsonable`, with every non-finite float (NaN, ±inf) as None: what strict JSON parsers
    accept (``json.dumps(..., allow_nan=False)`` then holds)."""
    v = jsonable(v)
    if isinstance(v, dict):
        return {k: strict_jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [strict_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def canonical_json(obj) -> str:
    """Sorted-key, compact JSON: the text that run ids and config hashes are taken of."""
    return json.dumps(jsonable(obj), sort_keys=True, separators=(",", ":"), allow_nan=False)


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
    echo: int | float | None
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
            "version": __version__,
            "problem": self.problem,
            "optimizer": self.optimizer,
            "pipeline": self.pipeline,
            "echo": self.echo,
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
        if self.echo is not None:
            out["optimizer.echo"] = self.echo  # K, under the config key that sets it
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


def make_spec(base: dict, rep: int, base_seed: int) -> RunSpec:
    """The run of one resolved grid point (``problem``, ``optimizer``, ``pipeline``, ``echo``,
    ``run``, ``labels``) at repetition `rep`: its data seed from (base seed, problem, B,
    rep), its loader seed from (base seed, the pipeline's timing keys, rep), its run id."""
    problem, optimizer, pipeline, run = base["problem"], base["optimizer"], base["pipeline"], base["run"]
    h_problem = int(stable_hash(problem, 16), 16)
    seed = _derive_seed(base_seed, 0, h_problem >> 32, h_problem & 0xFFFFFFFF, optimizer["batch_size"], rep)
    pseed = None
    if pipeline is not None:
        timing = {k: pipeline[k] for k in ("arrival", "step_time", "workers", "prefetch", "delivery",
                                           "blocking", "switch_overhead")}
        h_pipe = int(stable_hash(timing, 16), 16)
        pseed = _derive_seed(base_seed, 1, h_pipe >> 32, h_pipe & 0xFFFFFFFF, rep)
    spec = RunSpec(problem=problem, optimizer=optimizer, pipeline=pipeline, echo=base["echo"], run=run, repetition=rep,
                   base_seed=base_seed, seed=seed, pipeline_seed=pseed, run_id="", labels=base["labels"])
    object.__setattr__(spec, "run_id", stable_hash(spec.resolved(), 16))
    return spec


def with_lr(spec: RunSpec, lr: float) -> RunSpec:
    """`spec` at another learning rate: the same data and loader seeds, a new run id."""
    new = dataclasses.replace(spec, optimizer=dict(spec.optimizer, lr=float(lr)), run_id="")
    object.__setattr__(new, "run_id", stable_hash(new.resolved(), 16))
    return new


# --------------------------------------------------------------------------- builders

_PROBLEM_CACHE: dict[str, Any] = {}


def build_problem(problem: dict):
    """The Problem object of a resolved problem dict (cached per process)."""
    key = canonical_json(problem)
    cached = _PROBLEM_CACHE.get(key)
    if cached is not None:
        return cached
    from echosim.training.problems import PROBLEMS

    kind = problem["kind"]
    if kind == "dataset":
        obj = _build_dataset(problem)
    else:
        obj = PROBLEMS[kind].build(**{k: v for k, v in problem.items() if k != "kind"})
    if len(_PROBLEM_CACHE) > 64:
        _PROBLEM_CACHE.clear()
    _PROBLEM_CACHE[key] = obj
    return obj


def _build_dataset(problem: dict):
    from echosim.data import datasets

    opts = {"loss": problem["loss"], "l2": problem.get("l2"), "standardize": problem["standardize"],
            "intercept": problem["intercept"], "eval_rows": problem.get("eval_rows")}
    if "name" in problem:
        return datasets.load_dataset(problem["name"], task=problem.get("task"), **opts)
    loader = {"npz": datasets.from_npz, "csv": datasets.from_csv, "svmlight": datasets.from_svmlight}[problem["format"]]
    return loader(problem["path"], task=problem.get("task"), positive=problem.get("positive"), **opts)


def build_optimizer(optimizer: dict):
    """The optimizer spec of a resolved optimizer dict (its method's row builds it)."""
    from echosim.training.methods import get_method

    return get_method(optimizer["method"]).build(optimizer["lr"], optimizer)


def loss_of(problem: dict) -> str:
    """The loss name of a resolved problem dict (a synthetic kind's own, or a dataset's ``loss``)."""
    from echosim.training.problems import PROBLEMS

    row = PROBLEMS[problem["kind"]]
    return problem["loss"] if row.loss is None else row.loss


def build_pipeline(pipeline: dict, echo=None):
    """The Pipeline of a resolved pipeline dict; `echo` is K for the policies that take one."""
    from echosim.pipeline.service_times import as_service_time
    from echosim.control.auto import AUTO_OPTIONS
    from echosim.pipeline.model import Pipeline

    kw = {k: pipeline[k] for k in ("workers", "prefetch", "policy", "delivery", "blocking", "switch_overhead")}
    if "max_echo" in pipeline:
        kw["max_echo"] = pipeline["max_echo"]
    if POLICIES[pipeline["policy"]].takes_echo:
        kw["echo"] = echo
    if pipeline.get("shuffle_buffer") is not None:
        kw["shuffle_buffer"] = pipeline["shuffle_buffer"]
    for key in AUTO_OPTIONS:  # policy "auto"
        if key in pipeline:
            kw[key] = pipeline[key]
    return Pipeline(as_service_time(pipeline["arrival"]), step_time=as_service_time(pipeline["step_time"]), **kw)
