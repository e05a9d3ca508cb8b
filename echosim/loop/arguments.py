"""What the loop hands to `echoing`, checked: its arguments at construction (the clock
called once), and the numbers `report` takes (a 0-d tensor of any framework read now, or
kept detached to be read later); each error names the argument.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Iterator

import numpy as np

from echosim.control.auto import AUTO_OPTIONS, check_auto_option

__all__ = ["as_real", "batch_len", "callable_name", "check_arguments", "check_clock", "check_grad_sq",
           "hint_set_epoch", "len_or_none", "read_later", "synced"]


def check_arguments(iterable, policy, max_echo, prefetch, epochs, batch_size, clock, auto, on_epoch, sync,
                    keep_steps) -> int | None:
    """`echoing`'s arguments checked, in the order of its signature (the clock called once);
    ValueError naming the first bad one. Returns K (None under "greedy" and "auto")."""
    allowed = "'greedy', 'sync', 'auto' or an integer K >= 1"
    if isinstance(policy, str):
        if policy not in ("greedy", "sync", "auto"):
            raise ValueError(f"policy: expected {allowed}, got {policy!r}")
        K = 1 if policy == "sync" else None
    elif isinstance(policy, numbers.Integral) and not isinstance(policy, bool) and policy >= 1:
        K = int(policy)
    else:
        raise ValueError(f"policy: expected {allowed}, got {policy!r}")
    for name, v in (("max_echo", max_echo), ("prefetch", prefetch), ("keep_steps", keep_steps)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, numbers.Integral)
                               or epochs < 1):
        raise ValueError(f"epochs: expected an integer >= 1 or None (repeat until the loop stops), "
                         f"got {epochs!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                   or batch_size < 1):
        raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
    if not callable(clock):
        raise ValueError(f"clock: expected a callable returning seconds, got {clock!r}")
    check_clock(clock)
    for name, f in (("on_epoch", on_epoch), ("sync", sync)):
        if f is not None and not callable(f):
            raise ValueError(f"{name}: expected a callable, got {type(f).__name__} {f!r:.60}")
    if not isinstance(iterable, Iterable):
        raise ValueError(f"iterable: expected an iterable of batches (e.g. a DataLoader), got "
                         f"{type(iterable).__name__}")
    if epochs != 1 and isinstance(iterable, Iterator):
        raise ValueError("epochs: this iterable is a one-pass iterator (a generator?), which cannot be "
                         "re-iterated; pass a re-iterable such as a DataLoader or a list, or epochs=1")
    if auto is not None and policy != "auto":
        raise ValueError(f"auto: options of policy 'auto', but policy is {policy!r}")
    if auto is not None and not isinstance(auto, dict):
        raise ValueError(f"auto: expected a dict of options {', '.join(AUTO_OPTIONS)}, got {auto!r}")
    for k, v in (auto or {}).items():
        check_auto_option(k, v)
    return K


def callable_name(f) -> str:
    """A callable's dotted name for messages and records (``time.perf_counter``)."""
    qual = getattr(f, "__qualname__", None) or type(f).__name__
    mod = getattr(f, "__module__", None)
    if mod is None and getattr(f, "__self__", None) is not None:
        mod = type(f.__self__).__module__
    return f"{mod}.{qual}" if mod and mod != "builtins" else qual


def batch_len(batch) -> int | None:
    """The number of examples in a batch, where it can be read off (first array-like field)."""
    b = batch
    for _ in range(3):
        shape = getattr(b, "shape", None)
        if shape is not None and len(shape) >= 1:
            return int(shape[0])
        if isinstance(b, (list, tuple)) and b:
            b = b[0]
        elif isinstance(b, dict) and b:
            b = next(iter(b.values()))
        else:
            return None
    return None


def len_or_none(iterable) -> int | None:
    """``len(iterable)``, or None where it has none."""
    try:
        return int(len(iterable))
    except (TypeError, ValueError, NotImplementedError):  # no len (an IterableDataset's loader raises)
        return None


def hint_set_epoch(iterable) -> None:
    """Say so when echoing re-iterates a loader whose sampler reshuffles by ``set_epoch``."""
    sampler = getattr(iterable, "sampler", None)
    if callable(getattr(sampler, "set_epoch", None)):
        warnings.warn(f"echoing: the loader's sampler ({type(sampler).__name__}) has set_epoch, and echoing passes "
                      "over the loader more than once: pass on_epoch=loader.sampler.set_epoch so that every pass "
                      "is shuffled anew", RuntimeWarning, stacklevel=3)


def as_real(name: str, value) -> float:
    """A real number from a Python or NumPy scalar, a 0-d array or a 0-d tensor of any framework;
    ValueError naming `name` and the type for anything else."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or isinstance(value, (list, tuple, dict, set)):
        raise ValueError(f"{name}: expected a real number (a float, or a 0-d array or tensor), got "
                         f"{type(value).__name__} {value!r:.60}")
    if isinstance(value, numbers.Real):
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"{name}: {value!r:.40} does not fit a float") from None
    shape = getattr(value, "shape", None)
    if shape is None or not hasattr(value, "item"):
        raise ValueError(f"{name}: expected a real number (a float, or a 0-d array or tensor), got "
                         f"{type(value).__name__}")
    if tuple(shape) != ():
        raise ValueError(f"{name}: expected a scalar (0-d), got a {type(value).__name__} of shape {tuple(shape)}")
    is_complex = getattr(value, "is_complex", None)
    dtype = getattr(value, "dtype", None)
    if (callable(is_complex) and is_complex()) or (isinstance(dtype, np.dtype) and dtype.kind == "c"):
        raise ValueError(f"{name}: expected a real number, got a complex {type(value).__name__}")
    try:
        v = value.item()
    except Exception as exc:  # noqa: BLE001 - a tensor on a device it cannot be read from
        raise ValueError(f"{name}: could not read the value of this {type(value).__name__} "
                         f"({type(exc).__name__}: {exc})"[:300]) from None
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise ValueError(f"{name}: expected a real number, got {type(value).__name__} holding {type(v).__name__}")
    return float(v)


def read_later(name: str, value):
    """A 0-d tensor of a framework other than NumPy, checked without reading its value and
    detached from any autograd graph, to be read later; None for anything else (read now)."""
    if isinstance(value, (numbers.Number, np.ndarray, np.generic, str, bytes, list, tuple, dict, set)):
        return None
    shape = getattr(value, "shape", None)
    if shape is None or not hasattr(value, "item"):
        return None  # as_real says what is wrong with it
    if tuple(shape) != ():
        raise ValueError(f"{name}: expected a scalar (0-d), got a {type(value).__name__} of shape {tuple(shape)}")
    is_complex = getattr(value, "is_complex", None)
    if callable(is_complex) and is_complex():
        raise ValueError(f"{name}: expected a real number, got a complex {type(value).__name__}")
    if "bool" in str(getattr(value, "dtype", "")) or getattr(value, "is_meta", False):
        return None  # as_real refuses it (a tensor without data has no value to read later either)
    detach = getattr(value, "detach", None)
    return detach() if callable(detach) else value


def synced(clock, sync):
    """A reading of `clock` after a call of `sync` (``echoing(sync=...)``)."""
    def read():
        sync()
        return clock()
    return read


def check_clock(clock) -> None:
    """One call of `clock`: it must return a finite real number (seconds)."""
    try:
        t = clock()
    except Exception as exc:  # noqa: BLE001 - the user's clock, named in the message
        raise ValueError(f"clock: calling it raised {type(exc).__name__}: {exc}"[:200]) from None
    if isinstance(t, (bool, np.bool_)) or not isinstance(t, numbers.Real) or not math.isfinite(t):
        raise ValueError(f"clock: expected a callable returning seconds (a finite real number), it returned "
                         f"{type(t).__name__} {t!r:.40}")


def check_grad_sq(value, B):
    """(b, |g_b|^2, |g_B|^2) checked: 1 <= b < B integers, squared norms finite and >= 0."""
    if not isinstance(value, tuple) or len(value) != 3:
        raise ValueError(f"report: grad_sq: expected a tuple (b, |g_b|^2, |g_B|^2), got {value!r:.80}")
    b = value[0]
    if B is None:
        raise ValueError("report: grad_sq: the batch size B is unknown (pass batch_size= to echoing)")
    if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not 1 <= b < B:
        raise ValueError(f"report: grad_sq: b must be an integer in 1..{B - 1} (a part of the batch of B = {B}), got {b!r}")
    sq = [as_real("report: grad_sq", x) for x in value[1:]]
    if not all(math.isfinite(x) and x >= 0 for x in sq):
        raise ValueError(f"report: grad_sq: squared norms must be finite and >= 0, got {sq}")
    return int(b), sq[0], sq[1]
