"""Argument checks shared by the bound and timing functions.

Every check converts its input to a float array, rejects bad values with a
``ValueError`` that names the argument and the allowed range, and returns the array.
Checks run before any arithmetic, so a bad call never returns a partial result.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

__all__ = [
    "as_float",
    "positive",
    "at_least",
    "lr_at_most",
    "broadcast",
    "result",
    "named_broadcast",
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


def named_broadcast(f=None, *, batches_last=()):
    """Decorator: before `f` runs, check that its array arguments broadcast together.

    A mismatch is a ValueError naming every non-scalar argument and its shape, instead
    of NumPy's "operands could not be broadcast together" from deep in the formula.
    Arguments in `batches_last` (e.g. ``K_t``) hold batches on their last axis, which
    is summed over, so only their leading axes take part.
    """
    if f is None:
        return functools.partial(named_broadcast, batches_last=batches_last)
    sig = inspect.signature(f)

    @functools.wraps(f)
    def checked(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return f(*args, **kwargs)  # Python's own message for a missing or unknown argument
        shapes = {}
        for name, value in bound.arguments.items():
            if value is None or isinstance(value, (str, bytes)) or callable(value):
                continue
            try:
                shape = np.shape(value)
            except ValueError:  # ragged: the argument's own check names it
                continue
            shapes[name] = shape[:-1] if name in batches_last else shape
        try:
            np.broadcast_shapes(*shapes.values())
        except ValueError:
            shown = ", ".join(
                f"{k} of shape {v}" + (" (after summing its last axis, the batches)" if k in batches_last else "")
                for k, v in shapes.items() if v
            )
            raise ValueError(f"{f.__name__}: arguments do not broadcast together: {shown}") from None
        return f(*args, **kwargs)

    return checked


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
