"""Argument checks shared by the bound and timing functions.

Every check converts its input to a float array, rejects bad values with a
``ValueError`` that names the argument and the allowed range, and returns the array.
Checks run before any arithmetic, so a bad call never returns a partial result.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "as_float",
    "positive",
    "at_least",
    "lr_at_most",
    "broadcast",
    "result",
]


def as_float(name: str, value) -> np.ndarray:
    """Return ``value`` as a float array; non-numeric or non-finite input is an error."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a real number or an array of real numbers, got {value!r}"
        ) from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite, got {_first(arr, bad)}")
    return arr


def positive(name: str, value) -> np.ndarray:
    """``value > 0`` and finite, elementwise."""
    arr = _as_float_unchecked(name, value)
    bad = ~(np.isfinite(arr) & (arr > 0))
    if bad.any():
        raise ValueError(f"{name} must be positive and finite, got {_first(arr, bad)}")
    return arr


def at_least(name: str, value, low: float) -> np.ndarray:
    """``value >= low`` and finite, elementwise."""
    arr = _as_float_unchecked(name, value)
    bad = ~(np.isfinite(arr) & (arr >= low))
    if bad.any():
        raise ValueError(f"{name} must be >= {low:g} and finite, got {_first(arr, bad)}")
    return arr


def lr_at_most(name: str, lr, limit: np.ndarray, limit_text: str) -> np.ndarray:
    """``0 < lr <= limit`` elementwise (``limit`` already validated).

    ``limit_text`` is how the limit is written for the user, e.g. ``"1/beta"``.
    """
    arr = positive(name, lr)
    try:
        ok = np.broadcast_arrays(arr, limit)
    except ValueError:
        raise ValueError(
            f"{name} has shape {arr.shape}, which does not broadcast with the other "
            f"arguments (shape {np.shape(limit)})"
        ) from None
    lr_b, lim_b = ok
    bad = lr_b > lim_b
    if bad.any():
        raise ValueError(
            f"{name} must be in (0, {limit_text}], got {float(lr_b[bad].flat[0])!r} "
            f"with {limit_text} = {float(lim_b[bad].flat[0])!r}"
        )
    return arr


def broadcast(**arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Broadcast the named arrays together; a shape mismatch names the arguments."""
    try:
        return tuple(np.broadcast_arrays(*arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{k}{np.shape(v)}" for k, v in arrays.items())
        raise ValueError(f"arguments do not broadcast together: {shapes}") from None


def result(value):
    """Python float for 0-d results, the array otherwise."""
    arr = np.asarray(value, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def _as_float_unchecked(name: str, value) -> np.ndarray:
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a real number or an array of real numbers, got {value!r}"
        ) from None


def _first(arr: np.ndarray, bad: np.ndarray) -> float:
    """The first offending value, for the error message."""
    return float(arr[bad].flat[0]) if arr.ndim else float(arr)
