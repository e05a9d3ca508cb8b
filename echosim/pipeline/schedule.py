"""`simulate(pipeline, T, seed) -> Schedule`: run the pipeline model (`echosim.pipeline.model`)
and return when each fresh batch is ready and which batch every optimizer step uses.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from echosim.pipeline.model import _POLICY_CODE, ECHO_POLICIES, Pipeline, _int_field, check_echo
from echosim.pipeline.service_times import Deterministic, ServiceTime
from echosim.pipeline.sizes import check_fits
from echosim.pipeline.traces import Trace

__all__ = ["Schedule", "simulate", "simulate_until", "simulate_with_times", "echo_schedule"]

# step times drawn per chunk when their number is not known in advance ("greedy")
_CHUNK_MIN = 4096
_CHUNK_MAX = 1 << 22
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
    """

    steps_per_batch: np.ndarray
    ready_time: np.ndarray | None = None
    step_start: np.ndarray | None = None
    step_end: np.ndarray | None = None
    step_batch: np.ndarray | None = None
    step_examples: np.ndarray | None = None
    batch_size: int | None = None
    enter_time: np.ndarray | None = None
    take_time: np.ndarray | None = None
    workers: int = 0
    prefetch: int = 0
    busy_time: float = 0.0
    switch_time: float = 0.0
    buffer_area: float = 0.0
    blocked_area: float = 0.0
    n_events: int = 0

    @property
    def n_batches(self) -> int:
        """T, the number of fresh batches."""
        return int(self.steps_per_batch.shape[0])

    @property
    def n_steps(self) -> int:
        """N = sum_t K_t, the number of optimizer steps."""
        return int(self.step_end.shape[0]) if self.timed else int(self.steps_per_batch.sum())

    @property
    def timed(self) -> bool:
        """Whether the schedule has a clock (simulated) or only step counts (`echo_schedule`)."""
        return self.step_end is not None

    @property
    def makespan(self) -> float:
        """End of the last step (the simulation starts at time 0); NaN without a clock."""
        if not self.timed:
            return math.nan
        return float(self.step_end[-1]) if self.n_steps else 0.0

    def first_steps(self, n: int) -> Schedule:
        """The first `n` steps, with the fresh batches they use (the last one possibly cut short)."""
        n = _int_field("n", n, 1)
        if n >= self.n_steps:
            return self
        if not self.timed:
            cum = np.cumsum(self.steps_per_batch)
            used = int(np.searchsorted(cum, n)) + 1  # the batch that holds step n
            spb = self.steps_per_batch[:used].copy()
            spb[-1] -= int(cum[used - 1]) - n
            return Schedule(steps_per_batch=spb)
        used = int(self.step_batch[n - 1]) + 1
        spb = np.bincount(self.step_batch[:n], minlength=used).astype(np.int64)
        ex = None if self.step_examples is None else self.step_examples[:n]
        return dataclasses.replace(
            self, ready_time=self.ready_time[:used], steps_per_batch=spb, step_start=self.step_start[:n],
            step_end=self.step_end[:n], step_batch=self.step_batch[:n], step_examples=ex,
            enter_time=self.enter_time[:used], take_time=self.take_time[:used],
            busy_time=float(np.sum(self.step_end[:n] - self.step_start[:n])))

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
        return (
            f"Schedule(n_batches={self.n_batches}, n_steps={self.n_steps}, "
            f"makespan={self.makespan:.6g}, batch_size={self.batch_size})"
        )


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
        T = _int_field("n_batches", n_batches, 1)
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
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or a numpy SeedSequence, got {seed!r}")
    return np.random.SeedSequence(int(seed))


def _check_batch_size(pipeline: Pipeline, batch_size: Any) -> int | None:
    if batch_size is None:
        if pipeline.policy == "example":
            raise ValueError("batch_size is required for policy 'example' (an integer >= 1)")
        return None
    return _int_field("batch_size", batch_size, 1)


def _shuffle_size(pipeline: Pipeline, B: int) -> int:
    S = pipeline.shuffle_buffer
    return B * math.ceil(pipeline.echo) if S is None else S


class _StepTimes:
    """Step times for the event loop: a cyclic array, or chunks drawn on demand."""

    def __init__(self, cyclic: bool, first: np.ndarray, more=None):
        self.cyclic = cyclic
        self.array = np.ascontiguousarray(first, dtype=np.float64)
        self.offset = 0
        self._more = more

    def next_chunk(self, offset: int, n: int) -> None:
        self.array = np.ascontiguousarray(self._more(offset, n), dtype=np.float64)
        self.offset = offset


def _sampled_step_times(step: ServiceTime, rng: np.random.Generator, n_known: int | None) -> _StepTimes:
    """Step times drawn from `step`: constant and cyclic traces replay one period."""
    if isinstance(step, Deterministic):
        return _StepTimes(True, np.array([step.value]))
    if isinstance(step, Trace) and step.mode == "cycle":
        return _StepTimes(True, step.sample(rng, step.n))
    if step.variance == 0.0:  # e.g. Gamma(cv=0): every draw is the same number
        return _StepTimes(True, step.sample(rng, 1))
    if n_known is not None:
        return _StepTimes(False, step.sample(rng, n_known))
    return _StepTimes(False, np.empty(0), lambda offset, n: step.sample(rng, n))


def _estimate_echo(pipeline: Pipeline) -> float:
    """Rough steps per fresh batch under "greedy", to size chunks and outputs."""
    busy = pipeline.workers if pipeline.blocking == "after" else min(pipeline.workers, pipeline.prefetch)
    ratio = pipeline.arrival.mean / (busy * pipeline.step_time.mean + pipeline.switch_overhead)
    return float(min(pipeline.max_echo, max(1.0, ratio + 1.0)))


def _round_echo(e: float, n: int, u: np.ndarray | None) -> np.ndarray:
    """floor(e) + Bernoulli(e - floor(e)) from uniforms u (None when e is integral)."""
    base = math.floor(e)
    if e == base:
        return np.full(n, base, dtype=np.int64)
    return base + (u[:n] < (e - base)).astype(np.int64)


def schedule_bytes_per_batch(pipeline: Pipeline, batch_size: int | None = None) -> float:
    """Rough bytes a simulated Schedule holds per fresh batch (per-batch and per-step arrays)."""
    steps = {"sync": 1.0, "fixed": pipeline.echo, "example": pipeline.echo}.get(pipeline.policy)
    if steps is None:  # greedy: about what the event loop allocates up front
        steps = 1.1 * _estimate_echo(pipeline)
    per = 64.0 + 32.0 * steps
    if pipeline.policy == "example":
        per += (batch_size or 1) * (1.0 + 8.0 * steps)  # extra copies, example ids of every step
    return per


def _check_schedule_size(name: str, value, T: int, pipeline: Pipeline, batch_size) -> None:
    check_fits(name, value, schedule_bytes_per_batch(pipeline, batch_size) * T / value,
               what=f"the schedule of {T:,} fresh batches")


def simulate(pipeline: Pipeline, n_batches: int, seed, batch_size: int | None = None) -> Schedule:
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

    Returns
    -------
    Schedule
    """
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    T = _int_field("n_batches", n_batches, 1)
    ss = _check_seed(seed)
    B = _check_batch_size(pipeline, batch_size)
    _check_schedule_size("n_batches", T, T, pipeline, B)
    rng_load, rng_step, rng_echo, rng_shuffle = (np.random.default_rng(s) for s in ss.spawn(4))

    load_time = pipeline.arrival.sample(rng_load, T)
    e = pipeline.echo
    per_batch = extra = None
    n_known: int | None = None
    if pipeline.policy == "sync":
        n_known = T
    elif pipeline.policy == "fixed":
        u = None if e == math.floor(e) else rng_echo.random(T)
        per_batch = _round_echo(e, T, u)
        n_known = int(per_batch.sum())
    elif pipeline.policy == "example":
        extra = _example_extra(e, T * B, rng_echo)
        per_batch = _example_copies(e, T, B, extra)
        n_known = int(per_batch.sum()) // B
    steps = _sampled_step_times(pipeline.step_time, rng_step, n_known)

    def shuffle_draws(n):
        return rng_shuffle.random(n)

    return _run(pipeline, T, B, load_time, per_batch, extra, steps, n_known, shuffle_draws)


def _example_extra(e: float, n: int, rng: np.random.Generator | None,
                   u: np.ndarray | None = None) -> np.ndarray:
    """Bernoulli(e - floor(e)) extra copies per fresh example, as uint8 (empty if e integral)."""
    frac = e - math.floor(e)
    if frac == 0.0:
        return np.zeros(0, dtype=np.uint8)
    if u is not None:
        return (np.asarray(u[:n]) < frac).astype(np.uint8)
    out = np.empty(n, dtype=np.uint8)
    step = 1 << 22
    for a in range(0, n, step):
        b = min(n, a + step)
        out[a:b] = rng.random(b - a) < frac
    return out


def _example_copies(e: float, T: int, B: int, extra: np.ndarray) -> np.ndarray:
    """Echoed copies of each fresh batch: B*floor(e) plus its extra copies."""
    copies = np.full(T, B * math.floor(e), dtype=np.int64)
    if extra.size:
        copies += extra.reshape(T, B).sum(axis=1, dtype=np.int64)
    return copies


def simulate_with_times(
    pipeline: Pipeline,
    load_time,
    step_time,
    *,
    echo_draws=None,
    shuffle_draws=None,
    batch_size: int | None = None,
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
    """
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    load = np.array(load_time, dtype=np.float64).reshape(-1)
    if load.size == 0 or not np.all(np.isfinite(load) & (load > 0)):
        raise ValueError("load_time must be a non-empty array of finite times > 0")
    T = load.size
    B = _check_batch_size(pipeline, batch_size)
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

    return _run(pipeline, T, B, load, per_batch, extra, steps, n_known, draws)


def _run(pipeline, T, B, load_time, per_batch, extra, steps: _StepTimes, n_known, shuffle_draws) -> Schedule:
    """Drive the resumable Numba event loop; assemble the Schedule."""
    from echosim.pipeline import kernel as des  # compiles (or loads the cache) on first use

    W, C = pipeline.workers, pipeline.prefetch
    policy = pipeline.policy
    S = _shuffle_size(pipeline, B) if policy == "example" else 0
    pi = np.zeros(des.N_PI, dtype=np.int64)
    pi[des.P_W] = W
    pi[des.P_C] = C
    pi[des.P_POLICY] = _POLICY_CODE[policy]
    pi[des.P_ORDERED] = pipeline.delivery == "ordered"
    pi[des.P_BEFORE] = pipeline.blocking == "before"
    pi[des.P_MAX_ECHO] = pipeline.max_echo
    pi[des.P_T] = T
    pi[des.P_B] = B or 0
    pi[des.P_S] = S
    if policy == "example":
        pi[des.P_N_STEPS] = n_known
        pi[des.P_TOTAL_EX] = int(per_batch.sum())
    pi[des.P_CYCLIC] = steps.cyclic
    pf = np.array([pipeline.switch_overhead], dtype=np.float64)
    load_time = np.ascontiguousarray(load_time, dtype=np.float64)
    if not load_time.flags.writeable:
        load_time = load_time.copy()
    if per_batch is None:
        per_batch = np.zeros(1, dtype=np.int64)
    per_batch = np.ascontiguousarray(per_batch, dtype=np.int64)

    si = np.zeros(des.N_SI, dtype=np.int64)
    sf = np.zeros(des.N_SF, dtype=np.float64)
    serv_fin = np.zeros(W, dtype=np.float64)
    serv_seq = np.zeros(W, dtype=np.int64)
    held_seq = np.zeros(W, dtype=np.int64)
    entered = np.zeros(T, dtype=np.uint8)
    enter_time = np.zeros(T, dtype=np.float64)
    take_time = np.zeros(T, dtype=np.float64)
    spb = np.zeros(T, dtype=np.int64)
    est = _estimate_echo(pipeline) if policy == "greedy" else 1.0
    if n_known is not None:
        cap = n_known
    else:
        cap = min(T * pipeline.max_echo, int(T * est * 1.1) + 1024)
    step_start = np.empty(cap, dtype=np.float64)
    step_end = np.empty(cap, dtype=np.float64)
    step_batch = np.empty(cap, dtype=np.int64)

    des.init_des(pi, si, sf, serv_fin, serv_seq, load_time)
    while True:
        status = des.run_des(
            pi, pf, load_time, per_batch, steps.array, si, sf, serv_fin, serv_seq, held_seq,
            entered, enter_time, take_time, spb, step_start, step_end, step_batch,
        )
        if status == des.DONE:
            break
        j = int(si[des.S_J])
        left = T - int(si[des.S_N_TAKEN]) + 1
        per = max(j / max(int(si[des.S_N_TAKEN]), 1), est, 1.0)
        more = int(min(left * pipeline.max_echo, left * per * 1.25)) + _CHUNK_MIN
        if status == des.NEED_STEP_TIMES:
            steps.next_chunk(j, min(more, _CHUNK_MAX))
            si[des.S_STEP_OFFSET] = j
        elif status == des.NEED_OUTPUT:
            cap = min(T * pipeline.max_echo, j + more)
            step_start = _grow(step_start, j, cap)
            step_end = _grow(step_end, j, cap)
            step_batch = _grow(step_batch, j, cap)
        else:  # pragma: no cover - the model cannot deadlock
            raise RuntimeError("pipeline event loop made no progress (deadlock); please report")

    N = int(si[des.S_J])
    step_start, step_end, step_batch = step_start[:N], step_end[:N], step_batch[:N]
    if N < cap:  # release the spare capacity
        step_start, step_end, step_batch = step_start.copy(), step_end.copy(), step_batch.copy()
    step_examples = None
    if policy == "example":
        step_examples = _shuffle(T, B, math.floor(pipeline.echo), extra, S, N, shuffle_draws)
        step_batch = np.maximum.accumulate(step_examples.max(axis=1) // B) if N else np.zeros(0, np.int64)
        spb = np.bincount(step_batch, minlength=T).astype(np.int64)
    ready = np.maximum.accumulate(enter_time) if pipeline.delivery == "ordered" else enter_time
    return Schedule(
        ready_time=ready,
        steps_per_batch=spb,
        step_start=step_start,
        step_end=step_end,
        step_batch=step_batch,
        step_examples=step_examples,
        batch_size=B,
        enter_time=enter_time,
        take_time=take_time,
        workers=W,
        prefetch=C,
        busy_time=float(sf[des.F_BUSY]),
        switch_time=float(sf[des.F_SWITCH]),
        buffer_area=float(sf[des.F_OCC_AREA]),
        blocked_area=float(sf[des.F_BLOCKED_AREA]),
        n_events=int(si[des.S_N_EVENTS]),
    )


def _grow(a: np.ndarray, n: int, cap: int) -> np.ndarray:
    out = np.empty(cap, dtype=a.dtype)
    out[:n] = a[:n]
    return out


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
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
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
    n = int(np.searchsorted(schedule.step_end, budget, side="right"))
    if n == 0:
        raise ValueError(f"time_budget={budget:g}: no optimizer step ends within the budget "
                         f"(the first ends at {schedule.step_end[0]:.4g})")
    return schedule, schedule.first_steps(n)
