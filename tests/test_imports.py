"""Import is cheap, and pure layers never pull in drivers (DESIGN.md: math never imports drivers)."""

import subprocess
import sys

import pytest


def modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_echosim_loads_neither_numba_nor_matplotlib():
    loaded = modules_after("import echosim")
    assert "numba" not in loaded
    assert "matplotlib" not in loaded


@pytest.mark.parametrize("module", ["echosim.training.problems", "echosim.pipeline.service_times", "echosim.pipeline",
                                    "echosim.training.methods", "echosim.training.losses", "echosim.training.runner"])
def test_pure_layers_do_not_import_drivers(module):
    loaded = modules_after(f"import {module}")
    for driver in ("matplotlib", "pandas", "pyarrow", "echosim.experiments.sweep", "echosim.plots", "echosim.cli"):
        assert driver not in loaded, f"{module} imports {driver}"
