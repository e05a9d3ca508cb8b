"""Checks of scalar arguments: an integer, a real number or one of a few choices in the
range a parameter allows, or a ValueError naming the parameter and the range.

The one family every layer uses where a public function or a value object takes a
scalar (the pipeline's fields, a run's batch size and seed, a problem's constants, a
data set's options). NumPy's integer and floating types count as integers and reals
(NumPy registers them with `numbers`); booleans count as neither. Standard library only.

>>> check_int("workers", 4, lo=1)
4
>>> check_int("workers", 0, lo=1)
Traceback (most recent call last):
...
ValueError: workers must be an integer >= 1, got 0
>>> check_real("radius", 2, lo=0, lo_open=True)
2.0
>>> check_choice("design", "sphere", ("gaussian", "sphere"))
'sphere'
"""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["is_int", "is_real", "check_int", "check_real", "check_choice", "range_text"]


def is_int(value: Any) -> bool:
    """An integer of any integral type, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number of any real type (integers included), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def range_text(lo=None, hi=None, lo_open: bool = False, hi_open: bool = False) -> str:
    """">= 1", "> 0 and <= 1", ...: how a range is said in the messages ("" for none)."""
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_open else '>='} {lo:g}" if isinstance(lo, float) else f"{'>' if lo_open else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_open else '<='} {hi:g}" if isinstance(hi, float) else f"{'<' if hi_open else '<='} {hi}")
    return " and ".join(parts)


def _within(x, lo, hi, lo_open, hi_open) -> bool:
    if lo is not None and (x < lo or (lo_open and x == lo)):
        return False
    return not (hi is not None and (x > hi or (hi_open and x == hi)))


def check_int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    """`value` as an int, if it is an integer in [lo, hi] (either bound optional); else
    ValueError("{name} must be an integer >= {lo}, got {value!r}")."""
    if not (is_int(value) and _within(value, lo, hi, False, False)):
        bounds = range_text(lo, hi)
        raise ValueError(f"{name} must be an integer{' ' + bounds if bounds else ''}, got {value!r}")
    return int(value)


def check_real(name: str, value: Any, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
               hi_open: bool = False) -> float:
    """`value` as a float, if it is a finite real number in the range (bounds optional,
    closed unless `lo_open` / `hi_open`); else ValueError("{name} must be a real number,
    got ...") for a non-number, ("{name} must be finite and > 0, got ...") for one out of range."""
    if not is_real(value):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if not (math.isfinite(x) and _within(x, lo, hi, lo_open, hi_open)):
        bounds = range_text(lo, hi, lo_open, hi_open)
        raise ValueError(f"{name} must be finite{' and ' + bounds if bounds else ''}, got {value!r}")
    return x


def check_choice(name: str, value: Any, allowed) -> Any:
    """`value` if it is one of `allowed`; else ValueError("{name} must be one of 'a', 'b';
    got {value!r}")."""
    try:
        ok = value in allowed
    except (TypeError, ValueError):  # unhashable, or an array whose comparison has no truth value
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value
