"""The one-line answer to "is my loader the bottleneck, and what would echoing buy?",
from the records of runs through `echosim.echoing` (a pilot's, or any run's).

`input_bound` reads the waits: in the steady state (every fresh batch but the first
of the run and the first of each later epoch), the fraction of steps that waited on the
loader and the wait exposed per step; the stalls at epoch boundaries (a loader
restarting its workers, a sampler reshuffling) and at start-up are counted apart, so
that they neither hide nor inflate the steady state. `Verdict` puts that beside what
the plan predicts echoing saves (`echosim.planner.verdict` makes the plan).

Examples
--------
>>> import echosim
>>> it = echosim.echoing(range(6), "sync")
>>> for batch in it:
...     it.report(1.0)
>>> m = input_bound(it.records())
>>> m["steps"], m["epoch_stalls"]
(5, 0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["input_bound", "Verdict", "WAITED", "judge", "prediction"]

NEEDS = ("the plan needs your model's steps to target (steps_to_target= at two batch sizes without echoing, "
         "or --steps-to-target 64=5200,1024=900), or a simulated stand-in (problem=)")

WAITED = (0.05, 50e-6)
"""A step waited on the loader if its wait exceeds 5% of the median step time and 50 µs
(below that, the hand-over of a ready batch, not the loader)."""


def input_bound(records) -> dict:
    """How input-bound one run was, from its records (times in seconds).

    Returns a dict: ``policy``, ``mean_echo``, ``steps`` and ``batches`` of the steady
    state, ``waited_fraction`` (its steps that waited), ``wait_per_step_s`` (the wait
    exposed per step), ``step_time_s`` (the median step), ``wait_fraction`` (of the
    steady state's time), ``epoch_stalls`` and ``epoch_stall_s`` (the waits at the start
    of the second and later epochs: their number and mean), ``startup_s`` (the first
    batch's wait), ``clock``, and the steady state's totals ``waited`` (steps),
    ``wait_s`` and ``busy_s``. NaN where nothing was measured.
    """
    r = records
    T = r.n_batches
    spb = np.asarray(r.steps_per_batch)
    boundary = np.zeros(T, dtype=bool)
    if T:
        boundary[0] = True
        boundary[1:] = np.diff(np.asarray(r.epoch)) != 0
    steady = ~boundary
    steps = int(spb[steady].sum())
    st = r.step_time[np.isfinite(r.step_time)]
    median_step = float(np.median(st)) if st.size else math.nan
    threshold = max(WAITED[0] * median_step if math.isfinite(median_step) else 0.0, WAITED[1])
    wait = np.asarray(r.wait_time)
    waited = int(np.sum(wait[steady] > threshold))
    total_wait = float(np.sum(wait[steady]))
    busy_steps = np.isin(r.step_batch, np.flatnonzero(steady))
    busy = float(np.nansum(r.step_time[busy_steps]))
    stalls = wait[boundary][1:] if T else wait[:0]
    return {"policy": r.policy, "mean_echo": r.n_steps / T if T else math.nan, "batches": int(steady.sum()),
            "steps": steps, "waited_fraction": waited / steps if steps else math.nan,
            "wait_per_step_s": total_wait / steps if steps else math.nan, "step_time_s": median_step,
            "wait_fraction": total_wait / (total_wait + busy) if total_wait + busy > 0 else math.nan,
            "epoch_stalls": int(stalls.size), "epoch_stall_s": float(np.mean(stalls)) if stalls.size else math.nan,
            "startup_s": float(wait[0]) if T else math.nan, "clock": getattr(r, "clock", ""),
            "waited": waited, "wait_s": total_wait, "busy_s": busy}


def _ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"


def _policy(m: dict) -> str:
    p = m["policy"]
    return p if p in ("sync",) else f"{p} at mean K {m['mean_echo']:.2g}"


@dataclass(frozen=True)
class Verdict:
    """Is the loader the bottleneck, and what would echoing buy? ``str(v)`` is one line.

    Attributes
    ----------
    measured : dict
        `input_bound` of the runs it reads (the sync runs among them where there are
        any: the loop as it is, without echoing), pooled.
    prediction : dict or None
        From the plan: ``candidate`` (the recommended one, e.g. "fixed K=4"), ``saving``
        with ``saving_low``/``saving_high`` (the fraction of the time to target saved
        over sync at the same B: its median and the 10-90% band of the candidate's
        time), ``source`` (what the plan's fresh-batch counts came from).
    needs : str
        Without a prediction: what the plan would need to make one.
    """

    measured: dict
    prediction: dict | None = None
    needs: str = ""
    notes: tuple = field(default=())

    @property
    def line(self) -> str:
        m = self.measured
        if not m["steps"]:
            head = "no steady-state step measured yet (the first batch of a run, and of each epoch, is start-up)"
        else:
            head = (f"input-bound {m['waited_fraction']:.0%} of steps under {_policy(m)} "
                    f"(exposed wait {_ms(m['wait_per_step_s'])} per step of {_ms(m['step_time_s'])}, "
                    f"{m['wait_fraction']:.0%} of the time)")
        p = self.prediction
        if p is None:
            tail = f"what echoing saves: {self.needs}"
        elif p["candidate"].startswith("sync"):
            tail = f"the plan predicts no saving from echoing ({p['source']}): keep sync"
        else:
            lo, hi = p["saving_low"], p["saving_high"]
            band = f"{lo:.0%} to {hi:.0%}" if lo >= 0 else f"from {-lo:.0%} longer to {hi:.0%} shorter"
            tail = (f"{p['candidate']} is predicted to save {p['saving']:.0%} of the time to target "
                    f"(10-90%: {band}; {p['source']})")
        stalls = ""
        if m["epoch_stalls"]:
            stalls = (f"; apart: {m['epoch_stalls']} epoch-boundary stall{'s' * (m['epoch_stalls'] > 1)} of "
                      f"{_ms(m['epoch_stall_s'])} on average")
        return f"{head}; {tail}{stalls}"

    def __str__(self) -> str:
        return self.line

    def __repr__(self) -> str:
        # the line, not the raw measurements (``measured`` and ``prediction`` hold them)
        return f"Verdict({self.line!r})"

    def _repr_html_(self) -> str:
        import html

        return f"<p><b>echosim verdict</b>: {html.escape(self.line)}</p>"


def pool(records) -> dict:
    """`input_bound` over several runs: the sync runs where there are any, else all of them."""
    items = list(records) if isinstance(records, (list, tuple)) else [records]
    if not items:
        raise ValueError("records: expected at least one run's records")
    sync = [r for r in items if r.policy == "sync"]
    chosen = sync or items
    ms = [input_bound(r) for r in chosen]
    steps = sum(m["steps"] for m in ms)
    out = dict(ms[0])
    if len(ms) > 1:
        wait = sum(m["wait_s"] for m in ms)
        busy = sum(m["busy_s"] for m in ms)
        stalls = [m for m in ms if m["epoch_stalls"]]
        n_st = sum(m["epoch_stalls"] for m in stalls)
        policies = {m["policy"] for m in ms}
        out.update(policy=policies.pop() if len(policies) == 1 else "mixed",
                   mean_echo=sum(m["mean_echo"] * (m["batches"] + 1) for m in ms) / sum(m["batches"] + 1 for m in ms),
                   batches=sum(m["batches"] for m in ms), steps=steps,
                   waited=sum(m["waited"] for m in ms), wait_s=wait, busy_s=busy,
                   waited_fraction=sum(m["waited"] for m in ms) / steps if steps else math.nan,
                   wait_per_step_s=wait / steps if steps else math.nan,
                   step_time_s=float(np.median([m["step_time_s"] for m in ms])),
                   wait_fraction=wait / (wait + busy) if wait + busy > 0 else math.nan,
                   epoch_stalls=n_st,
                   epoch_stall_s=sum(m["epoch_stall_s"] * m["epoch_stalls"] for m in stalls) / n_st
                   if n_st else math.nan,
                   startup_s=float(np.mean([m["startup_s"] for m in ms])))
    return out


def prediction(plan) -> dict:
    """What a `Plan` (`echosim.plan`) predicts echoing saves: its recommended candidate against
    sync at the same batch size, the saving's median and its 10-90% band (the candidate's)."""
    rec = plan.recommended
    base = rec["baseline_wall_clock"]
    source = "from your steps to target" if plan.inputs.get("steps_to_target") else \
        f"on the simulated problem {(plan.inputs.get('problem') or {}).get('name', 'stand-in')}, not your model"

    def saved(t):
        return 1.0 - t / base if math.isfinite(t) and base > 0 else math.nan

    return {"candidate": plan.name_of(rec), "batch_size": rec["batch_size"], "saving": saved(rec["wall_clock_to_target"]),
            "saving_low": saved(rec["wall_clock_high"]), "saving_high": saved(rec["wall_clock_low"]),
            "source": source}


def judge(records, plan=None) -> Verdict:
    """The verdict on runs' records (one or a list), with `plan`'s prediction if given, else
    saying what a prediction needs (`echosim.verdict` makes the plan from steps to target)."""
    items = list(records) if isinstance(records, (list, tuple)) else [records]
    return Verdict(pool(items), None if plan is None else prediction(plan), "" if plan is not None else NEEDS)
