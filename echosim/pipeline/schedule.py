"""`simulate(pipeline, T, seed) -> Schedule`: run the pipeline model (`echosim.pipeline.model`)
and return when each fresh batch is ready and which batch every optimizer step uses.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from echosim.pipeline import stream
from echosim._validate import check_int, check_real, is_int
from echosim.pipeline.model import CAPPED_POLICIES as _GREEDY, ECHO_POLICIES, POLICIES, Pipeline, check_echo
from echosim.pipeline.sizes import check_fits
from echosim.pipeline.stream import (
    DerivedSteps, EventLoop, HeldSteps, Inputs, _example_copies, _example_extra, _round_echo, _StepTimes,
    estimate_echo, derived_steps, draw_inputs, redrawn_durations,
)

__all__ = ["Schedule", "simulate", "simulate_deciding", "simulate_until", "simulate_with_times", "echo_schedule"]

# rows of step_examples filled per shuffle chunk (bounds the uniform draws held)
_SHUFFLE_ROWS = 1 << 15


@dataclass(frozen=True, eq=False, repr=False)
class Schedule:
    """When each fresh batch is ready and which batch every optimizer step uses.

    T = ``n_batches`` fresh batches, N = ``n_steps`` optimizer steps.

    Attributes
    ----------
    ready_time : float64[T]
        When fresh batch t became available to the accelerator.
    steps_per_batch : int64[T]
        K_t, steps attributed to batch t (>= 1 for batch policies; for "example"
        the number of steps j with ``step_batch[j] == t``, possibly 0).
    step_start, step_end : float64[N]
        Start and end of every step (non-decreasing; steps never overlap).
    step_batch : int64[N]
        The fresh batch step j uses (non-decreasing). For "example": the largest
        fresh batch index among the examples used by steps 0..j (running maximum).
    step_examples : int64[N, B] or None
        "example" only: global fresh-example ids of step j (example i of fresh batch
        t has id ``t*B + i``).
    batch_size : int or None
    enter_time, take_time : float64[T]
        When batch t entered the prefetch buffer and when the accelerator took it out
        (for "example": pulled it into the shuffle stage).
    workers, prefetch : int
    busy_time, switch_time : float
        Total step time, total switch overhead.
    buffer_area, blocked_area : float
        Time integrals of buffer occupancy and of the number of blocked workers.
    n_events : int
        Loader completions plus steps processed by the event loop.

    Memory: under a batch policy, a simulation of more than
    `echosim.pipeline.stream.STEP_CHUNK` steps holds its per-batch arrays only. Its
    per-step arrays are derived again, bitwise the same, when first asked for (and
    then kept); `time_after` and `first_steps` go through them chunk by chunk
    without keeping them.
    """

    steps_per_batch: np.ndarray
    ready_time: np.ndarray | None = None
    step_examples: np.ndarray | None = None
    batch_size: int | None = None
    enter_time: np.ndarray | None = None
    take_time: np.ndarray | None = None
    workers: int = 0
    prefetch: int = 0
    switch_time: float = 0.0
    buffer_area: float = 0.0
    blocked_area: float = 0.0
    n_events: int = 0
    _steps: HeldSteps | DerivedSteps | None = None  # the clock: every step's times, held or derived

    @property
    def step_start(self) -> np.ndarray | None:
        return self._steps.arrays()[0] if self.timed else None

    @property
    def step_end(self) -> np.ndarray | None:
        return self._steps.arrays()[1] if self.timed else None

    @property
    def step_batch(self) -> np.ndarray | None:
        return self._steps.arrays()[2] if self.timed else None

    @property
    def busy_time(self) -> float:
        return self._steps.busy_time if self.timed else 0.0

    @property
    def n_batches(self) -> int:
        """T, the number of fresh batches."""
        return int(self.steps_per_batch.shape[0])

    @property
    def n_steps(self) -> int:
        """N = sum_t K_t, the number of optimizer steps."""
        return self._steps.n if self.timed else int(self.steps_per_batch.sum())

    @property
    def timed(self) -> bool:
        """Whether the schedule has a clock (simulated) or only step counts (`echo_schedule`)."""
        return self._steps is not None

    @property
    def makespan(self) -> float:
        """End of the last step (the simulation starts at time 0); NaN without a clock."""
        return self._steps.makespan if self.timed else math.nan

    def time_after(self, n_steps) -> np.ndarray:
        """Simulated time after each count of steps in `n_steps` (the end of step n - 1;
        0 for n = 0), read chunk by chunk: a long schedule keeps no per-step arrays."""
        if not self.timed:
            raise ValueError("time_after() needs a simulated schedule: this one holds step counts only")
        n = np.asarray(n_steps, dtype=np.int64)
        out = np.zeros(n.shape, dtype=np.float64)
        after = n > 0
        out[after] = self._steps.end_at(n[after] - 1)
        return out

    def first_steps(self, n: int) -> Schedule:
        """The first `n` steps, with the fresh batches they use (the last one possibly cut short)."""
        n = check_int("n", n, 1)
        if n >= self.n_steps:
            return self
        if not self.timed:
            return Schedule(steps_per_batch=_first_counts(self.steps_per_batch, n))
        if self.step_examples is None:  # batch policies: the steps of batch t follow those of t - 1
            spb = _first_counts(self.steps_per_batch, n)
            used = spb.shape[0]
        else:
            used = int(self.step_batch[n - 1]) + 1
            spb = np.bincount(self.step_batch[:n], minlength=used).astype(np.int64)
        ex = None if self.step_examples is None else self.step_examples[:n]
        return dataclasses.replace(
            self, ready_time=self.ready_time[:used], steps_per_batch=spb, step_examples=ex,
            enter_time=self.enter_time[:used], take_time=self.take_time[:used], _steps=self._steps.first(n))

    def summary(self) -> dict:
        """Long-run figures of the run, as one flat dict.

        ``throughput`` fresh batches per unit time; ``utilization`` fraction of time
        the accelerator computes, ``switch_fraction`` spent switching batches,
        ``idle_fraction`` the rest; ``loader_blocked_fraction`` fraction of worker
        time spent blocked by a full buffer; ``mean_echo`` = N/T;
        ``mean_buffer_occupancy`` (time average) and ``mean_buffer_wait`` (per batch,
        enter to take), which satisfy Little's law: occupancy = throughput * wait.
        """
        if not self.timed:
            raise ValueError("summary() needs a simulated schedule: this one holds step counts only")
        span = self.makespan
        T = self.n_batches
        util = self.busy_time / span
        switch = self.switch_time / span
        return {
            "n_batches": T,
            "n_steps": self.n_steps,
            "makespan": span,
            "throughput": T / span,
            "utilization": util,
            "switch_fraction": switch,
            "idle_fraction": max(0.0, 1.0 - util - switch),
            "loader_blocked_fraction": self.blocked_area / (self.workers * span),
            "mean_echo": self.n_steps / T,
            "mean_buffer_occupancy": self.buffer_area / span,
            "mean_buffer_wait": float(np.mean(self.take_time - self.enter_time)),
        }

    def __repr__(self) -> str:
        span = f"'{self.makespan:.6g} time units'" if self.timed else None  # counts only: no clock
        return (
            f"Schedule(n_batches={self.n_batches}, n_steps={self.n_steps}, "
            f"makespan={span}, batch_size={self.batch_size})"
        )

    def _repr_html_(self) -> str:
        """A notebook's view: the counts and, with a clock, the long-run figures with their units."""
        import html

        rows = [("fresh batches T", f"{self.n_batches}"), ("optimizer steps N", f"{self.n_steps}"),
                ("mean echo N/T", f"{self.n_steps / self.n_batches:.3g}" if self.n_batches else "-")]
        if self.batch_size is not None:
            rows.append(("batch size B", f"{self.batch_size}"))
        if self.timed and self.n_batches:
            m = self.summary()
            rows += [("makespan", f"{m['makespan']:.6g} time units"),
                     ("throughput", f"{m['throughput']:.4g} fresh batches per time unit"),
                     ("accelerator busy", f"{m['utilization']:.1%}"),
                     ("switching batches", f"{m['switch_fraction']:.1%}"),
                     ("idle", f"{m['idle_fraction']:.1%}"),
                     ("loader workers blocked (full buffer)", f"{m['loader_blocked_fraction']:.1%}"),
                     ("mean buffer occupancy", f"{m['mean_buffer_occupancy']:.3g} batches"),
                     ("mean buffer wait", f"{m['mean_buffer_wait']:.4g} time units"),
                     ("loader workers, prefetch", f"{self.workers}, {self.prefetch}")]
        else:
            rows.append(("clock", "none (step counts only)"))
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in rows)
        return f"<table><caption>Schedule</caption>{body}</table>"


def _first_counts(steps_per_batch: np.ndarray, n: int) -> np.ndarray:
    """K_t of the batches the first `n` steps use (the last one cut to fit), given every K_t."""
    cum = np.cumsum(steps_per_batch)
    used = int(np.searchsorted(cum, n)) + 1  # the batch that holds step n
    spb = steps_per_batch[:used].copy()
    spb[-1] -= int(cum[used - 1]) - n
    return spb


# ---------------------------------------------------------------------------
# schedules without a clock


def echo_schedule(echo, n_batches: int | None = None) -> Schedule:
    """K_t steps on fresh batch t, without a clock: ``echo`` is K (with `n_batches` = T)
    or an integer array of K_t. The one place where a step count K enters a run.

    >>> echo_schedule(4, n_batches=3).steps_per_batch
    array([4, 4, 4])
    """
    if np.ndim(echo) == 0:
        K = check_echo(echo, "echo", integer=True)
        if n_batches is None:
            raise ValueError("n_batches is required when echo is a number")
        T = check_int("n_batches", n_batches, 1)
        check_fits("n_batches", T, 8, what="K_t of every fresh batch")
        return Schedule(steps_per_batch=np.full(T, K, dtype=np.int64))
    K_t = np.asarray(echo)
    if K_t.ndim != 1 or K_t.size == 0 or not np.issubdtype(K_t.dtype, np.integer):
        raise ValueError("echo must be an integer K, or a non-empty 1-D integer array of K_t (one per batch)")
    if n_batches is not None and n_batches != K_t.size:
        raise ValueError(f"n_batches={n_batches} does not match len(echo)={K_t.size}")
    if K_t.min() < 1:
        raise ValueError(f"echo: every K_t must be an integer >= 1, got min {K_t.min()}")
    return Schedule(steps_per_batch=K_t.astype(np.int64))


# ---------------------------------------------------------------------------
# simulate


def _check_seed(seed: Any) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if not is_int(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or a numpy SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def _check_batch_size(pipeline: Pipeline, batch_size: Any) -> int | None:
    if batch_size is None:
        if pipeline.policy == "example":
            raise ValueError("batch_size is required for policy 'example' (an integer >= 1)")
        return None
    return check_int("batch_size", batch_size, 1)


def schedule_bytes_per_batch(pipeline: Pipeline, batch_size: int | None = None) -> float:
    """Rough bytes a simulated Schedule takes per fresh batch with its per-step arrays
    (a long one derives them only when asked for, but must be able to hand them out)."""
    steps = {"sync": 1.0, "fixed": pipeline.echo, "example": pipeline.echo}.get(pipeline.policy)
    if steps is None:  # greedy: about what the event loop allocates up front
        steps = 1.1 * estimate_echo(pipeline)
    per = 64.0 + 32.0 * steps
    if pipeline.policy == "example":
        per += (batch_size or 1) * (1.0 + 8.0 * steps)  # extra copies, example ids of every step
    return per


def _check_schedule_size(name: str, value, T: int, pipeline: Pipeline, batch_size) -> None:
    check_fits(name, value, schedule_bytes_per_batch(pipeline, batch_size) * T / value,
               what=f"the schedule of {T:,} fresh batches")


def _check_caps(pipeline: Pipeline, caps, T: int) -> np.ndarray | None:
    """Per-batch caps on K_t (greedy, auto): None, or T integers in 1..max_echo."""
    if pipeline.policy not in _GREEDY:
        if caps is not None:
            raise ValueError(f"caps: per-batch caps on K_t apply only to policies {' and '.join(map(repr, _GREEDY))}, "
                             f"got policy {pipeline.policy!r}")
        return None
    if caps is None:
        if POLICIES[pipeline.policy].coupled:
            raise ValueError(f"policy {pipeline.policy!r}: its caps depend on the training run's losses, so the "
                             "pipeline cannot be simulated alone; simulate it with the run "
                             "(echosim.run(problem, optimizer, echo=pipeline, n_batches=T) or echosim.run_coupled), "
                             "or give the caps (caps=)")
        return None
    a = np.asarray(caps)
    if a.ndim != 1 or a.size != T or not (np.issubdtype(a.dtype, np.integer) or a.size == 0):
        raise ValueError(f"caps: expected a 1-D integer array of {T} caps (one per fresh batch), got "
                         f"{'shape ' + str(a.shape) if a.ndim != 1 or a.size != T else 'dtype ' + str(a.dtype)}")
    if a.min() < 1 or a.max() > pipeline.max_echo:
        raise ValueError(f"caps: every cap must be in 1..max_echo={pipeline.max_echo}, got "
                         f"{a.min() if a.min() < 1 else a.max()}")
    return np.ascontiguousarray(a, dtype=np.int64)


def simulate(pipeline: Pipeline, n_batches: int, seed, batch_size: int | None = None, caps=None) -> Schedule:
    """Simulate `pipeline` until T = `n_batches` fresh batches have been used.

    Parameters
    ----------
    pipeline : Pipeline
    n_batches : int
        T >= 1 fresh batches.
    seed : int or numpy.random.SeedSequence
        Four independent streams are spawned from it (loader times, step times,
        echo rounding, shuffle); the same seed gives bitwise the same Schedule.
    batch_size : int, optional
        B, required for policy "example" (the schedule then lists example ids).
    caps : int array of shape (T,), optional
        "greedy" and "auto": batch t gets at most ``caps[t]`` steps (1..max_echo)
        instead of max_echo. Required for "auto" (whose caps depend on the losses:
        its simulation with a run is `echosim.training.runner.run_coupled`).

    Returns
    -------
    Schedule
    """
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    T = check_int("n_batches", n_batches, 1)
    ss = _check_seed(seed)
    B = _check_batch_size(pipeline, batch_size)
    caps = _check_caps(pipeline, caps, T)
    _check_schedule_size("n_batches", T, T, pipeline, B)
    seeds = ss.spawn(4)
    return _simulated(pipeline, T, B, draw_inputs(pipeline, T, B, seeds), seeds[1], caps=caps)


def simulate_deciding(pipeline: Pipeline, n_batches: int, seed, decide) -> Schedule:
    """`simulate` with caps decided as the simulation goes ("greedy", "auto").

    Before the accelerator takes fresh batch n whose cap is not known yet, it asks
    ``decide(n, tau, K, take_time)``: tau is batch n's take time, K and take_time those
    of batches 0..n-1 (final; views, valid during the call); it returns the caps of
    batches n, n+1, ... (a non-empty int array). The result is
    bitwise ``simulate(pipeline, n_batches, seed, caps=<the caps decided>)``: the
    event loop pauses before a take, where nothing has changed yet.
    """
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    if pipeline.policy not in _GREEDY:
        raise ValueError(f"pipeline.policy: caps decided as it goes apply to policies "
                         f"{' and '.join(map(repr, _GREEDY))}, got {pipeline.policy!r}")
    if not callable(decide):
        raise ValueError(f"decide: expected a callable (n, tau, K, take_time) -> caps, got {decide!r}")
    T = check_int("n_batches", n_batches, 1)
    ss = _check_seed(seed)
    _check_schedule_size("n_batches", T, T, pipeline, None)
    seeds = ss.spawn(4)
    return _simulated(pipeline, T, None, draw_inputs(pipeline, T, None, seeds), seeds[1], decide=decide)


def simulate_with_times(
    pipeline: Pipeline,
    load_time,
    step_time,
    *,
    echo_draws=None,
    shuffle_draws=None,
    batch_size: int | None = None,
    caps=None,
) -> Schedule:
    """Replay `pipeline` with given times instead of drawing them (traces, tests).

    Parameters
    ----------
    pipeline : Pipeline
        Its ``arrival`` and ``step_time`` processes are ignored.
    load_time : array of float > 0, shape (T,)
        Loader time of production index i (the i-th batch a worker starts).
    step_time : float > 0 or array of float > 0
        Time of step j (a number: every step); an array must cover every step.
    echo_draws : array of uniforms in [0, 1), optional
        For a non-integer echo: T draws ("fixed", K_t = floor(e) + [u_t < frac])
        or T*B draws ("example", one per fresh example).
    shuffle_draws : array of uniforms in [0, 1), optional
        "example" only: one per emitted example (at least N*B); default all zeros.
    batch_size : int, optional
        B, required for "example".
    caps : int array of shape (T,), optional
        As in `simulate` ("greedy" and "auto"; required for "auto").
    """
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    load = np.array(load_time, dtype=np.float64).reshape(-1)
    if load.size == 0 or not np.all(np.isfinite(load) & (load > 0)):
        raise ValueError("load_time must be a non-empty array of finite times > 0")
    T = load.size
    B = _check_batch_size(pipeline, batch_size)
    caps = _check_caps(pipeline, caps, T)
    steps_arr = np.array(step_time, dtype=np.float64).reshape(-1)
    if steps_arr.size == 0 or not np.all(np.isfinite(steps_arr) & (steps_arr > 0)):
        raise ValueError("step_time must be a number or a non-empty array of finite times > 0")
    e = pipeline.echo
    frac = 0.0 if e is None else e - math.floor(e)
    need_draws = {"fixed": T, "example": T * (B or 0)}.get(pipeline.policy, 0) if frac else 0
    if need_draws:
        u = None if echo_draws is None else np.asarray(echo_draws, dtype=np.float64).reshape(-1)
        if u is None or u.size < need_draws:
            raise ValueError(f"echo_draws must hold at least {need_draws} uniforms for echo={e}")
    per_batch = extra = None
    n_known: int | None = None
    if pipeline.policy == "sync":
        n_known = T
    elif pipeline.policy == "fixed":
        per_batch = _round_echo(e, T, u if frac else None)
        n_known = int(per_batch.sum())
    elif pipeline.policy == "example":
        extra = _example_extra(e, T * B, None, u if frac else None)
        per_batch = _example_copies(e, T, B, extra)
        n_known = int(per_batch.sum()) // B
    if steps_arr.size == 1 and np.ndim(step_time) == 0:
        steps = _StepTimes(True, steps_arr)
    else:
        def _exhausted(offset, n):
            raise ValueError(f"step_time holds {steps_arr.size} times; the run needs more")

        steps = _StepTimes(False, steps_arr, _exhausted)
    shuffle_u = None
    if pipeline.policy == "example":
        n_emit = n_known * B
        if shuffle_draws is None:
            shuffle_u = np.zeros(n_emit)
        else:
            shuffle_u = np.asarray(shuffle_draws, dtype=np.float64).reshape(-1)
            if shuffle_u.size < n_emit:
                raise ValueError(f"shuffle_draws must hold at least {n_emit} uniforms (N*B)")
    pos = [0]

    def draws(n):
        a = pos[0]
        pos[0] = a + n
        return shuffle_u[a:a + n]

    return _simulated(pipeline, T, B, Inputs(load, per_batch, extra, steps, n_known, draws), caps=caps)


def _simulated(pipeline: Pipeline, T: int, B: int | None, inputs: Inputs, step_seed=None, caps=None,
               decide=None) -> Schedule:
    """Run the event loop on `inputs` (under `caps`, or caps from `decide`); assemble the
    Schedule. Given the seed of the step durations, a batch policy's steps beyond one
    output chunk are not kept but derived again when asked for."""
    loop = EventLoop(pipeline, T, B, inputs, caps=caps, decide=decide)
    derive = step_seed is not None and pipeline.policy != "example"
    makespan = 0.0
    for _, _, end, _ in loop.steps(stream.STEP_CHUNK if derive else None):
        if len(end):
            makespan = float(end[-1])
    N, busy, spb = loop.n_steps, loop.busy_time, loop.steps_per_batch
    step_examples = None
    if loop.flushed:
        durations = functools.partial(redrawn_durations, pipeline.step_time, step_seed, inputs.n_known,
                                      tuple(inputs.steps.sizes))
        steps = DerivedSteps(functools.partial(derived_steps, loop.take_time, pipeline.switch_overhead, spb,
                                               durations, N), N, busy_time=busy, makespan=makespan)
    else:
        start, end, batch = loop.held()
        if pipeline.policy == "example":
            step_examples = _shuffle(T, B, math.floor(pipeline.echo), inputs.extra, loop.shuffle_size, N,
                                     inputs.shuffle_draws)
            batch = np.maximum.accumulate(step_examples.max(axis=1) // B) if N else np.zeros(0, np.int64)
            spb = np.bincount(batch, minlength=T).astype(np.int64)
        steps = HeldSteps(start, end, batch, busy)
    enter_time = loop.enter_time
    return Schedule(
        ready_time=np.maximum.accumulate(enter_time) if pipeline.delivery == "ordered" else enter_time,
        steps_per_batch=spb,
        step_examples=step_examples,
        batch_size=B,
        enter_time=enter_time,
        take_time=loop.take_time,
        workers=pipeline.workers,
        prefetch=pipeline.prefetch,
        _steps=steps,
        **loop.totals(),
    )


def _shuffle(T, B, base, extra, S, N, draws) -> np.ndarray:
    """Example ids of every step, through the shuffle buffer, in row chunks."""
    from echosim.pipeline.kernel import shuffle_stream

    out = np.empty((N, B), dtype=np.int64)
    flat = out.reshape(-1)
    state = np.zeros(4, dtype=np.int64)
    buf = np.empty(S, dtype=np.int64)
    extra = np.ascontiguousarray(extra, dtype=np.uint8)
    for a in range(0, N, _SHUFFLE_ROWS):
        b = min(N, a + _SHUFFLE_ROWS)
        u = np.ascontiguousarray(draws((b - a) * B), dtype=np.float64)
        n = shuffle_stream(T, B, base, extra, S, u, state, buf, flat[a * B:b * B])
        if n != (b - a) * B:  # pragma: no cover - N*B <= total by construction
            raise RuntimeError("shuffle stage ran out of examples; please report")
    return out


# ---------------------------------------------------------------------------
# a wall-clock budget


def mean_batch_time(pipeline) -> float:
    """Rough wall-clock per fresh batch, to size a time-budget simulation."""
    load = pipeline.arrival.mean / pipeline.workers
    steps = pipeline.echo if pipeline.policy in ECHO_POLICIES else 1.0
    per_step = pipeline.step_time.mean + (pipeline.switch_overhead if pipeline.policy == "example" else 0.0)
    return max(load, steps * per_step + (0.0 if pipeline.policy == "example" else pipeline.switch_overhead))


def simulate_until(pipeline, budget: float, seed: int, batch_size: int | None = None):
    """Simulate a pipeline for a wall-clock budget; returns (full schedule, the steps
    that end by `budget` as a schedule of their own).

    The schedule is simulated for a deterministic number of fresh batches (doubled
    until it runs past the budget); the last batch kept may have fewer steps than the
    policy planned.
    """
    budget = check_real("budget", budget, lo=0.0, lo_open=True)
    T0 = 1.25 * budget / mean_batch_time(pipeline) + 16
    if not math.isfinite(T0) or T0 > 2**62:
        raise ValueError(f"budget={budget:g} implies {T0:.3g} fresh batches, more than any run can hold")
    # doubling may need up to 2 T0 batches
    _check_schedule_size("budget", float(budget), int(2 * T0), pipeline, batch_size)
    T = math.ceil(T0)
    while True:
        schedule = simulate(pipeline, T, seed=seed, batch_size=batch_size)
        if schedule.makespan > budget:
            break
        if T > 50_000_000:
            raise ValueError(f"time_budget={budget:g} needs more than {T} fresh batches")
        T *= 2
    n = schedule._steps.count_until(budget)
    if n == 0:
        raise ValueError(f"time_budget={budget:g}: no optimizer step ends within the budget "
                         f"(the first ends at {schedule.time_after([1])[0]:.4g})")
    return schedule, schedule.first_steps(n)
