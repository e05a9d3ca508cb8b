"""echosim: simulate data echoing under laggard data pipelines.

The public API is re-exported here and loaded on first use, so ``import echosim``
stays cheap (no Numba compilation, no matplotlib). The layers, bottom up:
`echosim.pipeline` (the loader), `echosim.training` (the learner),
`echosim.experiments` (configs, runs, the store), `echosim.planner` (should I echo?),
`echosim.plots`; `theory` beside them.
"""

from echosim._version import __version__

_EXPORTS = {
    "run": "echosim.training.runner",
    "run_many": "echosim.training.runner",
    "run_coupled": "echosim.training.runner",
    "start": "echosim.training.runner",
    "start_many": "echosim.training.runner",
    "Trajectory": "echosim.training.runner",
    "LeastSquares": "echosim.training.problems",
    "Logistic": "echosim.training.problems",
    "Dataset": "echosim.training.problems",
    "MinibatchSGD": "echosim.training.methods",
    "EchoedGD": "echosim.training.methods",
    "EchoedSGD": "echosim.training.methods",
    "EchoedNesterov": "echosim.training.methods",
    "EchoedProx": "echosim.training.methods",
    "EchoedHeavyBall": "echosim.training.methods",
    "EchoedAdam": "echosim.training.methods",
    "EchoedAdamW": "echosim.training.methods",
    "ServiceTime": "echosim.pipeline.service_times",
    "Deterministic": "echosim.pipeline.service_times",
    "Exponential": "echosim.pipeline.service_times",
    "Gamma": "echosim.pipeline.service_times",
    "LogNormal": "echosim.pipeline.service_times",
    "Pareto": "echosim.pipeline.service_times",
    "Stall": "echosim.pipeline.service_times",
    "Trace": "echosim.pipeline.traces",
    "as_service_time": "echosim.pipeline.service_times",
    "service_time_from_dict": "echosim.pipeline.service_times",
    "profile": "echosim.pipeline.profiling",
    "BatchTime": "echosim.pipeline.batch_time",
    "fit_batch_time": "echosim.pipeline.batch_time",
    "fit_service_times": "echosim.pipeline.traces",
    "Pipeline": "echosim.pipeline.model",
    "Schedule": "echosim.pipeline.schedule",
    "simulate": "echosim.pipeline.schedule",
    "simulate_with_times": "echosim.pipeline.schedule",
    "load_config": "echosim.experiments.config",
    "ConfigError": "echosim.experiments.schema",
    "run_sweep": "echosim.experiments.sweep",
    "median_band": "echosim.plots.views",
    "overlay": "echosim.plots.views",
    "plan": "echosim.planner.advisor",
    "verdict": "echosim.planner.verdict",
    "echoing": "echosim.loop.echoing",
    "pilot": "echosim.loop.pilot",
    "Records": "echosim.loop.records",
    "load_records": "echosim.loop.records",
}
_MODULES = {"datasets": "echosim.datasets"}  # public submodules (echosim/datasets.py)

__all__ = ["__version__", *_EXPORTS, *_MODULES]


def __getattr__(name):
    import importlib

    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'echosim' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)


from echosim import _moved  # noqa: E402  (0.1 module paths, deprecated for one release)

_moved.install()
