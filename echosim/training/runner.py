"""One driver for runs of one optimizer or of L learning rates at once, advanced whole
(`run`, `run_many`) or block by block (`start`, `start_many`, then `Run.advance`), and
for runs of one fresh-batch stream side by side, each window drawn once (`run_shared`).

The step counts K_t come from `echo`: an int (every batch), an array (one per batch),
or a pipeline `Schedule`, which also gives the simulated wall-clock time of every
step; a block-wise run takes the K_t of each block as it goes (and, optionally, the
end time of each step). Batches are generated in chunks and fed to the Numba kernel
(`echosim.training.kernel`, specialised to the run's method, loss and layout), whose
state carries over from chunk to chunk and from block to block, so memory stays
bounded for long runs and a run advanced in blocks is bitwise the run advanced at once.

This module is the public face; the parts live apart: the run's state and the driver
that advances it (`echosim.training.driver`), the batch feeds
(`echosim.training.feeds`), the kernels' names, compiling and its notice
(`echosim.training.compiling`), the result (`echosim.training.trajectory`).
"""

from __future__ import annotations

import dataclasses

from echosim.pipeline.model import POLICIES, Pipeline
from echosim.pipeline.schedule import Schedule, echo_schedule, simulate
from echosim.training import coupled, feeds
from echosim.training.compiling import QUIET_ENV, compile_kernels, compile_notice, kernel_cached, kernel_key, \
    kernel_named
from echosim.training.driver import Run, RunState
from echosim.training.feeds import BatchFeed, sub_batch_rows
from echosim.training.methods import Optimizer
from echosim.training.problems import Problem
from echosim.training.trajectory import AUTO_LOG_MAX, DIVERGENCE_FACTOR, Trajectory, log_points

__all__ = [
    "AUTO_LOG_MAX",
    "CHUNK_BYTES",
    "DIVERGENCE_FACTOR",
    "QUIET_ENV",
    "Run",
    "RunState",
    "Trajectory",
    "chunk_batches",
    "compile_kernels",
    "kernel_cached",
    "kernel_key",
    "log_points",
    "run",
    "run_coupled",
    "run_many",
    "run_shared",
    "start",
    "start_many",
]

CHUNK_BYTES = 1 << 20
"""Target size of the batch data generated at once (at least one block): small enough that
the kernel reads the batches from cache right after they are drawn."""

# names the tests and older callers reach here
_kernel = kernel_named
_compile_notice = compile_notice
_sub_batch_rows = sub_batch_rows


def chunk_batches(batch_size: int, dim: int, itemsize: int) -> int:
    """Fresh batches per kernel call: about CHUNK_BYTES of data, a multiple of the block size."""
    return feeds.chunk_batches(batch_size, dim, itemsize, CHUNK_BYTES)


def _as_schedule(echo, n_batches) -> Schedule:
    """The run's Schedule: `echo` itself, or one built by the pipeline layer from K or K_t."""
    if isinstance(echo, Schedule):
        if n_batches is not None and n_batches != echo.n_batches:
            raise ValueError(f"n_batches={n_batches} does not match the schedule's {echo.n_batches} batches")
        return echo
    return echo_schedule(echo, n_batches)


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
               first_loss=first_loss, quiet=quiet, chunk_bytes=CHUNK_BYTES)


def start_many(problem: Problem, optimizers, *, batch_size: int, seed: int = 0, n_batches: int | None = None,
               dtype="float64", log="all", log_unit: str = "batch", w0=None, first_loss: bool = False,
               quiet: bool = False) -> Run:
    """`start` for several learning rates at once (see `run_many`); `Run.trajectories` at the end."""
    return Run(problem, list(optimizers), many=True, batch_size=batch_size, seed=seed, n_batches=n_batches,
               dtype=dtype, log=log, log_unit=log_unit, w0=w0, first_loss=first_loss, quiet=quiet,
               chunk_bytes=CHUNK_BYTES)


def _whole(problem, optimizers, many, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0, first_loss,
           quiet, windows=None) -> tuple:
    """A Run over the whole schedule of `echo`, ready to advance: (run, kernel units, their lrs)."""
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be an echosim Problem, got {type(problem).__name__}")
    schedule = _as_schedule(echo, n_batches)
    state = Run(problem, optimizers, many=many, batch_size=batch_size, seed=seed, n_batches=None, dtype=dtype,
                log=log, log_unit=log_unit, w0=w0, first_loss=first_loss, quiet=quiet, chunk_bytes=CHUNK_BYTES,
                schedule=schedule, windows=windows)
    K = schedule.steps_per_batch
    if state.method.one_step and K.max() > 1:
        raise ValueError(f"{type(state.optimizers[0]).__name__} takes one step per batch; got echo with K_t up to "
                         f"{K.max()}")
    feed = state.feed
    if isinstance(feed, BatchFeed):
        feed.extend(K)
        return state, len(K), state.lr
    return state, len(feed.K), feed.unit_lr(state.lr)


def _advanced(problem, optimizers, many, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0, first_loss,
              quiet) -> Run:
    """A Run over the whole schedule of `echo`, advanced at once."""
    state, n, lr = _whole(problem, optimizers, many, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0,
                          first_loss, quiet)
    with compile_notice(quiet, state.kernel_name):
        state.advance_units(n, lr)
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
    state = _advanced(problem, [optimizer], False, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0,
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
    state = _advanced(problem, optimizers, True, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0,
                   first_loss, quiet)
    return state.trajectories()


def run_shared(problem: Problem, members, *, batch_size: int, n_batches: int | None = None, seed: int = 0,
               dtype="float64", log="auto", log_unit: str = "batch", w0=None, first_loss: bool = False,
               quiet: bool = False) -> list:
    """Several runs of one fresh-batch stream (`problem`, B, `seed`, `dtype`) advanced side
    by side, window by window, so that each window of fresh batches is drawn once.

    `members` are ``(optimizer, echo)`` or ``(optimizer, echo, log)`` tuples: `optimizer`
    one spec (a `run`) or a list of specs of one method that differ only in lr (a
    `run_many`); `echo` its K, K_t or Schedule (a Pipeline is simulated first: its
    schedule depends on the pipeline's seed, not the data's); `log` its own log points
    (default `log`). Members may differ in method, K, K_t and lr: they read the same
    fresh batches (common random numbers), and each member's kernel consumes a window
    while it is in cache. Returns, per member, what `run` (a Trajectory) or `run_many`
    (a list) gives for it alone, bitwise: every kernel call sees the same arrays and
    state as alone. A member that diverges stops drawing; members under example
    echoing gather their own batches. The other arguments are `run`'s.
    """
    members = list(members)
    if not members:
        raise ValueError("members: give at least one (optimizer, echo) pair")
    windows, runs = None, []
    for i, member in enumerate(members):
        if not isinstance(member, tuple) or len(member) not in (2, 3):
            raise ValueError(f"members[{i}]: an (optimizer, echo) or (optimizer, echo, log) tuple, got {member!r}")
        opts, echo, *own_log = member
        if isinstance(echo, Pipeline):
            raise ValueError(f"members[{i}]: echo is a Pipeline; give its Schedule (simulate(pipeline, ...))")
        many = not isinstance(opts, Optimizer)
        state, n, lr = _whole(problem, list(opts) if many else [opts], many, batch_size, echo, n_batches, seed,
                              dtype, own_log[0] if own_log else log, log_unit, w0, first_loss, quiet, windows)
        if windows is None and isinstance(state.feed, BatchFeed):
            windows = state.feed.windows
        runs.append((state, state.units(n, lr)))
    done, out = object(), [None] * len(runs)
    with compile_notice(quiet, ", ".join(dict.fromkeys(state.kernel_name for state, _ in runs))):
        going = list(range(len(runs)))
        while going:  # one window each, in turn: the first to reach a window draws it
            still = []
            for i in going:
                state, units = runs[i]
                if next(units, done) is not done:
                    still.append(i)
                    continue
                # finished: its results now, while its logs are in cache, and its state let go
                out[i] = state.trajectories() if state.many else state.trajectory()
                runs[i] = None
            going = still
    return out
