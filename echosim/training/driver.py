"""The driver of a run in progress (`Run`) and the state it advances (`RunState`).

A `Run` holds what a run is (problem, optimizers, batch size, seed, dtype, log points,
the batch feed, the kernel) and advances a `RunState`, the value object of everything
that changes as it goes: the iterates and the method's state, the averaging sums, the
logged points, the clock and the counters. Made and driven through
`echosim.training.runner` (`start`, `run`, `run_many`, `run_shared`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from echosim._validate import check_int
from echosim.pipeline.schedule import echo_schedule
from echosim.pipeline.sizes import check_fits
from echosim.training.compiling import compile_notice, kernel_of
from echosim.training.feeds import BatchFeed, ExampleFeed, RowStream, Windows, chunk_batches
from echosim.training.losses import get_loss
from echosim.training.methods import METHODS, Optimizer, learning_rates
from echosim.training.problems import BATCHES_PER_BLOCK, Problem
from echosim.training.trajectory import DIVERGENCE_FACTOR, Trajectory, explicit_points, log_points

if TYPE_CHECKING:
    from echosim.training.kernel import State

__all__ = ["Run", "RunState"]


@dataclass
class RunState:
    """Everything a run carries from block to block, whatever the blocks: the kernel's
    `State` (iterates, the method's state, averaging sums, step and batch counters,
    divergence flags; updated in place by the kernel) and what the driver records."""

    kernel: State
    diverged_unit: list
    """Per optimizer: the kernel unit after which it diverged, or None."""
    logged: list = field(default_factory=list)
    """Per block: (log points, iterates, averaged iterates, batch-end averages) at those points."""
    first: list = field(default_factory=list)
    """Per block: the first-step losses (n, L) when recorded."""
    times: list = field(default_factory=list)
    """Per block: the wall-clock time at its log points (block-wise clock)."""
    timed_blocks: bool | None = None
    """Whether the blocks come with step end times (decided by the first block)."""
    step_times: float = 0.0
    """The end time of the last step (block-wise clock)."""
    cum: list = field(default_factory=lambda: [np.zeros(1, dtype=np.int64)])
    """Per block: log-unit counts after each kernel unit."""
    n_units: int = 0
    n_log_units: int = 0

    @classmethod
    def start(cls, W: np.ndarray, method) -> RunState:
        """The state before the first step from the iterates W (L, d) in the run's dtype."""
        from echosim.training.kernel import State  # its import defines the kernels: not at this module's

        return cls(kernel=State.start(W, method), diverged_unit=[None] * len(W))


class Run:
    """A run in progress, advanced block by block; its state is a `RunState` (``state``).

    Made by `start` (one optimizer) or `start_many` (L learning rates of one method);
    `advance` runs the next fresh batches, `trajectory` / `trajectories` give the
    result so far. Whatever the blocks, the result is bitwise that of one `run` over
    the same K_t: the iterate, the method's state (momentum, Adam's moments and step
    count), the averaging sums, the learning-rate position, the log positions and the
    divergence status all carry over. `run` and `run_many` are one `advance_units` over
    the whole schedule. `chunk_bytes` sizes the windows of batches drawn at once;
    `windows`, a source of them shared with runs of the same stream (`run_shared`).
    """

    def __init__(self, problem, optimizers, *, many, batch_size, seed, n_batches, dtype, log, log_unit, w0,
                 first_loss, quiet, chunk_bytes, schedule=None, windows=None):
        if not isinstance(problem, Problem):
            raise ValueError(f"problem must be an echosim Problem, got {type(problem).__name__}")
        optimizers = list(optimizers)
        if not optimizers or not all(isinstance(o, Optimizer) for o in optimizers):
            raise ValueError("optimizers must be a non-empty list of echosim optimizer specs")
        first = optimizers[0]
        for o in optimizers[1:]:
            if type(o) is not type(first) or _without_lr(o) != _without_lr(first):
                raise ValueError(f"run_many needs one method differing only in lr; got {first!r} and {o!r}")
        self.problem, self.optimizers, self.many, self.quiet = problem, optimizers, many, quiet
        self.method = METHODS[first.name]
        self.loss = get_loss(problem.loss)
        self.B = B = check_int("batch_size", batch_size, lo=1)
        self.seed = check_int("seed", seed, lo=0)
        if dtype not in ("float64", "float32", np.float64, np.float32):
            raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
        self.dtype = np.dtype(dtype)
        if log_unit not in ("batch", "step"):
            raise ValueError(f"log_unit must be 'batch' or 'step', got {log_unit!r}")
        self.log_unit = log_unit
        if not isinstance(first_loss, (bool, np.bool_)):
            raise ValueError(f"first_loss must be True or False, got {first_loss!r}")
        first.check_batch_size(B)
        if n_batches is not None:
            n_batches = check_int("n_batches", n_batches, lo=1)
        self.schedule = schedule
        if schedule is not None:
            n_batches = schedule.n_batches
        self.T = n_batches
        if n_batches is not None:
            check_fits("n_batches", n_batches, 40, what="learning rates and step counts per fresh batch")
        check_fits("batch_size", B, 2 * BATCHES_PER_BLOCK * (problem.n_features + 1) * self.dtype.itemsize,
                   what=f"at least {BATCHES_PER_BLOCK} fresh batches of data at a time")
        self.lr = None if n_batches is None else np.stack([learning_rates(o.lr, n_batches) for o in optimizers], 1)
        if n_batches is None:
            for o in optimizers:
                if not callable(o.lr) and np.ndim(o.lr) > 0:
                    raise ValueError("lr: one learning rate per fresh batch needs the run's n_batches")
        d = problem.dim
        w = np.zeros(d) if w0 is None else np.array(w0, dtype=np.float64)
        if w.shape != (d,) or not np.all(np.isfinite(w)):
            raise ValueError(f"w0 must be a finite array of shape ({d},)")
        self.w_start = w.astype(self.dtype).astype(np.float64)
        chunk = chunk_batches(B, problem.n_features, self.dtype.itemsize, chunk_bytes)
        if schedule is not None and schedule.step_examples is not None:
            if first_loss:
                raise ValueError("first_loss: example echoing mixes fresh batches within a step; it has no "
                                 "first step on a fresh batch")
            self.feed = ExampleFeed(problem, schedule, B, self.seed, self.dtype, chunk)
        else:
            if windows is None:
                windows = Windows(problem, self.seed, B, self.dtype)
            elif windows.stream() != (problem, self.seed, B, self.dtype):
                raise ValueError("windows: a shared batch source serves runs of one problem, seed, batch_size "
                                 "and dtype")
            self.feed = BatchFeed(windows, n_batches, chunk)
        self.by_step = log_unit == "step" and (schedule is None or schedule.step_examples is None)
        self._resolve_logs(log)
        self.state = RunState.start(np.repeat(self.w_start.astype(self.dtype)[None, :], len(optimizers), axis=0),
                                    self.method)
        self.hyper = np.ascontiguousarray(first.kernel_hyper(), dtype=np.float64)
        if self.hyper.shape != (len(self.method.hyper),):  # the kernel reads them by position, unchecked
            raise ValueError(f"{first!r}: kernel_hyper() gives {self.hyper.size} values; its row reads "
                             f"{len(self.method.hyper)} ({', '.join(self.method.hyper) or 'none'})")
        self.wide = many and self.loss.margin
        self.record_first = bool(first_loss)
        self.rows = RowStream(self.seed, B, first.sub_batch, first.replace) if self.method.sub_batches else None
        self.kernel_name = (f"{first.name}:{self.loss.name}:{'wide' if self.wide else 'rows'}"
                            f"{':first_loss' if self.record_first else ''} ({self.dtype.name})")

    # ---- setup

    def _resolve_logs(self, log):
        """Fix the log positions where the run's length in log units is known; else keep a rule."""
        total = None
        if self.schedule is not None:
            total = self.schedule.n_steps if self.by_step or self.schedule.step_examples is not None else \
                self.schedule.n_batches
        elif not self.by_step and self.T is not None:
            total = self.T
        self.log_all = isinstance(log, str) and log == "all"
        if total is not None:
            self.log_at = log_points(log, total)
            check_fits("log", len(self.log_at), 8 + self.problem.dim * (16 + self.dtype.itemsize) * len(self.optimizers),
                       what="the iterates at every log point")
        elif self.log_all:
            self.log_at = None
        elif not isinstance(log, str) and np.ndim(log) == 1:
            self.log_at = explicit_points(log)
        else:
            unit = "steps" if self.by_step else "fresh batches"
            raise ValueError(f"log={log!r} needs the run's length in {unit}: give n_batches (log_unit='batch') "
                             "or log='all' or the log points themselves")

    # ---- advancing

    def advance(self, steps_per_batch, step_end=None):
        """Run the next fresh batches with K_t = `steps_per_batch` (an int array, one per
        batch; an int K for one batch). `step_end`: the wall-clock end time of each of
        their steps (nondecreasing, sum K_t values), for the trajectory's ``time``; give
        it for every block or for none. Returns the block's first-step losses ((n,) for
        one optimizer, (n, L) for several) when the run records them, else None.
        """
        if self.schedule is not None:
            raise ValueError("advance: this run follows a whole schedule (run() or run_many())")
        K = echo_schedule(np.atleast_1d(np.asarray(steps_per_batch))).steps_per_batch
        n = len(K)
        t0 = self.feed.n_batches
        if self.T is not None and t0 + n > self.T:
            raise ValueError(f"advance: {n} more fresh batches would pass the run's n_batches={self.T} "
                             f"({t0} done)")
        if self.method.one_step and K.max() > 1:
            raise ValueError(f"{type(self.optimizers[0]).__name__} takes one step per batch; got K_t up to {K.max()}")
        st = self.state
        timed = step_end is not None
        if st.timed_blocks is None:
            st.timed_blocks = timed
        elif st.timed_blocks != timed:
            raise ValueError("advance: give step_end for every block or for none")
        if timed:
            ends = np.asarray(step_end, dtype=np.float64)
            if ends.shape != (int(K.sum()),) or not np.all(np.isfinite(ends)) \
                    or np.any(np.diff(ends) < 0) or (ends.size and ends[0] < st.step_times):
                raise ValueError(f"step_end: need {int(K.sum())} finite, nondecreasing end times, one per step, "
                                 f"from the last block's end ({st.step_times:g})")
        self.feed.extend(K)
        lr = self.lr[t0:t0 + n] if self.lr is not None else \
            np.stack([learning_rates(o.lr, t0 + n, start=t0) for o in self.optimizers], 1)
        with compile_notice(self.quiet, self.kernel_name):
            first = self.advance_units(n, lr)
        if timed:
            self._record_times(ends, n)
        if first is None:
            return None
        return first[:, 0] if not self.many else first

    def advance_units(self, n, lr):
        """Run the feed's next `n` kernel units (fresh batches, or steps under example
        echoing) at learning rates `lr` (n, L); their first-step losses (n, L) or None."""
        for _ in self.units(n, lr):
            pass
        return self.state.first[-1] if self.record_first else None

    def units(self, n, lr):
        """`advance_units` as a generator that yields after each piece of the feed (a window
        of drawn batches) but the last: `echosim.training.runner.run_shared` advances
        several runs of one stream window by window in step, so that each window is drawn
        once."""
        feed, st = self.feed, self.state
        u0, W, diverged = st.n_units, st.kernel.W, st.kernel.diverged
        cum_new = (feed.steps_after(np.arange(u0 + 1, u0 + n + 1)) if self.by_step else
                   np.arange(u0 + 1, u0 + n + 1, dtype=np.int64))
        lo, hi = st.n_log_units, int(cum_new[-1])
        if self.log_at is None:
            at = np.arange(lo + 1, hi + 1, dtype=np.int64)
        else:
            a, b = np.searchsorted(self.log_at, [lo + 1, hi + 1])
            at = self.log_at[a:b]
        L, d = W.shape
        log_w = np.empty((len(at), L, d), dtype=self.dtype)
        log_avg, log_end = np.empty((len(at), L, d)), np.empty((len(at), L, d))
        first = np.full((n, L), np.nan) if self.record_first else None
        cum = np.concatenate([[lo], cum_new])  # log-unit counts after units u0 .. u0 + n
        alive = int(np.sum(diverged < 0))
        from echosim.training.kernel import call_chunk

        kernel = (kernel_of(self.method.code, self.loss.code, self.wide, self.method.sub_batches, self.record_first)
                  if alive else None)
        no_first = np.zeros((0, L))
        no_rows = np.zeros((0, 0), dtype=np.int64)
        for s, e, X, Y in feed.pieces(u0, u0 + n) if alive else ():
            rows = self.rows.rows(feed.K, s, e) if self.rows is not None else no_rows
            i, j = np.searchsorted(at, [cum[s - u0] + 1, cum[e - u0] + 1])
            local = at[i:j] - 1 - cum[s - u0]
            flags_before = diverged.copy()
            alive = call_chunk(kernel, X, Y, feed.K[s:e], np.ascontiguousarray(lr[s - u0:e - u0]), rows, self.hyper,
                               self.problem.l2, st.kernel, local, self.by_step,
                               (log_w[i:j], log_avg[i:j], log_end[i:j]),
                               first[s - u0:e - u0] if first is not None else no_first)
            for c in np.flatnonzero((flags_before < 0) & (diverged >= 0)):
                st.diverged_unit[c] = s + int(diverged[c]) + 1
            if alive == 0:
                break
            if e < u0 + n:  # after the last piece, finish at once (its logs still in cache)
                yield
        st.logged.append((at, log_w, log_avg, log_end))
        st.cum.append(cum_new)
        st.n_units += n
        st.n_log_units = hi
        if first is not None:
            st.first.append(first)

    def _record_times(self, ends, n):
        """The block-wise clock: the end time of the last step before each of the block's log points."""
        st = self.state
        at = st.logged[-1][0]
        steps = at if self.by_step else self.feed.steps_after(at)
        before = int(self.feed.steps_after(np.array([st.n_units - n]))[0])
        st.times.append(ends[steps - 1 - before] if len(at) else np.zeros(0))
        if ends.size:
            st.step_times = float(ends[-1])

    # ---- results

    @property
    def batches_done(self) -> int:
        """Fresh batches consumed so far."""
        return int(self.feed.batches_after(np.array([self.state.n_units]))[0])

    @property
    def first_losses(self) -> np.ndarray | None:
        """The first-step loss of every fresh batch so far ((T,) or (T, L)), or None if not recorded."""
        if not self.record_first:
            return None
        first = self.state.first
        out = np.concatenate(first) if first else np.zeros((0, len(self.optimizers)))
        return out if self.many else out[:, 0]

    def trajectories(self) -> list:
        """One Trajectory per optimizer, of the run so far."""
        with compile_notice(self.quiet, self.kernel_name):
            return self._trajectories()

    def trajectory(self) -> Trajectory:
        """The Trajectory of the run so far (one optimizer; `trajectories` for several)."""
        if len(self.optimizers) != 1:
            raise ValueError("trajectory: this run has several optimizers; use trajectories()")
        return self.trajectories()[0]

    def _trajectories(self) -> list:
        st, ks = self.state, self.state.kernel
        at = np.concatenate([b[0] for b in st.logged]) if st.logged else np.zeros(0, dtype=np.int64)
        logs = [np.concatenate([b[k] for b in st.logged]) if st.logged else
                np.zeros((0, *ks.W.shape), dtype=self.dtype if k == 1 else np.float64) for k in (1, 2, 3)]
        cum = np.concatenate(st.cum)
        final = st.n_log_units
        if final > 0 and (not len(at) or at[-1] != final):
            # a block-wise run stopped between log points: its current state is the last point
            # (a column that diverged before it ends earlier anyway)
            at = np.append(at, final)
            state = (ks.W, ks.avg_sum / ks.counters[0], ks.end_sum / ks.counters[1])
            logs = [np.concatenate([a, s[None].astype(a.dtype)]) for a, s in zip(logs, state)]
        times = self._times(at)
        first = self.first_losses
        return [self._finish(i, at, cum, logs[0][:, i], logs[1][:, i], logs[2][:, i], times,
                             None if first is None else (first[:, i] if self.many else first))
                for i in range(len(self.optimizers))]

    def _times(self, at) -> np.ndarray | None:
        """Simulated time at point 0 and at every log point (None without a clock): read from
        the schedule in one pass over its steps, or recorded block by block."""
        if self.schedule is not None:
            if not self.schedule.timed:
                return None
            points = np.concatenate([[0], at])
            steps = points if self.by_step else self.feed.steps_after(points)
            return self.schedule.time_after(steps)
        st = self.state
        if not st.timed_blocks:
            return None
        recorded = np.concatenate(st.times) if st.times else np.zeros(0)
        if len(recorded) < len(at):  # the current state appended as the last point
            recorded = np.append(recorded, st.step_times)
        return np.concatenate([[0.0], recorded])

    def _finish(self, i, logs, cum, log_w, log_avg, log_end, times, first) -> Trajectory:
        """Excess risks at the log points, steps, times and status: the Trajectory of column i."""
        problem, optimizer, feed, by_step = self.problem, self.optimizers[i], self.feed, self.by_step
        diverged_unit = self.state.diverged_unit[i]
        n_ok = len(logs) if diverged_unit is None else int(np.searchsorted(logs, cum[diverged_unit]))
        points = np.concatenate([[0], logs[:n_ok]]).astype(np.int64)  # in log units: fresh batches, or steps
        units = np.searchsorted(cum, points, side="left") if by_step else points  # kernel units begun
        w_start = self.w_start
        W = np.vstack([w_start, log_w[:n_ok].astype(np.float64)])
        W_avg = np.vstack([w_start, log_avg[:n_ok]])
        W_end = np.vstack([w_start, log_end[:n_ok]])
        iterates, risks = (W, W_avg, W_end), []
        with np.errstate(over="ignore", invalid="ignore"):
            for k, M in enumerate(iterates):
                # an identical earlier array is not evaluated again (K = 1: both averages are the same sums)
                twin = next((j for j in range(k) if np.array_equal(iterates[j], M)), None)
                risks.append(problem.excess_risk(M) if twin is None else risks[twin].copy())
        limit = DIVERGENCE_FACTOR * max(float(risks[0][0]) + float(problem.F_star), np.finfo(np.float64).tiny)
        finite = np.all(np.isfinite(risks), axis=0) & (risks[0] <= limit)
        if not finite.all():
            n_keep = int(np.argmin(finite))
            diverged_unit = int(units[n_keep]) if diverged_unit is None else diverged_unit
            points, units, W, W_avg = points[:n_keep], units[:n_keep], W[:n_keep], W_avg[:n_keep]
            risks = [r[:n_keep] for r in risks]
        steps = points if by_step else feed.steps_after(units)
        time = None if times is None else times[:len(points)]
        K = self.schedule.steps_per_batch if self.schedule is not None else feed.K
        info = dict(problem=repr(problem), optimizer=repr(optimizer), batch_size=self.B,
                    n_batches=self.T if self.T is not None else self.batches_done,
                    echo=float(K.mean()) if len(K) else math.nan, seed=self.seed, dtype=self.dtype.name,
                    log_unit=self.log_unit)
        return Trajectory(
            batches=feed.batches_after(units), steps=steps, time=time,
            risk=risks[0], risk_avg=risks[1], risk_end_avg=risks[2],
            status="ok" if diverged_unit is None else "diverged", w=W[-1], w_avg=W_avg[-1],
            diverged_at=None if diverged_unit is None else int(feed.batches_after(np.array([diverged_unit]))[0]),
            info=info, first_loss=first)


def _without_lr(optimizer) -> dict:
    """An optimizer spec's fields but its learning rate."""
    return {k: v for k, v in vars(optimizer).items() if k != "lr"}

