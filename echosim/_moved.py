"""echosim 0.1's flat module paths, importable for one more release with a warning.

``import echosim.config`` (and ``from echosim.sweep import run_sweep``) resolve to a
module that forwards every attribute to the 0.2 modules that now hold it. Every public
name a 0.1 module had (`NAMES_0_1`) resolves: to the 0.2 object of that name, or, where
0.2 renamed or reshaped it, to the replacement in `COMPAT` (a thin adapter with the 0.1
signature where the 0.2 function differs). ``echosim.datasets`` is a real module, not
one of these (a supported path).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

MOVED = {
    "echosim.arrivals": ("echosim.pipeline.service_times", "echosim.pipeline.traces"),
    "echosim.profiling": ("echosim.pipeline.profiling", "echosim.pipeline.traces"),
    "echosim.problems": ("echosim.training.problems",),
    "echosim.optimizers": ("echosim.training.methods",),
    "echosim.experiment": ("echosim.training.runner", "echosim.training.methods", "echosim.training.problems"),
    "echosim.config": ("echosim.experiments.config", "echosim.experiments.schema", "echosim.experiments.specs"),
    "echosim.sweep": ("echosim.experiments.sweep", "echosim.experiments.assemble", "echosim.experiments.executors",
                      "echosim.experiments.report", "echosim.experiments.progress", "echosim.experiments.specs"),
    "echosim.results": ("echosim.experiments.store", "echosim.experiments.tables"),
    "echosim.metrics": ("echosim.experiments.analysis",),
    "echosim.figures": ("echosim.plots.figures", "echosim.plots.figure_drawing", "echosim.training.problems"),
}

NAMES_0_1 = {
    "echosim.arrivals": ("Deterministic", "Exponential", "Gamma", "LogNormal", "Pareto", "ServiceTime", "Stall", "Trace",
        "as_service_time", "service_time_from_dict"),
    "echosim.config": ("ConfigError", "DEFAULT_TOML", "FIELDS", "Field", "PAPER_LRS", "RunSpec", "SCHEMA", "SECTIONS",
        "SweepConfig", "build_optimizer", "build_pipeline", "build_problem", "canonical_json",
        "default_config", "load_config", "lr_grid", "parse_config", "stable_hash"),
    "echosim.experiment": ("AUTO_LOG_ALL", "AUTO_LOG_POINTS", "BATCHES_PER_BLOCK", "CHUNK_BYTES", "EchoedGD", "EchoedNesterov",
        "EchoedSGD", "LOSS_CODES", "Optimizer", "Problem", "STREAM_OPTIMIZER", "Trajectory", "block_rng",
        "chunk_batches", "compile_kernels", "learning_rates", "log_points", "run"),
    "echosim.figures": ("BATCHES_PER_BLOCK", "CONFIG_DIR", "DPI", "FIGURES", "Problem", "bounds_vs_simulation_data",
        "convergence_vs_echo_data", "draw_bounds_vs_simulation", "draw_convergence_vs_echo",
        "draw_greedy_vs_fixed", "draw_predicted_vs_simulated", "draw_speedup_vs_R", "greedy_vs_fixed_data",
        "load_figure_config", "make_figures", "paper_lr_grid", "predicted_vs_simulated_data",
        "speedup_vs_R_data"),
    "echosim.metrics": ("ITERATES", "UNITS", "convergence", "convergence_index", "fit_saturation", "loss_threshold",
        "regime", "trailing_mean", "tune"),
    "echosim.optimizers": ("EchoedGD", "EchoedNesterov", "EchoedProx", "EchoedSGD", "LearningRate", "MinibatchSGD",
        "OPTIMIZERS", "Optimizer", "learning_rates"),
    "echosim.problems": ("BATCHES_PER_BLOCK", "DESIGNS", "Dataset", "LOSSES", "LeastSquares", "Logistic", "Problem",
        "STREAM_DATA", "STREAM_OPTIMIZER", "SeparableDataError", "block_rng"),
    "echosim.profiling": ("Deterministic", "Exponential", "FAMILIES", "Fit", "Gamma", "LogNormal", "Pareto", "ServiceTime",
        "Trace", "fit_service_times", "profile"),
    "echosim.results": ("CURVE_COLUMNS", "FAILED", "RESULTS_SCHEMA", "Results", "SHARDS", "clean_temp", "finished_ids",
        "load", "merge", "provenance", "read_failure", "read_manifest", "read_shard", "shard_path",
        "write_failure", "write_manifest", "write_run", "write_shard"),
    "echosim.sweep": ("Progress", "SweepConfig", "SweepError", "SweepReport", "build_optimizer", "build_pipeline",
        "build_problem", "default_workers", "estimate", "execute_run", "format_tuned", "regime_check",
        "results", "run_sweep", "simulate_budget", "truncate_schedule", "warm_up"),
}
"""Every public name of each 0.1 module (its ``__all__``, what it defined and what it
imported from echosim), read from the 0.1 source: each one resolves."""


# --------------------------------------------------------------------------- adapters


def _loss_codes():
    from echosim.training.losses import LOSSES

    return {name: row.code for name, row in LOSSES.items()}


def _optimizers():
    from echosim.training import methods

    return {name: getattr(methods, name) for name in methods.__all__
            if isinstance(getattr(methods, name), type) and issubclass(getattr(methods, name), methods.Optimizer)
            and name != "Optimizer"}


def paper_lr_grid():
    """Agarwal et al.'s learning-rate grid, 10^(-2 + i/20) for i = 0..60 (0.01 ... 10)."""
    import numpy as np

    from echosim.experiments.schema import PAPER_LRS

    return np.asarray(PAPER_LRS, dtype=float)


def load_figure_config(name: str, quick: bool = False, path=None):
    """0.1's `load_figure_config`: the figure's config, now a sweep config
    (`echosim.plots.figures.figure_config`; a TOML file at `path` instead if given)."""
    if path is None:
        from echosim.plots.figures import figure_config

        return figure_config(name, quick=quick)
    from echosim.experiments.config import load_config

    return load_config(path, quick=quick)


def _figure_data(name: str):
    def data(cfg, workers: int | None = 1):
        """0.1's figure data from its config: the figure's sweep is run (finished runs are
        reused from the store) and its view computed (`echosim.plots.figures`)."""
        from echosim.experiments.specs import SweepConfig
        from echosim.experiments.sweep import run_sweep
        from echosim.plots.figures import FIGURES

        if not isinstance(cfg, SweepConfig):
            raise ValueError(f"cfg: in echosim 0.2 a figure's config is a sweep config; get it with "
                             f"load_figure_config({name!r}) or echosim.plots.figures.figure_config, got "
                             f"{type(cfg).__name__}")
        report = run_sweep(cfg, workers=workers, progress=False)
        return FIGURES[name][0](report.summary, report.curves, report.tuned)

    data.__name__ = data.__qualname__ = f"{name}_data"
    return data


def _store(out):
    from echosim.experiments.store import Store

    return Store(out)


def finished_ids(out) -> set:
    """Run ids with a result in the run store `out` (0.1: a sweep's directory of shards)."""
    return _store(out).finished()


def read_failure(out, run_id: str):
    """The failure record of `run_id` in the run store `out`, or None."""
    return _store(out).failure(run_id)


def write_run(out, payload: dict):
    """Store one run's payload in the run store `out` (a pack of one, or a failure record); its path."""
    from echosim.experiments.store import FAILED

    store = _store(out)
    store.add(payload)
    store.flush()
    rid = payload["summary"]["run_id"]
    return store.root / FAILED / f"{rid}.json" if payload["summary"]["status"] == "failed" else shard_path(out, rid)


def write_shard(out, summary: dict, curves: dict):
    """Store one finished run (summary and curves) in the run store `out`; the pack's path."""
    return write_run(out, {"summary": summary, "curves": curves})


def write_failure(out, summary: dict):
    """Store the failure record of a run in the run store `out`; its path."""
    return write_run(out, {"summary": summary, "curves": None})


def shard_path(out, run_id: str):
    """The pack of the run store `out` that holds `run_id` (0.1: one shard per run), or None."""
    store = _store(out)
    return store._load_index().get(run_id)


def read_shard(path):
    """(summary, curves) of the one run in a pack (0.1: a shard); ValueError if it holds several."""
    from pathlib import Path

    path = Path(path)
    store = _store(path.parent.parent)
    ids = [rid for rid, packs in (store._load_index() and store._packs).items() if path in packs]
    if len(ids) != 1:
        raise ValueError(f"path: {str(path)!r} holds {len(ids)} runs, not one; read them with "
                         "echosim.experiments.store.Store(root).read(run_ids)")
    return store.read(ids)[ids[0]]


def simulate_budget(pipeline, budget: float, seed: int, batch_size: int | None = None):
    """0.1's (schedule, steps done by the budget) (`echosim.pipeline.schedule.simulate_until`)."""
    from echosim.pipeline.schedule import simulate_until

    schedule, kept = simulate_until(pipeline, budget, seed, batch_size)
    return schedule, kept.n_steps


def truncate_schedule(schedule, n: int):
    """The first `n` steps of a Schedule (`Schedule.first_steps`)."""
    return schedule.first_steps(n)


def _results_module():
    return importlib.import_module("echosim.results")


_FIGURE_NAMES = ("convergence_vs_echo", "bounds_vs_simulation", "speedup_vs_R", "greedy_vs_fixed",
                 "predicted_vs_simulated")

COMPAT = {
    ("echosim.experiment", "AUTO_LOG_ALL"): 1000,  # 0.1's values; 0.2's log="auto" rule: runner.AUTO_LOG_MAX
    ("echosim.experiment", "AUTO_LOG_POINTS"): 400,
    ("echosim.experiment", "LOSS_CODES"): _loss_codes,
    ("echosim.optimizers", "OPTIMIZERS"): _optimizers,
    ("echosim.profiling", "FAMILIES"): lambda: importlib.import_module("echosim.pipeline.traces").FITTED,
    ("echosim.figures", "paper_lr_grid"): paper_lr_grid,
    ("echosim.figures", "load_figure_config"): load_figure_config,
    **{("echosim.figures", f"{n}_data"): (lambda n=n: _figure_data(n)) for n in _FIGURE_NAMES},
    ("echosim.results", "SHARDS"): lambda: importlib.import_module("echosim.experiments.store").PACKS,
    ("echosim.results", "finished_ids"): finished_ids,
    ("echosim.results", "read_failure"): read_failure,
    ("echosim.results", "write_run"): write_run,
    ("echosim.results", "write_shard"): write_shard,
    ("echosim.results", "write_failure"): write_failure,
    ("echosim.results", "shard_path"): shard_path,
    ("echosim.results", "read_shard"): read_shard,
    ("echosim.sweep", "simulate_budget"): simulate_budget,
    ("echosim.sweep", "truncate_schedule"): truncate_schedule,
    ("echosim.sweep", "results"): _results_module,
}
"""(0.1 module, name) -> what it resolves to where 0.2 has no object of that name in the
module's targets: a value, a function with 0.1's signature, or a zero-argument callable
(a lambda or an underscored helper) that builds the value when first asked for."""


def _compat(module: str, attr: str):
    value = COMPAT[(module, attr)]
    if callable(value) and getattr(value, "__name__", "").startswith(("_", "<lambda>")):
        return value()
    return value


class _Forward(types.ModuleType):
    def __init__(self, name, targets):
        super().__init__(name, f"Deprecated: moved to {', '.join(targets)}.")
        self.__targets = targets

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if (self.__name__, attr) in COMPAT:
            value = _compat(self.__name__, attr)
            setattr(self, attr, value)
            return value
        for t in self.__targets:
            mod = importlib.import_module(t)
            if hasattr(mod, attr):
                return getattr(mod, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(NAMES_0_1.get(self.__name__, ())))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {' and '.join(MOVED[spec.name])} in echosim 0.2; the old path "
                      "goes away in 0.3", DeprecationWarning, stacklevel=3)
        return _Forward(spec.name, MOVED[spec.name])

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
