"""The advisor: should I echo, with which K, and what will it save me?

`plan` turns a loader's timing, the step time and the problem's response to echoing
into candidates (sync, fixed K, greedy; batch sizes; loader workers), their wall-clock
to target and one recommendation. `echoing` echoes batches in a real training loop.
"""

from echosim.plan.advisor import Plan, plan
from echosim.plan.echoing import echoing
from echosim.plan.response import fit_response
from echosim.plan.timing import fit_loader, parse_duration, parse_service_time

__all__ = ["plan", "Plan", "echoing", "fit_response", "fit_loader", "parse_duration", "parse_service_time"]


def _callable_package() -> None:
    """Let ``echosim.plan(...)`` work even when this package, not the function, is bound to
    the name (importing any ``echosim.plan.*`` module binds the package to ``echosim.plan``)."""
    import sys
    import types

    class _Package(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return plan(*args, **kwargs)

    sys.modules[__name__].__class__ = _Package


_callable_package()
