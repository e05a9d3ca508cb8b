"""Policy "auto" simulated: the pipeline and the training run advanced together.

Under "auto" the cap on K_t of each fresh batch is decided from the first-step losses
of the batches before it (`echosim.control.auto.AutoEcho`, fed by the same
`echosim.control.Driver` as a real loop's `echosim.echoing`), so neither the pipeline
nor the optimizer can be run alone. `echosim.training.runner.run_coupled` (via `drive`)
interleaves them a block at a time:

1. the pipeline's event loop runs until the accelerator is about to take a batch whose
   cap is not decided yet (`echosim.pipeline.schedule.simulate_deciding`); the K_t
   and take times of every batch before it are final by then;
2. the optimizer (`echosim.training.runner.Run`) advances over the batches not yet
   trained on by those K_t, recording each batch's first-step loss;
3. the driver is told what a real loop tells it, in the same order, batch by batch:
   ``begin(t, tau_t)``, ``first_loss(t, y_t)``, ``end(t, K_t)``, with tau_t the time
   batch t's first step begins (its take time plus the switch overhead); then
   ``begin(n, tau_n)`` for the waiting batch gives its cap, which holds for the rest of
   the controller's run (`Driver.holds`): the event loop runs on that far.

The event loop pauses before a take, where nothing has changed yet, so the schedule
is bitwise ``simulate(pipeline, T, seed, caps=<the caps decided>)`` and the trajectory
bitwise ``run(problem, optimizer, echo=<that schedule>, first_loss=True)``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from echosim.control import Driver, make_controller
from echosim.control.auto import AUTO_OPTIONS
from echosim.pipeline.model import POLICIES, Pipeline
from echosim.pipeline.schedule import Schedule, simulate_deciding

__all__ = ["Coupled", "drive", "CAP_CHANGES_SHOWN"]

CAP_CHANGES_SHOWN = 24
"""Cap changes that `Coupled.summary` lists (the first ones; the count says how many in all)."""


@dataclass(frozen=True, eq=False)
class Coupled:
    """A run under policy "auto": its trajectory, the simulated schedule, the cap of every
    fresh batch and the controller's decisions (each with the estimates it acted on)."""

    trajectory: object  # echosim.training.runner.Trajectory
    schedule: Schedule
    caps: np.ndarray
    decisions: tuple

    def summary(self) -> dict:
        """A few numbers: the final and mean cap, decision counts, where the cap changed."""
        counts: dict = {}
        for d in self.decisions:
            counts[d["action"]] = counts.get(d["action"], 0) + 1
        caps = self.caps
        at = np.flatnonzero(np.diff(caps)) + 1
        shown = " ".join(f"{int(t)}:{int(caps[t])}" for t in at[:CAP_CHANGES_SHOWN])
        return {"final_cap": int(caps[-1]), "mean_cap": float(caps.mean()), "first_cap": int(caps[0]),
                "cap_changes": int(at.size), "caps": f"0:{int(caps[0])}" + (" " + shown if shown else ""),
                "decisions": " ".join(f"{k} {v}" for k, v in sorted(counts.items()))}


def drive(run, pipeline: Pipeline, pipeline_seed) -> Coupled:
    """Advance `run` (a `echosim.training.runner.Run` started with ``first_loss=True`` and
    its n_batches) behind `pipeline` under policy "auto" (see the module docstring); the
    public face is `echosim.training.runner.run_coupled`."""
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    if not POLICIES[pipeline.policy].coupled:
        raise ValueError(f"pipeline.policy: run_coupled simulates policy 'auto' (caps from the losses); "
                         f"{pipeline.policy!r} is simulated alone: echosim.run(..., echo=simulate(pipeline, ...))")
    if run.method.one_step:
        raise ValueError(f"{type(run.optimizers[0]).__name__} takes one step per fresh batch; policy 'auto' "
                         "echoes (use an echoed method, or policy 'sync')")
    T = run.T
    driver = Driver(make_controller("auto", max_echo=pipeline.max_echo,
                                    options={k: getattr(pipeline, k) for k in AUTO_OPTIONS}))
    h = pipeline.switch_overhead
    caps = np.zeros(T, dtype=np.int64)
    done = [0, 0]  # batches trained on (and told to the driver); batches begun

    def begin(t, take):
        c = driver.begin(t, float(take) + h)
        done[1] = t + 1
        return c

    def tell(n, K, take):
        """Train on batches done..n-1 and tell the driver, in a real loop's order."""
        t0 = done[0]
        if n == t0:
            return
        first = run.advance(K[t0:n])
        for t in range(t0, n):
            if t >= done[1]:
                c = begin(t, take[t])
                if c != caps[t] and not driver.dead:  # pragma: no cover - Driver.holds promised it
                    raise RuntimeError(f"auto: the cap of batch {t} changed within a run ({caps[t]} -> {c}); "
                                       "please report")
            driver.first_loss(t, float(first[t - t0]))
            driver.end(t, int(K[t]))
        done[0] = n

    def decide(n, tau, K, take):
        tell(n, K, take)
        c = begin(n, tau)
        m = min(driver.holds(), T - n)
        caps[n:n + m] = c
        return caps[n:n + m]

    schedule = simulate_deciding(pipeline, T, pipeline_seed, decide)
    tell(T, schedule.steps_per_batch, schedule.take_time)
    traj = run.trajectory()
    traj = dataclasses.replace(traj, time=schedule.time_after(traj.steps))
    return Coupled(trajectory=traj, schedule=schedule, caps=caps, decisions=tuple(driver.controller.decisions))
