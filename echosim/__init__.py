"""echosim: simulate data echoing under laggard data pipelines.

The public API is re-exported here and loaded on first use, so ``import echosim``
stays cheap (no Numba compilation, no matplotlib).
"""

from echosim._version import __version__

_EXPORTS = {
    "run": "echosim.experiment",
    "Trajectory": "echosim.experiment",
    "LeastSquares": "echosim.problems",
    "Logistic": "echosim.problems",
    "Dataset": "echosim.problems",
    "MinibatchSGD": "echosim.optimizers",
    "EchoedGD": "echosim.optimizers",
    "EchoedSGD": "echosim.optimizers",
    "EchoedNesterov": "echosim.optimizers",
    "EchoedProx": "echosim.optimizers",
    "ServiceTime": "echosim.arrivals",
    "Deterministic": "echosim.arrivals",
    "Exponential": "echosim.arrivals",
    "Gamma": "echosim.arrivals",
    "LogNormal": "echosim.arrivals",
    "Pareto": "echosim.arrivals",
    "Stall": "echosim.arrivals",
    "Trace": "echosim.arrivals",
    "as_service_time": "echosim.arrivals",
    "service_time_from_dict": "echosim.arrivals",
    "profile": "echosim.profiling",
    "fit_service_times": "echosim.profiling",
    "Pipeline": "echosim.pipeline",
    "Schedule": "echosim.pipeline",
    "simulate": "echosim.pipeline",
    "simulate_with_times": "echosim.pipeline",
    "load_config": "echosim.config",
    "ConfigError": "echosim.config",
    "run_sweep": "echosim.sweep",
    "median_band": "echosim.plots",
    "overlay": "echosim.plots",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'echosim' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
