"""Echo controllers: an observation per fresh batch in, a cap on K_t out.

One protocol (`Controller`), one registry (`CONTROLLERS`: "sync", "fixed", "greedy",
"auto") and one driver (`Driver`) that turns a loop's events (a fresh batch begins,
its first step's loss, the paired next-batch loss, a probe loss, the steps it got)
into `Observation`s in a fixed order. `echosim.echoing` (a real loop) and the
simulator's policy "auto" (`echosim.training.coupled`) both go through `Driver`, so
the controller sees the same sequence of calls, on the same clock, in both.

Pure Python (the standard library only): a controller is decision logic, below the
pipeline layer, which names it in its policy table.
"""

from echosim.control.auto import AUTO_DEFAULTS, AUTO_OPTIONS, AutoEcho
from echosim.control.base import MAX_ECHO, Controller, Fixed, Greedy, Observation
from echosim.control.registry import CONTROLLERS, make_controller
from echosim.control.driver import Driver, diverging

__all__ = ["Observation", "Controller", "Fixed", "Greedy", "AutoEcho", "CONTROLLERS", "make_controller", "Driver",
           "diverging", "AUTO_OPTIONS", "AUTO_DEFAULTS", "MAX_ECHO"]
