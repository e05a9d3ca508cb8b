"""The planner: should I echo, with which K, and what will it save me?

`plan` (also `echosim.plan`) turns a loader's timing, the step time and the problem's
response to echoing into candidates (sync, fixed K, greedy; batch sizes; loader
workers), their wall-clock to target and a recommendation. It reads records of the
user's own loop (`echosim.loop`: `echoing`, `Records`, `pilot`), kept here by name too.
"""

from echosim.loop import Records, echoing, load_records, pilot
from echosim.planner.advisor import Plan, plan
from echosim.planner.curves import steps_from_curves
from echosim.planner.response import fit_response
from echosim.planner.timing import fit_loader, fit_times, parse_duration, parse_service_time
from echosim.planner.verdict import verdict

__all__ = ["plan", "Plan", "echoing", "pilot", "Records", "load_records", "fit_response", "steps_from_curves",
           "fit_loader", "fit_times", "parse_duration", "parse_service_time", "verdict"]
