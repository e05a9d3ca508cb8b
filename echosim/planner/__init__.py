"""The planner: should I echo, with which K, and what will it save me?

`plan` (also `echosim.plan`) turns a loader's timing, the step time and the problem's
response to echoing into candidates (sync, fixed K, greedy; batch sizes; loader
workers), their wall-clock to target and a recommendation. `echoing` echoes batches
in a real training loop and records what happened (`Records`); `pilot` runs a short
pilot through it, whose records `plan` can take its timing from.
"""

from echosim.planner.advisor import Plan, plan
from echosim.planner.echoing import echoing
from echosim.planner.pilot import pilot
from echosim.planner.records import Records, load_records
from echosim.planner.response import fit_response
from echosim.planner.timing import fit_loader, fit_times, parse_duration, parse_service_time

__all__ = ["plan", "Plan", "echoing", "pilot", "Records", "load_records", "fit_response", "fit_loader", "fit_times",
           "parse_duration", "parse_service_time"]
