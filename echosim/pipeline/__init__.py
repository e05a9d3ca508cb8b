"""The laggard loader: service times, measured traces and profiling, the pipeline and
its echo policies, and `simulate(pipeline, T, seed) -> Schedule` (Numba event loop).

Pure layer: imports NumPy, SciPy and Numba only.
"""

from echosim.pipeline.batch_time import BatchTime, fit_batch_time
from echosim.pipeline.model import BLOCKING, DELIVERIES, ECHO_POLICIES, MAX_ECHO, POLICIES, Pipeline, Policy, check_echo
from echosim.pipeline.profiling import profile

from echosim.pipeline.schedule import Schedule, echo_schedule, simulate, simulate_until, simulate_with_times
from echosim.pipeline.service_times import (
    FAMILIES,
    Deterministic,
    Exponential,
    Gamma,
    LogNormal,
    Pareto,
    ServiceTime,
    Stall,
    as_service_time,
    service_time_from_dict,
)
from echosim.pipeline.traces import Fit, Trace, fit_service_times

__all__ = [
    "Pipeline", "Schedule", "simulate", "simulate_until", "simulate_with_times", "echo_schedule", "check_echo", "ECHO_POLICIES", "POLICIES", "Policy", "MAX_ECHO",
    "DELIVERIES", "BLOCKING",
    "ServiceTime", "Deterministic", "Exponential", "Gamma", "LogNormal", "Pareto", "Stall", "Trace",
    "BatchTime", "fit_batch_time", "FAMILIES", "as_service_time", "service_time_from_dict", "profile", "Fit", "fit_service_times",
]
