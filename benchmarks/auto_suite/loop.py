"""The suite's real loop for the NumPy and scripted cases: a sleeping loader whose clock
freezes while the training loop is paused, a fixed-time step, checkpoints copied with the
clock paused, and the optional signals of what an echoed step is worth.

A case (`Task`) says what a step does; this module says how it is timed. Nothing here
comes from echosim's optimizers or runner: only ``echosim.echoing`` and its public API.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
from dataclasses import dataclass, field

import harness  # benchmarks/ is on sys.path: the suite's driver puts it there
import numpy as np

POLICIES = ("sync", 2, 4, 8, "greedy", "auto")
WINDOW = 8  # fresh batches per window, the unit of "K = 1 within 3 windows" (auto's default block)


def policy_label(policy) -> str:
    return f"K={policy}" if isinstance(policy, int) else str(policy)


def rotated(policies, j: int) -> list:
    """For seed number j, every policy once, the list rotated by j."""
    k = j % len(policies)
    return list(policies[k:]) + list(policies[:k])


# ---- the loader's clock, frozen while the loop is paused

class Gate:
    """A clock shared by the loop and the loader thread that stops while `paused`.

    `sleep(dt)` waits until `dt` seconds of unpaused time have passed: a loader sleeping
    through it does not advance during ``with gate.paused():`` (a checkpoint), so the
    pause gives it no head start."""

    def __init__(self, clock=time.perf_counter):
        self._clock = clock
        self._cond = threading.Condition()
        self._since: float | None = None   # when the current pause began
        self._frozen = 0.0                 # paused seconds so far

    def _now_locked(self) -> float:
        t = self._clock()
        return t - self._frozen - (t - self._since if self._since is not None else 0.0)

    def now(self) -> float:
        with self._cond:
            return self._now_locked()

    @contextlib.contextmanager
    def paused(self):
        with self._cond:
            nested = self._since is not None
            if not nested:
                self._since = self._clock()
        try:
            yield self
        finally:
            if not nested:
                with self._cond:
                    self._frozen += self._clock() - self._since
                    self._since = None
                    self._cond.notify_all()

    def sleep(self, dt: float) -> None:
        if dt <= 0:
            return
        with self._cond:
            deadline = self._now_locked() + dt
            while True:
                if self._since is not None:
                    self._cond.wait()
                    continue
                rest = deadline - self._now_locked()
                if rest <= 0:
                    return
                self._cond.wait(rest)


class GatedLoader:
    """Yields `batches` in order, each after `t_load` seconds of (unpaused) sleep: a slow
    pipeline whose time is waiting, not the training process's CPU."""

    def __init__(self, batches, t_load: float, gate: Gate):
        self.batches, self.t_load, self.gate = batches, t_load, gate

    def __iter__(self):
        for batch in self.batches:
            self.gate.sleep(self.t_load)
            yield batch


@contextlib.contextmanager
def paused(it, gate: Gate | None = None):
    """echoing's pause and the loader's frozen clock together."""
    with it.paused():
        if gate is None:
            yield
        else:
            with gate.paused():
                yield


# ---- the signals (the planned API; guarded so the suite runs without it)

def signals_supported(it) -> bool:
    """Does this `echoing` accept ``report(loss, lagged_loss=..., probe=...)``?"""
    try:
        params = inspect.signature(it.report).parameters
    except (TypeError, ValueError):
        return False
    return "lagged_loss" in params and "probe" in params


def probe_due(it) -> bool:
    return bool(getattr(it, "probe_due", False))


# ---- one run of a NumPy or scripted task

@dataclass
class Run:
    """One (case, policy, seed): the training clock and a checkpoint after each fresh batch
    (index 0: before training), the steps per batch and echoing's caps."""

    case: str
    policy: str
    seed: int
    times: np.ndarray
    checkpoints: object
    echo: np.ndarray
    cap: np.ndarray
    decisions: list
    loadavg: list
    load_ms: float
    step_ms: float
    wall_s: float
    signals: str = "off"
    extra: dict = field(default_factory=dict)


def records_of(it, budget: int) -> dict:
    rec = it.records()
    return {"echo": np.asarray(rec.steps_per_batch[:budget], dtype=np.int64),
            "cap": np.asarray(rec.cap[:budget], dtype=np.int64),
            "decisions": [dict(d) for d in rec.decisions],
            "load_ms": 1e3 * float(np.mean(rec.load_time[:budget])) if len(rec.load_time) else float("nan"),
            "step_ms": 1e3 * float(np.nanmedian(rec.step_time)) if len(rec.step_time) else float("nan")}


def run_task(task, policy, seed: int, batches: list, *, scale: float = 1.0, signals: bool = False,
             auto: dict | None = None) -> Run:
    """`task.budget` fresh batches of `task` through ``echosim.echoing(loader, policy)``.

    The step computes the loss and update (`task.step`, which is told whether the batch is
    an echo), sleeps until ``task.t_step * scale`` has passed since it began, and reports
    the loss computed before the update. After the last step on each fresh batch the
    state is copied inside ``it.paused()`` with the loader's clock frozen; the copies are
    evaluated after the run (`task.evaluate`)."""
    import echosim

    budget = task.budget
    gate = Gate()
    loader = GatedLoader(batches[:budget + 1], task.t_load * scale, gate)
    it = echosim.echoing(loader, policy, max_echo=task.max_echo, batch_size=task.B,
                         auto=auto if policy == "auto" else None)
    use_signals = signals and signals_supported(it)
    w = task.init(seed)
    ckpt = [task.snapshot(w)]
    times = np.zeros(budget + 1)
    t_step = task.t_step * scale
    fresh, current, last_end, start_prev = -1, None, 0.0, None
    load0 = harness.load()[0]
    wall0 = time.perf_counter()
    clock0 = gate.now()
    try:
        for batch in it:
            first = batch is not current
            if first:
                if fresh >= 0:
                    with paused(it, gate):
                        ckpt.append(task.snapshot(w))
                        times[fresh + 1] = last_end
                fresh += 1
                current = batch
                if fresh == budget:
                    break
            s0 = time.perf_counter()
            extra = {}
            if use_signals and first:
                if start_prev is not None:
                    extra["lagged_loss"] = task.loss(start_prev, batch)
                start_prev = task.snapshot(w)
            loss, w = task.step(w, batch, not first)
            if use_signals and probe_due(it):
                extra["probe"] = task.probe(w, seed)
            rest = t_step - (time.perf_counter() - s0)
            if rest > 0:
                time.sleep(rest)
            it.report(loss, **extra)
            last_end = gate.now() - clock0
    finally:
        it.close()
    r = records_of(it, budget)
    return Run(case=task.name, policy=policy_label(policy), seed=seed, times=times, checkpoints=ckpt,
               echo=r["echo"], cap=r["cap"], decisions=r["decisions"] if policy == "auto" else [],
               loadavg=[load0, harness.load()[0]], load_ms=r["load_ms"], step_ms=r["step_ms"],
               wall_s=time.perf_counter() - wall0,
               signals=("on" if use_signals else "unavailable") if signals else "off")
