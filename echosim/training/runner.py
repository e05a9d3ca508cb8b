"""One driver for runs of one optimizer or of L learning rates at once, advanced whole
(`run`, `run_many`) or block by block (`start`, `start_many`, then `Run.advance`).

The step counts K_t come from `echo`: an int (every batch), an array (one per batch),
or a pipeline `Schedule`, which also gives the simulated wall-clock time of every
step; a block-wise run takes the K_t of each block as it goes (and, optionally, the
end time of each step). Batches are generated in chunks and fed to the Numba kernel
(`echosim.training.kernel`, specialised to the run's method, loss and layout), whose
state carries over from chunk to chunk and from block to block, so memory stays
bounded for long runs and a run advanced in blocks is bitwise the run advanced at once.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from echosim._validate import check_int
from echosim.pipeline.model import POLICIES, Pipeline
from echosim.pipeline.schedule import Schedule, echo_schedule, simulate
from echosim.pipeline.sizes import check_fits
from echosim.training import coupled
from echosim.training.losses import get_loss
from echosim.training.methods import METHODS, Optimizer, get_method, learning_rates
from echosim.training.problems import BATCHES_PER_BLOCK, STREAM_OPTIMIZER, Problem, block_rng

__all__ = ["Trajectory", "Run", "run", "run_coupled", "run_many", "start", "start_many", "log_points", "compile_kernels",
           "kernel_key", "kernel_cached"]

CHUNK_BYTES = 1 << 20
"""Target size of the batch data generated at once (at least one block): small enough that
the kernel reads the batches from cache right after they are drawn."""

AUTO_LOG_MAX = 2000
"""log="auto": log every ⌈n/2000⌉ units (and the last), so at most about 2000 points:
the one rule for `run` and for sweeps (`echosim.experiments.assemble`)."""

DIVERGENCE_FACTOR = 100.0
"""A run diverges where the last iterate's excess risk exceeds this multiple of F(w₀)."""

QUIET_ENV = "ECHOSIM_QUIET"
"""Set to 1 to silence the line a run prints on stderr when it must compile its kernels."""


@dataclass(frozen=True)
class Trajectory:
    """Excess risk F(w) − F* at logged fresh-batch boundaries.

    ``batches[i]`` fresh batches had been consumed at log point i (point 0 is w₀),
    ``steps[i]`` optimizer steps taken, ``time[i]`` the simulated wall-clock time
    (None without a clock). ``risk`` is the last iterate's excess risk, ``risk_avg``
    the uniform average of every step's iterate, ``risk_end_avg`` the average of
    batch-end iterates. A run that diverged (see `run`) has status "diverged" and
    stops at its last logged point before the divergence. ``first_loss`` (with
    ``first_loss=True``): per fresh batch t, the minibatch loss f_t(w_t) at the iterate
    before the first step on it (plus the l2 term), what a training loop's forward
    pass reports; None otherwise.
    """

    batches: np.ndarray
    steps: np.ndarray
    time: np.ndarray | None
    risk: np.ndarray
    risk_avg: np.ndarray
    risk_end_avg: np.ndarray
    status: str
    w: np.ndarray
    w_avg: np.ndarray
    diverged_at: int | None = None
    info: dict = field(default_factory=dict)
    first_loss: np.ndarray | None = None

    def __len__(self):
        return len(self.batches)

    def __repr__(self) -> str:
        n = len(self)
        wall = f", wall_clock={float(self.time[-1]):.6g}" if self.time is not None and n else ""
        risk = f"{float(self.risk[-1]):.4g}" if n else "nan"
        batches, steps = (int(self.batches[-1]), int(self.steps[-1])) if n else (0, 0)
        return (f"Trajectory(status={self.status!r}, points={n}, batches={batches}, steps={steps}, "
                f"final_excess_risk={risk}{wall})")

    def _repr_html_(self) -> str:
        import html

        n = len(self)
        facts = [("status", self.status + (f" at fresh batch {self.diverged_at}" if self.diverged_at is not None
                                           else "")),
                 ("logged points", str(n)),
                 ("fresh batches", str(int(self.batches[-1])) if n else "0"),
                 ("optimizer steps", str(int(self.steps[-1])) if n else "0"),
                 ("final excess risk F(w) − F*", f"{float(self.risk[-1]):.4g}" if n else "-")]
        if self.time is not None and n:
            facts.append(("simulated wall-clock", f"{float(self.time[-1]):.6g} time units"))
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in facts)
        return f"<table><caption>Trajectory</caption>{rows}</table>"

    def summary(self) -> dict:
        """Final values and the run's parameters, as one flat dict."""
        out = dict(self.info)
        out.update(
            status=self.status,
            diverged_at=self.diverged_at,
            batches=int(self.batches[-1]),
            steps=int(self.steps[-1]),
            time=None if self.time is None else float(self.time[-1]),
            final_risk=float(self.risk[-1]),
            final_risk_avg=float(self.risk_avg[-1]),
            final_risk_end_avg=float(self.risk_end_avg[-1]),
        )
        return out

    def to_frame(self):
        """The logged points as a pandas DataFrame (one row per point; pandas: the ``sweep`` extra)."""
        try:
            import pandas as pd  # an optional library, imported here only (tests/test_layers.py)
        except ImportError:
            raise ImportError("Trajectory.to_frame needs pandas: pip install 'echosim[sweep]'") from None
        columns = {"batches": self.batches, "steps": self.steps,
                   "time": np.full(len(self), np.nan) if self.time is None else self.time,
                   "risk": self.risk, "risk_avg": self.risk_avg, "risk_end_avg": self.risk_end_avg}
        return pd.DataFrame(columns)


def _as_schedule(echo, n_batches) -> Schedule:
    """The run's Schedule: `echo` itself, or one built by the pipeline layer from K or K_t."""
    if isinstance(echo, Schedule):
        if n_batches is not None and n_batches != echo.n_batches:
            raise ValueError(f"n_batches={n_batches} does not match the schedule's {echo.n_batches} batches")
        return echo
    return echo_schedule(echo, n_batches)


def log_points(log, n: int) -> np.ndarray:
    """Counts 1..n (fresh batches, or steps) after which to log, always with n: "auto"
    (every ⌈n/`AUTO_LOG_MAX`⌉), "all", a count (that many log-spaced) or an array."""
    if isinstance(log, str):
        if log == "all":
            return np.arange(1, n + 1, dtype=np.int64)
        if log != "auto":
            raise ValueError(f"log must be 'auto', 'all', a count or an array of batch counts, got {log!r}")
        every = max(1, math.ceil(n / AUTO_LOG_MAX))
        return np.union1d(np.arange(every, n + 1, every, dtype=np.int64), [n]).astype(np.int64)
    if np.ndim(log) == 0:
        count = check_int("log", log, lo=1)
        pts = np.unique(np.round(np.geomspace(1, n, num=min(count, n))).astype(np.int64))
    else:
        pts = _explicit_points(log, n)
    return np.union1d(pts, [n]).astype(np.int64)


def _explicit_points(log, n=None) -> np.ndarray:
    try:
        pts = np.unique(np.asarray(log, dtype=np.int64))
    except (TypeError, ValueError):
        raise ValueError(f"log must be 'auto', 'all', a count or an array of batch counts, got {log!r}") from None
    if pts.size and (pts[0] < 1 or (n is not None and pts[-1] > n)):
        raise ValueError(f"log: batch counts must lie in [1, {'n' if n is None else n}]")
    return pts


def _sub_batch_rows(optimizer, seed, K, start, stop, B):
    """Sub-batch rows for every step of batches start..stop−1, from block-keyed generators
    (one per 16 fresh batches): what a whole run draws; `Run` draws the same rows block
    by block (tests/training/test_runner.py holds them equal)."""
    b = optimizer.sub_batch
    out = []
    for first in range(start, stop, BATCHES_PER_BLOCK):
        rng = block_rng(seed, STREAM_OPTIMIZER, first // BATCHES_PER_BLOCK)
        n = int(K[first : min(first + BATCHES_PER_BLOCK, stop)].sum())
        out.append(_draw_rows(rng, n, b, B, optimizer.replace))
    return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)


def _draw_rows(rng, n, b, B, replace):
    if replace:
        return rng.integers(0, B, size=(n, b))
    return np.argsort(rng.random((n, B)), axis=1)[:, :b]


def chunk_batches(batch_size: int, dim: int, itemsize: int) -> int:
    """Fresh batches per kernel call: about CHUNK_BYTES of data, a multiple of the block size."""
    n = CHUNK_BYTES // max(1, batch_size * dim * itemsize)
    return max(BATCHES_PER_BLOCK, n // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK)


def kernel_key(method: str, loss: str, many: bool, first_loss: bool = False) -> str:
    """The name of the kernel a run of `method` on `loss` uses (`run_many` if `many`; one
    recording first-step losses if `first_loss`), e.g. ``"echoed_gd:logistic:wide"``: what
    `compile_kernels` and `kernel_cached` take."""
    get_method(method)
    layout = "wide" if many and get_loss(loss).margin else "rows"
    return f"{method}:{loss}:{layout}" + (":first_loss" if first_loss else "")


def _kernel(key: str):
    method, loss, layout, *first = key.split(":")
    row = get_method(method)
    return _kernel_of(row.code, get_loss(loss).code, layout == "wide", row.sub_batches, first == ["first_loss"])


def _kernel_of(method_code, loss_code, wide, sub, first):
    from echosim.training.kernel import kernel_for  # compiles on first call, not at import

    return kernel_for(method_code, loss_code, wide, sub, first)


# --------------------------------------------------------------------------- compile notice


@contextmanager
def _compile_notice(quiet: bool):
    """Say once on stderr, when Numba starts compiling inside the block, that it does
    (loading from Numba's cache says nothing); silent with `quiet` or $ECHOSIM_QUIET=1."""
    if quiet or os.environ.get(QUIET_ENV, "") not in ("", "0"):
        yield
        return
    from numba.core import event

    class _Notice(event.Listener):
        said = False

        def on_start(self, ev):
            if not self.said:
                self.said = True
                print("echosim: compiling the Numba kernels this run uses (once per machine: later runs load "
                      f"them from the cache; {QUIET_ENV}=1 or quiet=True silences this)", file=sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield


# --------------------------------------------------------------------------- the driver


class Run:
    """A run in progress: its iterates and every piece of state, advanced block by block.

    Made by `start` (one optimizer) or `start_many` (L learning rates of one method);
    `advance` runs the next fresh batches, `trajectory` / `trajectories` give the
    result so far. Whatever the blocks, the result is bitwise that of one `run` over
    the same K_t: the iterate, the method's state (momentum, Adam's moments and step
    count), the averaging sums, the learning-rate position, the log positions and the
    divergence status all carry over. `run` and `run_many` are one `advance` over the
    whole schedule.
    """

    def __init__(self, problem, optimizers, *, many, batch_size, seed, n_batches, dtype, log, log_unit, w0,
                 first_loss, quiet, schedule=None):
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
        if schedule is not None and schedule.step_examples is not None:
            if first_loss:
                raise ValueError("first_loss: example echoing mixes fresh batches within a step; it has no "
                                 "first step on a fresh batch")
            self.feed = _ExampleFeed(problem, schedule, B, self.seed, self.dtype)
        else:
            self.feed = _BatchFeed(problem, B, self.seed, self.dtype, n_batches)
        self.by_step = log_unit == "step" and (schedule is None or schedule.step_examples is None)
        self._resolve_logs(log)
        L = len(optimizers)
        from echosim.training.kernel import State

        self.state = State.start(np.repeat(self.w_start.astype(self.dtype)[None, :], L, axis=0), self.method)
        self.W, self.S, self.avg_sum, self.end_sum, self.counters, self.diverged = self.state  # updated in place
        self.diverged_unit: list = [None] * L
        self.hyper = np.ascontiguousarray(first.kernel_hyper(), dtype=np.float64)
        if self.hyper.shape != (len(self.method.hyper),):  # the kernel reads them by position, unchecked
            raise ValueError(f"{first!r}: kernel_hyper() gives {self.hyper.size} values; its row reads "
                             f"{len(self.method.hyper)} ({', '.join(self.method.hyper) or 'none'})")
        self.wide = many and self.loss.margin
        self.record_first = bool(first_loss)
        self.first: list = []
        self.logged: list = []  # per block: (log_w, log_avg, log_end)
        self.times: list = []  # per block: times at its log points (block-wise clock)
        self.timed_blocks: bool | None = None
        self.step_times = 0.0  # the end time of the last step (block-wise clock)
        self.cum = [np.zeros(1, dtype=np.int64)]  # log-unit counts after each kernel unit
        self.n_units = 0
        self.n_log_units = 0
        self.logs_done = np.zeros(0, dtype=np.int64)
        self._rows_rng = None  # (block, generator) of the sub-batch rows being drawn

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
            self.log_at = _explicit_points(log)
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
        timed = step_end is not None
        if self.timed_blocks is None:
            self.timed_blocks = timed
        elif self.timed_blocks != timed:
            raise ValueError("advance: give step_end for every block or for none")
        if timed:
            ends = np.asarray(step_end, dtype=np.float64)
            if ends.shape != (int(K.sum()),) or not np.all(np.isfinite(ends)) \
                    or np.any(np.diff(ends) < 0) or (ends.size and ends[0] < self.step_times):
                raise ValueError(f"step_end: need {int(K.sum())} finite, nondecreasing end times, one per step, "
                                 f"from the last block's end ({self.step_times:g})")
        self.feed.extend(K)
        lr = self.lr[t0:t0 + n] if self.lr is not None else \
            np.stack([learning_rates(o.lr, t0 + n, start=t0) for o in self.optimizers], 1)
        with _compile_notice(self.quiet):
            first = self._advance_units(n, lr)
        if timed:
            self._record_times(ends, n)
        if first is None:
            return None
        return first[:, 0] if not self.many else first

    def _advance_units(self, n, lr):
        """Run the feed's next `n` kernel units (fresh batches, or steps under example echoing)."""
        feed, u0 = self.feed, self.n_units
        cum_new = (feed.steps_after(np.arange(u0 + 1, u0 + n + 1)) if self.by_step else
                   np.arange(u0 + 1, u0 + n + 1, dtype=np.int64))
        lo, hi = self.n_log_units, int(cum_new[-1])
        if self.log_at is None:
            at = np.arange(lo + 1, hi + 1, dtype=np.int64)
        else:
            a, b = np.searchsorted(self.log_at, [lo + 1, hi + 1])
            at = self.log_at[a:b]
        L, d = self.W.shape
        log_w = np.empty((len(at), L, d), dtype=self.dtype)
        log_avg, log_end = np.empty((len(at), L, d)), np.empty((len(at), L, d))
        first = np.full((n, L), np.nan) if self.record_first else None
        cum = np.concatenate([[lo], cum_new])  # log-unit counts after units u0 .. u0 + n
        alive = int(np.sum(self.diverged < 0))
        from echosim.training.kernel import call_chunk

        kernel = (_kernel_of(self.method.code, self.loss.code, self.wide, self.method.sub_batches, self.record_first)
                  if alive else None)
        no_first = np.zeros((0, L))
        for s, e, X, Y in feed.pieces(u0, u0 + n) if alive else ():
            rows = self._rows(s, e)
            i, j = np.searchsorted(at, [cum[s - u0] + 1, cum[e - u0] + 1])
            local = at[i:j] - 1 - cum[s - u0]
            flags_before = self.diverged.copy()
            alive = call_chunk(kernel, X, Y, feed.K[s:e], np.ascontiguousarray(lr[s - u0:e - u0]), rows, self.hyper,
                               self.problem.l2, self.state, local, self.by_step,
                               (log_w[i:j], log_avg[i:j], log_end[i:j]),
                               first[s - u0:e - u0] if first is not None else no_first)
            for c in np.flatnonzero((flags_before < 0) & (self.diverged >= 0)):
                self.diverged_unit[c] = s + int(self.diverged[c]) + 1
            if alive == 0:
                break
        self.logged.append((at, log_w, log_avg, log_end))
        self.cum.append(cum_new)
        self.n_units += n
        self.n_log_units = hi
        if first is not None:
            self.first.append(first)
        return first

    def _rows(self, s, e):
        """The sub-batch rows of every step of batches s..e−1 (shape (0, 0) for full batches),
        drawn from each block's generator in order, continuing across calls."""
        if not self.method.sub_batches:
            return np.zeros((0, 0), dtype=np.int64)
        o, K = self.optimizers[0], self.feed.K
        out = []
        for first in range((s // BATCHES_PER_BLOCK) * BATCHES_PER_BLOCK, e, BATCHES_PER_BLOCK):
            block = first // BATCHES_PER_BLOCK
            if self._rows_rng is None or self._rows_rng[0] != block:
                self._rows_rng = (block, block_rng(self.seed, STREAM_OPTIMIZER, block))
            a, b = max(s, first), min(e, first + BATCHES_PER_BLOCK)
            out.append(_draw_rows(self._rows_rng[1], int(K[a:b].sum()), o.sub_batch, self.B, o.replace))
        return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)

    def _record_times(self, ends, n):
        """The block-wise clock: the end time of the last step before each of the block's log points."""
        at = self.logged[-1][0]
        steps = at if self.by_step else self.feed.steps_after(at)
        before = int(self.feed.steps_after(np.array([self.n_units - n]))[0])
        self.times.append(ends[steps - 1 - before] if len(at) else np.zeros(0))
        if ends.size:
            self.step_times = float(ends[-1])

    # ---- results

    @property
    def batches_done(self) -> int:
        """Fresh batches consumed so far."""
        return int(self.feed.batches_after(np.array([self.n_units]))[0])

    @property
    def first_losses(self) -> np.ndarray | None:
        """The first-step loss of every fresh batch so far ((T,) or (T, L)), or None if not recorded."""
        if not self.record_first:
            return None
        out = np.concatenate(self.first) if self.first else np.zeros((0, len(self.optimizers)))
        return out if self.many else out[:, 0]

    def trajectories(self) -> list:
        """One Trajectory per optimizer, of the run so far."""
        with _compile_notice(self.quiet):
            return self._trajectories()

    def trajectory(self) -> Trajectory:
        """The Trajectory of the run so far (one optimizer; `trajectories` for several)."""
        if len(self.optimizers) != 1:
            raise ValueError("trajectory: this run has several optimizers; use trajectories()")
        return self.trajectories()[0]

    def _trajectories(self) -> list:
        at = np.concatenate([b[0] for b in self.logged]) if self.logged else np.zeros(0, dtype=np.int64)
        logs = [np.concatenate([b[k] for b in self.logged]) if self.logged else
                np.zeros((0, *self.W.shape), dtype=self.dtype if k == 1 else np.float64) for k in (1, 2, 3)]
        cum = np.concatenate(self.cum)
        final = self.n_log_units
        if final > 0 and (not len(at) or at[-1] != final):
            # a block-wise run stopped between log points: its current state is the last point
            # (a column that diverged before it ends earlier anyway)
            at = np.append(at, final)
            state = (self.W, self.avg_sum / self.counters[0], self.end_sum / self.counters[1])
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
        if not self.timed_blocks:
            return None
        recorded = np.concatenate(self.times) if self.times else np.zeros(0)
        if len(recorded) < len(at):  # the current state appended as the last point
            recorded = np.append(recorded, self.step_times)
        return np.concatenate([[0.0], recorded])

    def _finish(self, i, logs, cum, log_w, log_avg, log_end, times, first) -> Trajectory:
        """Excess risks at the log points, steps, times and status: the Trajectory of column i."""
        problem, optimizer, feed, by_step = self.problem, self.optimizers[i], self.feed, self.by_step
        diverged_unit = self.diverged_unit[i]
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
    return {k: v for k, v in vars(optimizer).items() if k != "lr"}


class _BatchFeed:
    """Batch echoing: the kernel's unit is a fresh batch, used for K_t steps; K_t arrive block by block.

    Data are drawn in windows of `chunk_batches` fresh batches aligned to multiples of
    that size (the last one cut at the horizon T, where known), so a run advanced at
    once draws exactly the windows it always drew, and one advanced in small blocks
    draws each window once.
    """

    def __init__(self, problem, B, seed, dtype, T):
        self.problem, self.B, self.seed, self.dtype, self.T = problem, B, seed, dtype, T
        self.chunk = chunk_batches(B, problem.n_features, dtype.itemsize)
        self.K = np.zeros(0, dtype=np.int64)
        self._cum_steps = np.zeros(1, dtype=np.int64)
        self._window = None

    @property
    def n_batches(self) -> int:
        return len(self.K)

    def extend(self, K):
        self.K = np.concatenate([self.K, K])
        self._cum_steps = np.concatenate([self._cum_steps, self._cum_steps[-1] + np.cumsum(K)])

    def pieces(self, u0, u1):
        """(start, stop, X, Y) covering batches u0..u1−1, each within one drawn window."""
        s = u0
        while s < u1:
            lo = s // self.chunk * self.chunk
            hi = lo + self.chunk if self.T is None else min(lo + self.chunk, self.T)
            if self._window is None or self._window[0] != lo:
                X, Y = self.problem.batches(self.seed, lo, hi, self.B, self.dtype)
                self._window = (lo, X, Y)
            e = min(u1, hi)
            _, X, Y = self._window
            yield s, e, X[s - lo:e - lo], Y[s - lo:e - lo]
            s = e

    def batches_after(self, units):
        return units

    def steps_after(self, units):
        return self._cum_steps[units]


class _ExampleFeed:
    """Example echoing: the kernel's unit is one step, on the examples the schedule gives it.

    Example i of fresh batch t has id t·B + i; a step's batch is gathered from the
    fresh batches its examples come from. With one step per unit, ``avg`` and
    ``end_avg`` coincide. The learning rate of a step is that of its newest batch.
    """

    def __init__(self, problem, schedule, B, seed, dtype):
        if schedule.batch_size != B:
            raise ValueError(f"batch_size={B} does not match the example-echoing schedule's "
                             f"batch_size={schedule.batch_size}")
        self.problem, self.B, self.seed, self.dtype = problem, B, seed, dtype
        self.examples = np.asarray(schedule.step_examples, dtype=np.int64)
        self.step_batch = np.asarray(schedule.step_batch, dtype=np.int64)
        self.K = np.ones(len(self.step_batch), dtype=np.int64)
        self.chunk = chunk_batches(B, problem.n_features, dtype.itemsize)

    def unit_lr(self, lr):
        return lr[self.step_batch]

    def pieces(self, u0, u1):
        for start in range(u0, u1, self.chunk):
            stop = min(u1, start + self.chunk)
            ids = self.examples[start:stop]
            batch, row = np.divmod(ids, self.B)
            first = batch.min() // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK
            X, Y = self.problem.batches(self.seed, first, int(batch.max()) + 1, self.B, self.dtype)
            yield start, stop, np.ascontiguousarray(X[batch - first, row]), np.ascontiguousarray(Y[batch - first, row])

    def batches_after(self, units):
        return np.where(units > 0, self.step_batch[np.maximum(units - 1, 0)] + 1, 0)

    def steps_after(self, units):
        return units


# --------------------------------------------------------------------------- the public faces


def start(problem: Problem, optimizer: Optimizer, *, batch_size: int, seed: int = 0, n_batches: int | None = None,
          dtype="float64", log="all", log_unit: str = "batch", w0=None, first_loss: bool = False,
          quiet: bool = False) -> Run:
    """A run of `optimizer` on `problem` to advance block by block: ``r = start(...)``,
    ``r.advance(K_t)`` as many times as needed, ``r.trajectory()``.

    `n_batches` is the horizon T where known (needed for log="auto" or a count, and for
    one learning rate per batch; without it a callable lr is asked block by block). The
    other arguments are `run`'s; `first_loss` records the first-step loss of every fresh
    batch (`advance` returns the block's, `Run.first_losses` all of them).
    """
    return Run(problem, [optimizer] if isinstance(optimizer, Optimizer) else [optimizer], many=False,
               batch_size=batch_size, seed=seed, n_batches=n_batches, dtype=dtype, log=log, log_unit=log_unit, w0=w0,
               first_loss=first_loss, quiet=quiet)


def start_many(problem: Problem, optimizers, *, batch_size: int, seed: int = 0, n_batches: int | None = None,
               dtype="float64", log="all", log_unit: str = "batch", w0=None, first_loss: bool = False,
               quiet: bool = False) -> Run:
    """`start` for several learning rates at once (see `run_many`); `Run.trajectories` at the end."""
    return Run(problem, list(optimizers), many=True, batch_size=batch_size, seed=seed, n_batches=n_batches,
               dtype=dtype, log=log, log_unit=log_unit, w0=w0, first_loss=first_loss, quiet=quiet)


def _whole(problem, optimizers, many, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0, first_loss,
           quiet) -> Run:
    """A Run over the whole schedule of `echo`, advanced at once."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be an echosim Problem, got {type(problem).__name__}")
    schedule = _as_schedule(echo, n_batches)
    state = Run(problem, optimizers, many=many, batch_size=batch_size, seed=seed, n_batches=None, dtype=dtype,
                log=log, log_unit=log_unit, w0=w0, first_loss=first_loss, quiet=quiet, schedule=schedule)
    K = schedule.steps_per_batch
    if state.method.one_step and K.max() > 1:
        raise ValueError(f"{type(state.optimizers[0]).__name__} takes one step per batch; got echo with K_t up to "
                         f"{K.max()}")
    feed = state.feed
    if isinstance(feed, _BatchFeed):
        feed.extend(K)
        n = len(K)
    else:
        n = len(feed.K)
    lr = state.lr if isinstance(feed, _BatchFeed) else feed.unit_lr(state.lr)
    with _compile_notice(quiet):
        state._advance_units(n, lr)
    return state


def run(problem: Problem, optimizer: Optimizer, *, batch_size: int, echo=1, n_batches: int | None = None,
        seed: int = 0, dtype="float64", log="auto", log_unit: str = "batch", w0=None, first_loss: bool = False,
        quiet: bool = False) -> Trajectory:
    """Run `optimizer` on `problem` for T fresh batches of size B with K_t steps each.

    Parameters
    ----------
    problem : Problem
        LeastSquares, Logistic or Dataset.
    optimizer : Optimizer
        A spec of `echosim.training.methods`, of any method of its table `METHODS`
        (MinibatchSGD, EchoedGD, EchoedSGD, EchoedNesterov, EchoedProx, ...).
    batch_size : int
        B, examples per fresh batch.
    echo : Schedule, Pipeline, int, or array of int
        The pipeline schedule that says how many steps use each fresh batch (and,
        when simulated, the wall-clock time of every step); K or K_t per batch as a
        shorthand for `echosim.pipeline.echo_schedule(echo, n_batches)`. A Pipeline
        is simulated for `n_batches` with the seed `seed` (its streams are spawned
        apart from the data's): ``simulate(echo, n_batches, seed)``, or under policy
        "auto", whose caps depend on the losses, together with the run
        (`echosim.training.coupled.run_coupled`; the trajectory's ``info`` then holds
        the caps' summary under ``auto.*`` keys).
    n_batches : int, optional
        T; optional when echo is an array or a Schedule.
    seed : int
        The data seed: fresh batch t is a pure function of (seed, t, B).
    dtype : {"float64", "float32"}
        Precision of the data and the iterate.
    log : "auto", "all", int or array of int
        Where to log, in units of `log_unit`: every ⌈n/2000⌉ units ("auto", the rule
        sweeps use), every unit, a number of log-spaced points, or the counts
        themselves; the last unit is always logged.
    log_unit : {"batch", "step"}
        Log after fresh batches (log points count batches) or after optimizer
        steps (log points count steps), so time to a target can be resolved
        within a batch. Under example echoing every step is its own unit.
    w0 : array, optional
        The starting point (default 0).
    first_loss : bool
        Record, per fresh batch, the minibatch loss at the iterate before the first
        step on it (``Trajectory.first_loss``); off by default, and free when off.
    quiet : bool
        Do not say on stderr that the kernels are compiling (also $ECHOSIM_QUIET=1);
        nothing is said when they load from Numba's cache.

    Returns
    -------
    Trajectory
        Excess risk of the last, averaged and batch-end-averaged iterates at the
        logged points, with step counts, simulated time and status.

    Divergence
    ----------
    The same rule for every problem: the run has status "diverged" at the first
    logged point where the last iterate's excess risk F(w) − F* exceeds
    ``DIVERGENCE_FACTOR`` (100) times the initial risk F(w₀), or where any of the
    three risks is not finite, or as soon as the iterate itself overflows (checked
    after every fresh batch). The trajectory stops at the last point before it and
    ``diverged_at`` gives the fresh batch of that point. F(w₀) > 0 for every loss
    here, so the rule is scale-free; a converging run never comes near it (its risk
    stays within a few times F(w₀)), while a least-squares run above the stability
    limit grows geometrically and a logistic one linearly, both far past it.
    """
    if not isinstance(optimizer, Optimizer):
        raise ValueError(f"optimizer must be an echosim optimizer spec, got {type(optimizer).__name__}")
    if isinstance(echo, Pipeline):
        if n_batches is None:
            raise ValueError("n_batches: required when echo is a Pipeline (the fresh batches to simulate)")
        if POLICIES[echo.policy].coupled:
            c = run_coupled(problem, optimizer, echo, batch_size=batch_size, n_batches=n_batches, seed=seed,
                            pipeline_seed=seed, dtype=dtype, log=log, log_unit=log_unit, w0=w0, quiet=quiet)
            traj = c.trajectory
            traj.info.update({f"auto.{k}": v for k, v in c.summary().items()})
            return traj if first_loss else dataclasses.replace(traj, first_loss=None)
        echo = simulate(echo, n_batches, seed, batch_size=batch_size if POLICIES[echo.policy].shuffles_examples else None)
    state = _whole(problem, [optimizer], False, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0,
                   first_loss, quiet)
    return state.trajectory()


def run_coupled(problem: Problem, optimizer: Optimizer, pipeline: Pipeline, *, batch_size: int, n_batches: int,
                seed: int = 0, pipeline_seed=0, dtype="float64", log="auto", log_unit: str = "batch", w0=None,
                quiet: bool = False):
    """Run `optimizer` on `problem` behind `pipeline` under policy "auto" for T = `n_batches`:
    the pipeline's event loop and the optimizer advanced together, a block of the
    controller at a time, since the caps depend on the losses (`echosim.training.coupled`).

    `seed` is the data seed, `pipeline_seed` the simulation's (as in `simulate`); the
    other arguments are `run`'s. Returns a `echosim.training.coupled.Coupled`: the
    trajectory (``time`` the simulated wall-clock, ``first_loss`` the losses the
    controller acted on), the schedule, the cap of every fresh batch, the decisions.
    The same seeds give bitwise the same result: the schedule is
    ``simulate(pipeline, T, pipeline_seed, caps=<the caps>)`` and the trajectory
    ``run(..., echo=<that schedule>, first_loss=True)``.
    """
    if not isinstance(optimizer, Optimizer):
        raise ValueError(f"optimizer must be an echosim optimizer spec, got {type(optimizer).__name__}")
    if not isinstance(pipeline, Pipeline):
        raise ValueError(f"pipeline must be an echosim Pipeline, got {type(pipeline).__name__}")
    if n_batches is None:
        raise ValueError("n_batches: required (the fresh batches to simulate)")
    state = start(problem, optimizer, batch_size=batch_size, seed=seed, n_batches=n_batches, dtype=dtype, log=log,
                  log_unit=log_unit, w0=w0, first_loss=True, quiet=quiet)
    return coupled.drive(state, pipeline, pipeline_seed)


def run_many(problem: Problem, optimizers, *, batch_size: int, echo=1, n_batches: int | None = None,
             seed: int = 0, dtype="float64", log="auto", log_unit: str = "batch", w0=None, first_loss: bool = False,
             quiet: bool = False) -> list:
    """`run` for several learning rates at once: one Trajectory per optimizer, in order.

    The optimizers must be one method with the same hyper-parameters but the
    learning rate η. They see the same fresh batches (and sub-batch rows), so one
    kernel advances all L iterates on each batch while it is in cache: for margin
    losses in the wide layout (`echosim.training.kernel`), matrix-matrix shaped. Each
    Trajectory equals that of ``run(problem, optimizer, ...)`` up to rounding (rtol
    1e-12 in the tests): sums over features and rows go in another order. A column's
    arithmetic does not depend on the other columns, so each Trajectory is bitwise the
    same whatever learning rates share the call (a group of one included): sweeps run
    every spec through here, so results never depend on how runs were grouped. The
    softmax loss takes the rows layout, each iterate bitwise its own `run`.
    """
    optimizers = list(optimizers)
    if isinstance(echo, Pipeline):
        raise ValueError("echo: run_many takes a Schedule (simulate the pipeline once for every learning rate); "
                         "under policy 'auto' each learning rate has its own schedule: use run() per rate")
    state = _whole(problem, optimizers, True, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0,
                   first_loss, quiet)
    return state.trajectories()


# --------------------------------------------------------------------------- compiling ahead


def kernel_cached(key: str) -> bool:
    """Whether Numba's on-disk cache holds code of kernel `key` (`kernel_key`; "draws": the
    synthetic problems' batch draws) compiled from the current source. A guess, used only
    to skip work and to say when compiling starts: it reads Numba's private cache index
    (whose keys hash the kernel's specialisation), and any surprise counts as not cached."""
    try:
        if key == "draws":
            from echosim.training.sampling import draw_block as kernel
        else:
            _check_key(key)
            kernel = _kernel(key)
        cache = kernel._cache
        _, magic, hashes = cache._index_key(None, kernel.targetctx.codegen())
        return any(k[1] == magic and k[2] == hashes for k in cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - another Numba version: count it as not cached
        return False


def compile_kernels(dtypes=("float64",), *, kernels=("draws",)) -> None:
    """Compile (or load from Numba's cache) the kernels named in `kernels` for `dtypes`.

    kernels: "draws" (the synthetic problems' batch draws) and kernel names of
    `kernel_key` (e.g. "echoed_gd:logistic:wide"). Call it once in a parent process
    before starting workers, so that forked workers inherit the compiled code instead
    of compiling it again each. The kernels are called on tiny arrays of the types
    `Run` passes (a test holds that a real run adds no signature), so each compiles
    alone: two processes can compile two at once.
    """
    for key in kernels:
        if key != "draws":
            _check_key(key)
    from echosim.training.kernel import warm_up

    for dtype in map(np.dtype, dtypes):
        for key in kernels:
            if key == "draws":
                from echosim.training.problems import LeastSquares

                LeastSquares(dim=1).batches(0, 0, 1, 1, dtype)
                continue
            warm_up(_kernel(key), get_method(key.split(":")[0]), dtype, key.endswith(":first_loss"))


def _check_key(key):
    parts = key.split(":") if isinstance(key, str) else ()
    if len(parts) not in (3, 4) or parts[2] not in ("rows", "wide") or parts[3:] not in ([], ["first_loss"]):
        raise ValueError(f"kernels must be 'draws' or names such as 'echoed_gd:logistic:wide', got {key!r}")
    get_method(parts[0])
    get_loss(parts[1])
