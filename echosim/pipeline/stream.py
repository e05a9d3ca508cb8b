"""Drive the pipeline's event loop with a bounded output, and derive a long
simulation's steps chunk by chunk instead of keeping them.

T fresh batches take N = sum K_t optimizer steps, often many times T. A simulation
keeps its per-batch arrays; it keeps its per-step arrays (start, end and batch of
every step) only when they fit in one chunk of `STEP_CHUNK` steps. Under a batch
policy the K_t steps of batch t run back to back from its take time (plus the
switch overhead), so a longer simulation keeps the take times, K_t and how it drew
its step durations, and derives the steps again whenever they are asked for: the
same draws and the same additions in the same order give bitwise the steps the
event loop computed, in bounded memory. (Random step times under "sync" and "fixed"
are drawn in one call, as the simulation drew them: 8 bytes a step while read.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from echosim.pipeline.model import CAPPED_POLICIES as _GREEDY, POLICIES, Pipeline
from echosim.pipeline.service_times import Deterministic, ServiceTime
from echosim.pipeline.traces import Trace

__all__ = ["STEP_CHUNK", "HeldSteps", "DerivedSteps", "EventLoop", "Inputs", "draw_inputs", "redrawn_durations",
           "derived_steps", "estimate_echo"]

STEP_CHUNK = 1 << 18
"""Steps the event loop's output holds (24 bytes each): a simulation with more steps
keeps per-batch arrays only and derives its steps in chunks of this many."""

# step times drawn per chunk when their number is not known in advance ("greedy")
_CHUNK_MIN = 4096
_CHUNK_MAX = 1 << 22

Chunk = tuple[int, np.ndarray, np.ndarray, np.ndarray]
"""(index of the first step, step_start, step_end, step_batch) of consecutive steps."""


# ---------------------------------------------------------------------------
# the event loop's inputs


class _StepTimes:
    """Step times for the event loop: a cyclic array, or chunks drawn on demand (their
    sizes recorded, so that the same draws can be made again)."""

    def __init__(self, cyclic: bool, first: np.ndarray, more=None):
        self.cyclic = cyclic
        self.array = np.ascontiguousarray(first, dtype=np.float64)
        self.offset = 0
        self.sizes: list[int] = []
        self._more = more

    def next_chunk(self, offset: int, n: int) -> None:
        self.array = np.empty(0)  # let the spent chunk go before the next is drawn
        self.array = np.ascontiguousarray(self._more(offset, n), dtype=np.float64)
        self.offset = offset
        self.sizes.append(n)


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


def estimate_echo(pipeline: Pipeline) -> float:
    """Rough steps per fresh batch under a capped policy ("greedy", "auto"): the loader's
    time per batch over the accelerator's per step, plus one, within [1, max_echo]. To size
    chunks and outputs, and a run's memory and work before it runs."""
    busy = pipeline.workers if pipeline.blocking == "after" else min(pipeline.workers, pipeline.prefetch)
    ratio = pipeline.arrival.mean / (busy * pipeline.step_time.mean + pipeline.switch_overhead)
    return float(min(pipeline.max_echo, max(1.0, ratio + 1.0)))


def _round_echo(e: float, n: int, u: np.ndarray | None) -> np.ndarray:
    """floor(e) + Bernoulli(e - floor(e)) from uniforms u (None when e is integral)."""
    base = math.floor(e)
    if e == base:
        return np.full(n, base, dtype=np.int64)
    return base + (u[:n] < (e - base)).astype(np.int64)


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


@dataclass
class Inputs:
    """What the event loop consumes: loader times, K_t (or copies) per batch, step times,
    the number of steps when known, and the shuffle's uniforms ("example")."""

    load_time: np.ndarray
    per_batch: np.ndarray | None
    extra: np.ndarray | None
    steps: _StepTimes
    n_known: int | None
    shuffle_draws: Callable[[int], np.ndarray]


def draw_inputs(pipeline: Pipeline, T: int, B: int | None, seeds) -> Inputs:
    """Draw the inputs of a simulation from its four spawned seeds (loader times, step
    times, echo rounding, shuffle); the same seeds give bitwise the same inputs."""
    rng_load, rng_step, rng_echo, rng_shuffle = (np.random.default_rng(s) for s in seeds)
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
    return Inputs(load_time, per_batch, extra, steps, n_known, lambda n: rng_shuffle.random(n))


# ---------------------------------------------------------------------------
# the driver


class EventLoop:
    """One run of the resumable Numba event loop (`echosim.pipeline.kernel`): the
    per-batch outputs stay here, the per-step outputs are handed out by `steps`."""

    def __init__(self, pipeline: Pipeline, T: int, B: int | None, inputs: Inputs, caps: np.ndarray | None = None,
                 decide: Callable | None = None):
        from echosim.pipeline import kernel as des  # compiles (or loads the cache) on first use

        self.des, self.pipeline, self.T, self.inputs = des, pipeline, T, inputs
        self.decide = decide
        W, C, policy = pipeline.workers, pipeline.prefetch, pipeline.policy
        self.shuffle_size = _shuffle_size(pipeline, B) if policy == "example" else 0
        pi = np.zeros(des.N_PI, dtype=np.int64)
        pi[des.P_W] = W
        pi[des.P_C] = C
        pi[des.P_POLICY] = POLICIES[policy].code
        pi[des.P_ORDERED] = pipeline.delivery == "ordered"
        pi[des.P_BEFORE] = pipeline.blocking == "before"
        pi[des.P_MAX_ECHO] = pipeline.max_echo
        pi[des.P_T] = T
        pi[des.P_B] = B or 0
        pi[des.P_S] = self.shuffle_size
        if policy == "example":
            pi[des.P_N_STEPS] = inputs.n_known
            pi[des.P_TOTAL_EX] = int(inputs.per_batch.sum())
        pi[des.P_CYCLIC] = inputs.steps.cyclic
        # greedy's caps: max_echo for every batch (-1), or per batch, given (T known) or
        # decided as the loop goes (`decide` asked before each batch without one)
        pi[des.P_N_CAPS] = -1 if caps is None and decide is None else (0 if caps is None else T)
        self.pi = pi
        self.pf = np.array([pipeline.switch_overhead], dtype=np.float64)
        load_time = np.ascontiguousarray(inputs.load_time, dtype=np.float64)
        self.load_time = load_time if load_time.flags.writeable else load_time.copy()
        per_batch = np.zeros(1, dtype=np.int64) if inputs.per_batch is None else inputs.per_batch
        if caps is not None:
            per_batch = caps
        elif decide is not None:
            per_batch = np.zeros(T, dtype=np.int64)
        self.per_batch = np.array(per_batch, dtype=np.int64) if decide is not None else \
            np.ascontiguousarray(per_batch, dtype=np.int64)
        self.si = np.zeros(des.N_SI, dtype=np.int64)
        self.sf = np.zeros(des.N_SF, dtype=np.float64)
        self.serv_fin = np.zeros(W, dtype=np.float64)
        self.serv_seq = np.zeros(W, dtype=np.int64)
        self.held_seq = np.zeros(W, dtype=np.int64)
        self.entered = np.zeros(T, dtype=np.uint8)
        self.enter_time = np.zeros(T, dtype=np.float64)
        self.take_time = np.zeros(T, dtype=np.float64)
        self.steps_per_batch = np.zeros(T, dtype=np.int64)
        self.flushed = False  # whether `steps` handed out a full output before the end
        self._out = None

    @property
    def n_steps(self) -> int:
        return int(self.si[self.des.S_J])

    @property
    def busy_time(self) -> float:
        """Total step time, summed in step order."""
        return float(self.sf[self.des.F_BUSY])

    def totals(self) -> dict:
        """The loop's other totals, named as the `Schedule` fields they fill."""
        des, sf = self.des, self.sf
        return {"switch_time": float(sf[des.F_SWITCH]), "buffer_area": float(sf[des.F_OCC_AREA]),
                "blocked_area": float(sf[des.F_BLOCKED_AREA]), "n_events": int(self.si[des.S_N_EVENTS])}

    def steps(self, chunk: int | None = None) -> Iterator[Chunk]:
        """Run the loop to the end; yield its steps each time the output holds `chunk`
        of them, and the rest at the end (views, valid until the next yield). Without
        `chunk` the output grows to hold every step: see `held`."""
        des, pipeline, T, steps = self.des, self.pipeline, self.T, self.inputs.steps
        est = estimate_echo(pipeline) if pipeline.policy in _GREEDY else 1.0
        n_known = self.inputs.n_known
        cap = n_known if n_known is not None else min(T * pipeline.max_echo, int(T * est * 1.1) + 1024)
        limit = math.inf if chunk is None else chunk
        cap = int(min(cap, limit))
        out = [np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.float64), np.empty(cap, dtype=np.int64)]
        off = 0
        des.init_des(self.pi, self.si, self.sf, self.serv_fin, self.serv_seq, self.load_time)
        while True:
            status = des.run_des(
                self.pi, self.pf, self.load_time, self.per_batch, steps.array, self.si, self.sf, self.serv_fin,
                self.serv_seq, self.held_seq, self.entered, self.enter_time, self.take_time, self.steps_per_batch,
                *out,
            )
            if status == des.DONE:
                break
            j = int(self.si[des.S_J])
            n_taken = int(self.si[des.S_N_TAKEN])
            left = T - n_taken + 1
            per = max(j / max(n_taken, 1), est, 1.0)
            more = int(min(left * pipeline.max_echo, left * per * 1.25)) + _CHUNK_MIN
            if status == des.NEED_STEP_TIMES:
                steps.next_chunk(j, min(more, _CHUNK_MAX))
                self.si[des.S_STEP_OFFSET] = j
            elif status == des.NEED_OUTPUT and cap < limit:
                cap = int(min(T * pipeline.max_echo, j + more, limit))
                out = [_grow(a, j, cap) for a in out]
            elif status == des.NEED_CAPS:
                self._more_caps()
            elif status == des.NEED_OUTPUT:
                self.flushed = True
                yield off, out[0][:j - off], out[1][:j - off], out[2][:j - off]
                off = j
                self.si[des.S_OUT_OFFSET] = j
            else:  # pragma: no cover - the model cannot deadlock
                raise RuntimeError("pipeline event loop made no progress (deadlock); please report")
        self._out = out
        n = self.n_steps - off
        yield off, out[0][:n], out[1][:n], out[2][:n]

    def _more_caps(self) -> None:
        """Ask `decide` for the caps of the next batches, before batch n is taken at time tau."""
        des = self.des
        n = int(self.si[des.S_N_TAKEN])
        tau = float(self.sf[des.F_NOW])
        caps = np.asarray(self.decide(n, tau, self.steps_per_batch[:n], self.take_time[:n]))
        m = caps.size
        if caps.ndim != 1 or m == 0 or not np.issubdtype(caps.dtype, np.integer) or n + m > self.T \
                or caps.min() < 1 or caps.max() > self.pipeline.max_echo:
            raise ValueError(f"decide: expected 1..{self.T - n} integer caps in 1..{self.pipeline.max_echo} "
                             f"for the batches from {n} on, got {caps!r:.80}")
        self.per_batch[n:n + m] = caps
        self.pi[des.P_N_CAPS] = n + m

    def held(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every step's start, end and batch, once `steps` ran to the end without flushing."""
        if self.flushed or self._out is None:
            raise RuntimeError("the steps were handed out in chunks; they are not held")
        N = self.n_steps
        out = [a[:N] for a in self._out]
        if N < len(self._out[0]):  # release the spare capacity
            out = [a.copy() for a in out]
        return out[0], out[1], out[2]


def _shuffle_size(pipeline: Pipeline, B: int) -> int:
    S = pipeline.shuffle_buffer
    return B * math.ceil(pipeline.echo) if S is None else S


def _grow(a: np.ndarray, n: int, cap: int) -> np.ndarray:
    out = np.empty(cap, dtype=a.dtype)
    out[:n] = a[:n]
    return out


def redrawn_durations(step: ServiceTime, seed, n_known: int | None, sizes) -> Iterator[np.ndarray]:
    """The step durations a simulation drew from `seed`, drawn again in order: the same
    calls on the same stream (one of `n_known`, or one per recorded chunk size)."""
    steps = _sampled_step_times(step, np.random.default_rng(seed), n_known)
    if steps.cyclic:
        period, j = steps.array, 0
        while True:
            yield period[(j + np.arange(STEP_CHUNK)) % period.size]
            j += STEP_CHUNK
    elif n_known is not None:
        yield steps.array
    else:
        for n in sizes:
            steps.next_chunk(0, n)
            yield steps.array


def derived_steps(take_time: np.ndarray, switch_overhead: float, steps_per_batch: np.ndarray,
                  durations: Callable[[], Iterator[np.ndarray]], n: int) -> Iterator[Chunk]:
    """The first `n` steps of a batch-policy simulation, `STEP_CHUNK` at a time, from its
    take times, K_t and step durations (`echosim.pipeline.kernel.batch_steps`)."""
    from echosim.pipeline.kernel import batch_steps

    state, last_end = np.zeros(2, dtype=np.int64), np.zeros(1)
    j = 0
    chunks = durations()
    d = next(chunks)
    while True:
        for a in range(0, d.size, STEP_CHUNK):
            m = min(STEP_CHUNK, d.size - a, n - j)
            start, end, batch = np.empty(m), np.empty(m), np.empty(m, dtype=np.int64)
            batch_steps(take_time, switch_overhead, steps_per_batch, d[a:a + m], state, last_end, start, end, batch)
            yield j, start, end, batch
            j += m
            if j == n:
                return
        d = None  # let the spent durations go before the next are drawn
        d = next(chunks)


# ---------------------------------------------------------------------------
# a schedule's steps: held, or derived


class _Steps:
    """The per-step part of a simulated Schedule: N steps, in chunks."""

    n: int

    def chunks(self) -> Iterator[Chunk]:
        raise NotImplementedError

    def end_at(self, index) -> np.ndarray:
        """step_end[index] for an integer array `index` (entries in [0, n))."""
        index = np.asarray(index, dtype=np.int64)
        if index.size and (index.min() < 0 or index.max() >= self.n):
            raise IndexError(f"step index out of range [0, {self.n})")
        order = np.argsort(index, kind="stable")
        wanted = index[order]
        out = np.empty(index.shape, dtype=np.float64)
        for j0, _, end, _ in self.chunks():
            a, b = np.searchsorted(wanted, [j0, j0 + len(end)])
            out[order[a:b]] = end[wanted[a:b] - j0]
            if b == wanted.size:
                break
        return out

    def count_until(self, t: float) -> int:
        """The number of steps that end by time `t` (step ends never decrease)."""
        n = 0
        for _, _, end, _ in self.chunks():
            k = int(np.searchsorted(end, t, side="right"))
            n += k
            if k < len(end):
                break
        return n


class HeldSteps(_Steps):
    """Per-step arrays held in memory."""

    def __init__(self, start: np.ndarray, end: np.ndarray, batch: np.ndarray, busy_time: float):
        self.start, self.end, self.batch = start, end, batch
        self.n = int(end.shape[0])
        self.busy_time = busy_time

    @property
    def makespan(self) -> float:
        return float(self.end[-1]) if self.n else 0.0

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.start, self.end, self.batch

    def chunks(self) -> Iterator[Chunk]:
        yield 0, self.start, self.end, self.batch

    def first(self, n: int) -> HeldSteps:
        start, end = self.start[:n], self.end[:n]
        return HeldSteps(start, end, self.batch[:n], float(np.sum(end - start)))


class DerivedSteps(_Steps):
    """The first `n` steps of a simulation, derived again chunk by chunk when asked for.

    `derive` is a function of no arguments that yields the simulation's steps in chunks
    (`derived_steps` with the simulation's per-batch data and durations). The whole
    arrays are built, and kept, only when `arrays` is called. `busy_time` and
    `makespan` are computed on first use unless given.
    """

    def __init__(self, derive: Callable[[], Iterator[Chunk]], n: int, busy_time: float | None = None,
                 makespan: float | None = None):
        self._derive, self.n = derive, n
        self._busy_time, self._makespan = busy_time, makespan
        self._arrays = None

    def chunks(self) -> Iterator[Chunk]:
        if self._arrays is not None:
            yield (0, *self._arrays)
            return
        for j0, start, end, batch in self._derive():
            k = min(len(end), self.n - j0)
            yield j0, start[:k], end[:k], batch[:k]
            if j0 + k >= self.n:
                return

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            start, end = np.empty(self.n), np.empty(self.n)
            batch = np.empty(self.n, dtype=np.int64)
            for j0, s, e, b in self.chunks():
                start[j0:j0 + len(s)], end[j0:j0 + len(e)], batch[j0:j0 + len(b)] = s, e, b
            self._arrays = (start, end, batch)
        return self._arrays

    @property
    def busy_time(self) -> float:
        """The steps' summed durations, as `HeldSteps.first` sums them (bitwise)."""
        if self._busy_time is None:
            durations = np.empty(self.n)
            for j0, start, end, _ in self.chunks():
                durations[j0:j0 + len(end)] = end - start
            self._busy_time = float(np.sum(durations))
        return self._busy_time

    @property
    def makespan(self) -> float:
        if self._makespan is None:
            self._makespan = float(self.end_at([self.n - 1])[0]) if self.n else 0.0
        return self._makespan

    def first(self, n: int) -> DerivedSteps:
        return DerivedSteps(self._derive, n)
