"""echosim 0.1's flat module paths, importable for one more release with a warning.

``import echosim.config`` (and ``from echosim.sweep import run_sweep``) resolve to a
module that forwards every attribute to the 0.2 modules that now hold it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

MOVED = {
    "echosim.arrivals": ("echosim.pipeline.service_times", "echosim.pipeline.traces", "echosim.pipeline.service_times"),
    "echosim.profiling": ("echosim.pipeline.profiling", "echosim.pipeline.traces"),
    "echosim.problems": ("echosim.training.problems",),
    "echosim.optimizers": ("echosim.training.methods",),
    "echosim.experiment": ("echosim.training.runner",),
    "echosim.config": ("echosim.experiments.config", "echosim.experiments.schema", "echosim.experiments.specs"),
    "echosim.sweep": ("echosim.experiments.sweep", "echosim.experiments.assemble", "echosim.experiments.executors",
                      "echosim.experiments.report", "echosim.experiments.progress"),
    "echosim.results": ("echosim.experiments.store",),
    "echosim.metrics": ("echosim.experiments.analysis",),
    "echosim.figures": ("echosim.plots.figures",),
}
PUBLIC = {"echosim.datasets": "echosim.data.datasets"}  # a supported shortcut, no warning


class _Forward(types.ModuleType):
    def __init__(self, name, targets):
        super().__init__(name, f"Deprecated: moved to {', '.join(targets)}.")
        self.__targets = targets

    def __getattr__(self, attr):
        for t in self.__targets:
            mod = importlib.import_module(t)
            if hasattr(mod, attr):
                return getattr(mod, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED or fullname in PUBLIC:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        if spec.name in PUBLIC:
            return importlib.import_module(PUBLIC[spec.name])
        warnings.warn(f"{spec.name} moved to {' and '.join(MOVED[spec.name])} in echosim 0.2; the old path "
                      "goes away in 0.3", DeprecationWarning, stacklevel=3)
        return _Forward(spec.name, MOVED[spec.name])

    def exec_module(self, module):
        pass


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
