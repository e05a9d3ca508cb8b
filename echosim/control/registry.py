"""The registry of echo controllers: policy name -> factory, and `make_controller`."""

from __future__ import annotations

from echosim.control.auto import AutoEcho
from echosim.control.base import MAX_ECHO, Controller, Fixed, Greedy

__all__ = ["CONTROLLERS", "make_controller"]

CONTROLLERS = {"sync": lambda **kw: Fixed(1), "fixed": lambda K=1, **kw: Fixed(K),
               "greedy": lambda max_echo=MAX_ECHO, **kw: Greedy(max_echo), "auto": AutoEcho}
"""The registry: policy name -> factory of its controller."""


def make_controller(policy: str, *, K: int = 1, max_echo: int = MAX_ECHO, options: dict | None = None) -> Controller:
    """The controller of `policy` ("sync", "fixed" with K, "greedy" or "auto" with its options)."""
    if policy not in CONTROLLERS:
        raise ValueError(f"policy: expected one of {', '.join(CONTROLLERS)}, got {policy!r}")
    if options and policy != "auto":
        raise ValueError(f"options: only policy 'auto' takes options, got {options!r} for {policy!r}")
    if policy == "auto":
        return CONTROLLERS["auto"](max_echo=max_echo, **(options or {}))
    return CONTROLLERS[policy](K=K, max_echo=max_echo)
