"""Optional dependencies: import one where it is needed, or say in one line which extra installs it.

The base install (``pip install echosim``) holds NumPy, Numba, SciPy and Matplotlib:
runs, bounds, the planner's form (b) and sweep estimates work with it. The run store
and the sweep's tables need pyarrow and pandas (``echosim[sweep]``), Dask clusters
``echosim[dask]``. `require` is the one place that turns a missing package into that
sentence.
"""

from __future__ import annotations

import importlib

__all__ = ["EXTRAS", "MissingExtra", "require"]

EXTRAS = {
    "pyarrow": "sweep",
    "pandas": "sweep",
    "distributed": "dask",
}
"""Top-level package → the extra of ``pyproject.toml`` that installs it."""


class MissingExtra(ImportError):
    """An optional package is not installed; the message names the extra that installs it."""


def require(module: str, needed_for: str):
    """Import `module` (e.g. ``"pyarrow.parquet"``), or raise `MissingExtra` naming its extra.

    `needed_for` says what needs it, e.g. ``"the run store"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] != top:  # the package is there but broken
            raise
        extra = EXTRAS.get(top, "sweep")
        raise MissingExtra(f"{needed_for} needs {top}, which is not installed: pip install 'echosim[{extra}]'",
                           name=top) from None
