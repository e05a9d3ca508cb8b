"""run(problem, optimizer, ...) → Trajectory: one optimizer on one stream of fresh batches.

The step counts K_t come from `echo`: an int (every batch), an array (one per
batch), or a pipeline `Schedule`, which also gives the simulated wall-clock time
of every step. Batches are generated in chunks and fed to the Numba kernel, whose
state carries over from chunk to chunk, so memory stays bounded for long runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from echosim.pipeline.schedule import Schedule, echo_schedule
from echosim.pipeline.sizes import check_fits
from echosim.training.codes import LOSS_CODES
from echosim.training.optimizers import EchoedNesterov, EchoedSGD, Optimizer, learning_rates
from echosim.training.problems import BATCHES_PER_BLOCK, STREAM_OPTIMIZER, Problem, block_rng

CHUNK_BYTES = 1 << 20
"""Target size of the batch data generated at once (at least one block): small enough that
the kernel reads the batches from cache right after they are drawn."""

AUTO_LOG_ALL = 1000
"""With log="auto", runs up to this many batches log every batch; longer ones log-spaced."""

AUTO_LOG_POINTS = 400

DIVERGENCE_FACTOR = 100.0
"""A run diverges where the last iterate's excess risk exceeds this multiple of F(w₀)."""


@dataclass(frozen=True)
class Trajectory:
    """Excess risk F(w) − F* at logged fresh-batch boundaries.

    ``batches[i]`` fresh batches had been consumed at log point i (point 0 is w₀),
    ``steps[i]`` optimizer steps taken, ``time[i]`` the simulated wall-clock time
    (None without a pipeline schedule). ``risk`` is the last iterate's excess risk,
    ``risk_avg`` the uniform average of every step's iterate, ``risk_end_avg`` the
    average of batch-end iterates. A run that diverged (see `run`) has status
    "diverged" and stops at its last logged point before the divergence.
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

    def __len__(self):
        return len(self.batches)

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


def _int_arg(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _as_schedule(echo, n_batches) -> Schedule:
    """The run's Schedule: `echo` itself, or one built by the pipeline layer from K or K_t."""
    if isinstance(echo, Schedule):
        if n_batches is not None and n_batches != echo.n_batches:
            raise ValueError(f"n_batches={n_batches} does not match the schedule's {echo.n_batches} batches")
        return echo
    return echo_schedule(echo, n_batches)


def log_points(log, n_batches: int) -> np.ndarray:
    """Batch counts 1..T after which to log: "auto", "all", a count (log-spaced) or an array."""
    if isinstance(log, str):
        if log == "all" or (log == "auto" and n_batches <= AUTO_LOG_ALL):
            return np.arange(1, n_batches + 1, dtype=np.int64)
        if log != "auto":
            raise ValueError(f"log must be 'auto', 'all', a count or an array of batch counts, got {log!r}")
        log = AUTO_LOG_POINTS
    if np.ndim(log) == 0:
        n = _int_arg("log", log, 1)
        pts = np.unique(np.round(np.geomspace(1, n_batches, num=min(n, n_batches))).astype(np.int64))
    else:
        pts = np.unique(np.asarray(log, dtype=np.int64))
        if pts.size and (pts[0] < 1 or pts[-1] > n_batches):
            raise ValueError(f"log: batch counts must lie in [1, {n_batches}]")
    return np.union1d(pts, [n_batches]).astype(np.int64)


def _sub_batch_rows(optimizer, seed, K, start, stop, B):
    """Sub-batch rows for every step of batches start..stop−1 (block-keyed, so reproducible)."""
    b = optimizer.sub_batch
    out = []
    for first in range(start, stop, BATCHES_PER_BLOCK):
        rng = block_rng(seed, STREAM_OPTIMIZER, first // BATCHES_PER_BLOCK)
        n = int(K[first : min(first + BATCHES_PER_BLOCK, stop)].sum())
        if optimizer.replace:
            out.append(rng.integers(0, B, size=(n, b)))
        else:
            out.append(np.argsort(rng.random((n, B)), axis=1)[:, :b])
    return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)


def chunk_batches(batch_size: int, dim: int, itemsize: int) -> int:
    """Fresh batches per kernel call: about CHUNK_BYTES of data, a multiple of the block size."""
    n = CHUNK_BYTES // max(1, batch_size * dim * itemsize)
    return max(BATCHES_PER_BLOCK, n // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK)


def run(problem: Problem, optimizer: Optimizer, *, batch_size: int, echo=1, n_batches: int | None = None,
        seed: int = 0, dtype="float64", log="auto", log_unit: str = "batch", w0=None) -> Trajectory:
    """Run `optimizer` on `problem` for T fresh batches of size B with K_t steps each.

    Parameters
    ----------
    problem : Problem
        LeastSquares, Logistic or Dataset.
    optimizer : Optimizer
        MinibatchSGD, EchoedGD, EchoedSGD, EchoedNesterov or EchoedProx.
    batch_size : int
        B, examples per fresh batch.
    echo : Schedule, int, or array of int
        The pipeline schedule that says how many steps use each fresh batch (and,
        when simulated, the wall-clock time of every step); K or K_t per batch as a
        shorthand for `echosim.pipeline.echo_schedule(echo, n_batches)`.
    n_batches : int, optional
        T; optional when echo is an array or a Schedule.
    seed : int
        The data seed: fresh batch t is a pure function of (seed, t, B).
    dtype : {"float64", "float32"}
        Precision of the data and the iterate.
    log : "auto", "all", int or array of int
        Where to log: every batch up to 1000 batches then 400 log-spaced points
        ("auto"), every batch, a number of log-spaced points, or the batch counts
        themselves, in units of `log_unit`.
    log_unit : {"batch", "step"}
        Log after fresh batches (log points count batches) or after optimizer
        steps (log points count steps), so time to a target can be resolved
        within a batch. Under example echoing every step is its own unit.
    w0 : array, optional
        The starting point (default 0).

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
    S = _prepare(problem, optimizer, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0)
    from echosim.training.kernel import echo_chunk  # compiles on first use, not at import

    d, dtype, logs, feed = problem.dim, S.dtype, S.logs, S.feed
    w = S.w_start.astype(dtype)
    w_prev = w.copy()
    avg_sum, end_sum = np.zeros(d), np.zeros(d)
    counters = np.zeros(2, dtype=np.int64)
    log_w = np.empty((len(logs), d), dtype=dtype)
    log_avg, log_end = np.empty((len(logs), d)), np.empty((len(logs), d))
    lr = feed.unit_lr(S.lr)
    diverged_unit = None
    for start, stop, X, Y, rows, first_log, last_log, local in _chunks(problem, optimizer, S):
        status = echo_chunk(
            X, Y, feed.K[start:stop], lr[start:stop], rows, optimizer.method, S.loss, float(problem.l2),
            S.momentum, float(optimizer.lam), w, w_prev, avg_sum, end_sum, counters,
            local, S.by_step, log_w[first_log:last_log], log_avg[first_log:last_log], log_end[first_log:last_log])
        if status >= 0:
            diverged_unit = start + int(status) + 1
            break
    return _finish(problem, optimizer, S, log_w, log_avg, log_end, diverged_unit, _log_times(S))


def run_many(problem: Problem, optimizers, *, batch_size: int, echo=1, n_batches: int | None = None,
             seed: int = 0, dtype="float64", log="auto", log_unit: str = "batch", w0=None) -> list:
    """`run` for several learning rates at once: one Trajectory per optimizer, in order.

    The optimizers must be one method with the same hyper-parameters but the
    learning rate η. They see the same fresh batches (and sub-batch rows), so one
    kernel (`echosim.training.kernel.echo_chunk_many`) advances all L iterates on
    each batch while it is in cache, in a matrix-matrix shape. Each Trajectory
    equals that of ``run(problem, optimizer, ...)`` up to rounding (rtol 1e-12 in
    the tests): sums over features and rows go in another order. A column's arithmetic does
    not depend on the other columns, so each Trajectory is bitwise the same whatever
    learning rates share the call (a group of one included): sweeps run every spec
    through here, so results never depend on how runs were grouped. The softmax loss
    runs one optimizer at a time.
    """
    optimizers = list(optimizers)
    if not optimizers or not all(isinstance(o, Optimizer) for o in optimizers):
        raise ValueError("optimizers must be a non-empty list of echosim optimizer specs")
    first = optimizers[0]
    for o in optimizers[1:]:
        if type(o) is not type(first) or _without_lr(o) != _without_lr(first):
            raise ValueError(f"run_many needs one method differing only in lr; got {first!r} and {o!r}")
    kwargs = dict(batch_size=batch_size, echo=echo, n_batches=n_batches, seed=seed, dtype=dtype, log=log,
                  log_unit=log_unit, w0=w0)
    if not isinstance(problem, Problem) or problem.loss == "softmax":
        return [run(problem, o, **kwargs) for o in optimizers]
    setups = [_prepare(problem, o, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0) for o in optimizers]
    from echosim.training.kernel import echo_chunk_many  # compiles on first use, not at import

    S = setups[0]
    L, d, dtype, logs, feed = len(optimizers), problem.dim, S.dtype, S.logs, S.feed
    W = np.repeat(S.w_start.astype(dtype)[:, None], L, axis=1)
    W_prev = W.copy()
    avg_sum, end_sum = np.zeros((d, L)), np.zeros((d, L))
    counters = np.zeros(2, dtype=np.int64)
    log_w = np.empty((len(logs), d, L), dtype=dtype)
    log_avg, log_end = np.empty((len(logs), d, L)), np.empty((len(logs), d, L))
    lr = np.ascontiguousarray(np.stack([feed.unit_lr(s.lr) for s in setups], axis=1))
    diverged_unit = [None] * L
    for start, stop, X, Y, rows, first_log, last_log, local in _chunks(problem, first, S):
        flags = np.array([-1 if u is None else 0 for u in diverged_unit], dtype=np.int64)
        alive = echo_chunk_many(
            X, Y, feed.K[start:stop], lr[start:stop], rows, first.method, S.loss, float(problem.l2),
            S.momentum, float(first.lam), W, W_prev, avg_sum, end_sum, counters, flags,
            local, S.by_step, log_w[first_log:last_log], log_avg[first_log:last_log], log_end[first_log:last_log])
        for i in range(L):
            if diverged_unit[i] is None and flags[i] >= 0:
                diverged_unit[i] = start + int(flags[i]) + 1
        if alive == 0:
            break
    times = _log_times(S)  # the same for every learning rate
    return [_finish(problem, o, s, log_w[:, :, i], log_avg[:, :, i], log_end[:, :, i], diverged_unit[i], times)
            for i, (o, s) in enumerate(zip(optimizers, setups))]


def _without_lr(optimizer) -> dict:
    return {k: v for k, v in vars(optimizer).items() if k != "lr"}


@dataclass
class _Setup:
    """What `run` and `run_many` share once the arguments are checked."""

    schedule: Schedule
    K: np.ndarray
    T: int
    B: int
    seed: int
    dtype: np.dtype
    lr: np.ndarray
    w_start: np.ndarray
    feed: object
    by_step: bool
    cum: np.ndarray
    logs: np.ndarray
    loss: int
    momentum: float
    log_unit: str


def _prepare(problem, optimizer, batch_size, echo, n_batches, seed, dtype, log, log_unit, w0) -> _Setup:
    if not isinstance(problem, Problem):
        raise ValueError(f"problem must be an echosim Problem, got {type(problem).__name__}")
    if not isinstance(optimizer, Optimizer):
        raise ValueError(f"optimizer must be an echosim optimizer spec, got {type(optimizer).__name__}")
    B = _int_arg("batch_size", batch_size, 1)
    seed = _int_arg("seed", seed, 0)
    if dtype not in ("float64", "float32", np.float64, np.float32):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    dtype = np.dtype(dtype)
    if log_unit not in ("batch", "step"):
        raise ValueError(f"log_unit must be 'batch' or 'step', got {log_unit!r}")
    schedule = _as_schedule(echo, n_batches)
    K = schedule.steps_per_batch
    T = len(K)
    if optimizer.max_echo_one and K.max() > 1:
        raise ValueError(f"{type(optimizer).__name__} takes one step per batch; got echo with K_t up to {K.max()}")
    if isinstance(optimizer, EchoedSGD) and not optimizer.replace and optimizer.sub_batch > B:
        raise ValueError(f"sub_batch={optimizer.sub_batch} exceeds batch_size={B} (sampling without replacement)")
    check_fits("n_batches", T, 40, what="learning rates and step counts per fresh batch")
    check_fits("batch_size", B, 2 * BATCHES_PER_BLOCK * (problem.n_features + 1) * dtype.itemsize,
               what=f"at least {BATCHES_PER_BLOCK} fresh batches of data at a time")
    lr = learning_rates(optimizer.lr, T)
    d = problem.dim
    w = np.zeros(d) if w0 is None else np.array(w0, dtype=np.float64)
    if w.shape != (d,) or not np.all(np.isfinite(w)):
        raise ValueError(f"w0 must be a finite array of shape ({d},)")
    if schedule.step_examples is not None:
        feed = _ExampleFeed(problem, schedule, B, seed, dtype)
    else:
        feed = _BatchFeed(problem, K, B, seed, dtype)
    by_step = log_unit == "step" and schedule.step_examples is None
    # log positions: cumulative kernel work (steps when logging steps) at unit ends
    cum = feed.steps_after(np.arange(feed.n_units + 1)) if by_step else np.arange(feed.n_units + 1)
    logs = log_points(log, int(cum[-1]))
    check_fits("log", len(logs), 8 + problem.dim * (16 + dtype.itemsize), what="the iterates at every log point")
    momentum = optimizer.kernel_momentum if isinstance(optimizer, EchoedNesterov) else -1.0
    return _Setup(schedule=schedule, K=K, T=T, B=B, seed=seed, dtype=dtype, lr=lr,
                  w_start=w.astype(dtype).astype(np.float64), feed=feed, by_step=by_step, cum=cum, logs=logs,
                  loss=LOSS_CODES[problem.loss], momentum=float(momentum), log_unit=log_unit)


def _chunks(problem, optimizer, S):
    """The kernel calls' inputs: (start, stop, X, Y, sub-batch rows, log slice, local log positions)."""
    no_rows = np.zeros((0, 0), dtype=np.int64)
    chunk = chunk_batches(S.B, problem.n_features, S.dtype.itemsize)
    feed, logs, cum = S.feed, S.logs, S.cum
    for start in range(0, feed.n_units, chunk):
        stop = min(feed.n_units, start + chunk)
        X, Y = feed.data(start, stop)
        rows = (_sub_batch_rows(optimizer, S.seed, feed.K, start, stop, S.B)
                if isinstance(optimizer, EchoedSGD) else no_rows)
        first_log, last_log = np.searchsorted(logs, [cum[start] + 1, cum[stop] + 1])
        local = logs[first_log:last_log] - 1 - cum[start]
        yield start, stop, X, Y, rows, first_log, last_log, local


def _log_times(S) -> np.ndarray | None:
    """Simulated time at point 0 and at every log point (None without a clock), read from
    the schedule in one pass over its steps (a long schedule keeps no per-step arrays)."""
    if not S.schedule.timed:
        return None
    points = np.concatenate([[0], S.logs])
    steps = points if S.by_step else S.feed.steps_after(points)
    return S.schedule.time_after(steps)


def _finish(problem, optimizer, S, log_w, log_avg, log_end, diverged_unit, times) -> Trajectory:
    """Excess risks at the log points, steps, times (`_log_times`) and status: the Trajectory of one run."""
    logs, cum, feed, by_step, K = S.logs, S.cum, S.feed, S.by_step, S.K
    n_ok = len(logs) if diverged_unit is None else int(np.searchsorted(logs, cum[diverged_unit]))
    points = np.concatenate([[0], logs[:n_ok]])  # in log units: fresh batches, or steps
    units = np.searchsorted(cum, points, side="left") if by_step else points  # kernel units begun
    w_start = S.w_start
    W = np.vstack([w_start, log_w[:n_ok].astype(np.float64)])
    W_avg = np.vstack([w_start, log_avg[:n_ok]])
    W_end = np.vstack([w_start, log_end[:n_ok]])
    iterates, risks = (W, W_avg, W_end), []
    with np.errstate(over="ignore", invalid="ignore"):
        for k, M in enumerate(iterates):
            # an identical earlier array is not evaluated again (K = 1: both averages are the same sums)
            twin = next((i for i in range(k) if np.array_equal(iterates[i], M)), None)
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
    info = dict(problem=repr(problem), optimizer=repr(optimizer), batch_size=S.B, n_batches=S.T,
                echo=float(K.mean()), seed=S.seed, dtype=S.dtype.name, log_unit=S.log_unit)
    return Trajectory(
        batches=feed.batches_after(units), steps=steps, time=time,
        risk=risks[0], risk_avg=risks[1], risk_end_avg=risks[2],
        status="ok" if diverged_unit is None else "diverged", w=W[-1], w_avg=W_avg[-1],
        diverged_at=None if diverged_unit is None else int(feed.batches_after(np.array([diverged_unit]))[0]),
        info=info)


class _BatchFeed:
    """Batch echoing: the kernel's unit is a fresh batch, used for K_t steps."""

    def __init__(self, problem, K, B, seed, dtype):
        self.problem, self.K, self.B, self.seed, self.dtype = problem, K, B, seed, dtype
        self.n_units = len(K)
        self._cum_steps = np.concatenate([[0], np.cumsum(K)])

    def unit_lr(self, lr):
        """The learning rate of each kernel unit, from one per fresh batch."""
        return lr

    def data(self, start, stop):
        return self.problem.batches(self.seed, start, stop, self.B, self.dtype)

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
        self.n_units = len(self.step_batch)
        self.K = np.ones(self.n_units, dtype=np.int64)

    def unit_lr(self, lr):
        return lr[self.step_batch]

    def data(self, start, stop):
        ids = self.examples[start:stop]
        batch, row = np.divmod(ids, self.B)
        first = batch.min() // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK
        X, Y = self.problem.batches(self.seed, first, int(batch.max()) + 1, self.B, self.dtype)
        return np.ascontiguousarray(X[batch - first, row]), np.ascontiguousarray(Y[batch - first, row])

    def batches_after(self, units):
        return np.where(units > 0, self.step_batch[np.maximum(units - 1, 0)] + 1, 0)

    def steps_after(self, units):
        return units


KERNEL_PARTS = ("many", "single", "draws")  # what `compile_kernels` can compile


def compile_kernels(dtypes=("float64",), *, kernels=KERNEL_PARTS) -> None:
    """Compile (or load from Numba's cache) the kernels named in `kernels` for `dtypes`.

    kernels: any of "many" (`run_many`'s kernel), "single" (`run`'s), "draws" (the
    synthetic problems' batch draws). Call it once in a parent process before
    starting workers, so that forked workers inherit the compiled code instead of
    compiling it again each. The kernels are called on tiny arrays of the types
    `run` and `run_many` pass (a test holds that a real run adds no signature), so
    each part compiles alone: two processes can compile two parts at once.
    """
    unknown = set(kernels) - set(KERNEL_PARTS)
    if unknown:
        raise ValueError(f"kernels must be among {KERNEL_PARTS}, got {sorted(unknown)}")
    from echosim.training import kernel

    for dtype in map(np.dtype, dtypes):
        X, Y = np.zeros((1, 1, 1), dtype=dtype), np.zeros((1, 1), dtype=dtype)
        K, no_rows, logs = np.ones(1, dtype=np.int64), np.zeros((0, 0), dtype=np.int64), np.zeros(1, dtype=np.int64)
        counters, zeros = np.zeros(2, dtype=np.int64), np.zeros(1)
        if "draws" in kernels:
            from echosim.training.problems import LeastSquares

            LeastSquares(dim=1).batches(0, 0, 1, 1, dtype)
        if "single" in kernels:
            w = np.zeros(1, dtype=dtype)
            kernel.echo_chunk(X, Y, K, zeros, no_rows, 0, 0, 0.0, -1.0, 0.0, w, w.copy(), zeros.copy(),
                              zeros.copy(), counters.copy(), logs, False, np.empty((1, 1), dtype=dtype),
                              np.empty((1, 1)), np.empty((1, 1)))
        if "many" in kernels:
            W = np.zeros((1, 1), dtype=dtype)
            kernel.echo_chunk_many(X, Y, K, np.zeros((1, 1)), no_rows, 0, 0, 0.0, -1.0, 0.0, W, W.copy(),
                                   np.zeros((1, 1)), np.zeros((1, 1)), counters.copy(), np.full(1, -1),
                                   logs, False, np.empty((1, 1, 1), dtype=dtype), np.empty((1, 1, 1)),
                                   np.empty((1, 1, 1)))
