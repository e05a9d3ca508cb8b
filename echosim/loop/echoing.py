"""`echoing`: data echoing for a real training loop, around any iterable of batches.

A background thread pulls fresh batches from the iterable (a PyTorch DataLoader, a
tf.data iterator, a generator) into a small buffer while the training loop works;
the loop iterates over `echoing` instead and gets each fresh batch K times:

- ``policy="greedy"``: the current batch again while the next one is not ready
  (at least once, at most ``max_echo`` times): echo exactly as long as the loader
  would leave the accelerator idle;
- ``policy=K`` (an integer): exactly K times (Choi et al.'s batch echoing with echo
  factor e = K); ``policy="sync"`` is K = 1 (prefetching only);
- ``policy="auto"``: greedy under an echo cap chosen by comparing caps on what the loop
  reports (`report`): a cap moves only when a test shows a neighbour is faster, with the
  chance of any wrong move in the job bounded (`echosim.control.auto`;
  docs/background/auto-echo.md).

The loop may tell it the loss of every step with ``it.report(loss)``, and, optionally,
what an echoed step is worth: ``lagged_loss=`` (on a fresh batch's first step, its loss
at the weights the previous fresh batch started from: the paired next-batch progress),
``probe=`` (a held-out loss, when ``it.probe_due``) and ``grad_sq=`` (squared gradient
norms at two batch sizes: the gradient-noise scale). `echosim.loop.torch.EchoMeter`
computes them for a PyTorch model. It records, per fresh batch, how long the iterable
took to produce it, how long the loop waited for it, how many steps used it and the
signals, and per step its time and loss: `records` returns them
(`echosim.loop.records.Records`) to plan from, `summary` condenses them. No torch
dependency: it only calls ``iter()`` and ``next()``.

The background thread starts at the first request (``iter``, ``next``), and ends when
the iterable does, at `close`, when the `echoing` object is no longer referenced (a
``break`` out of the loop, an exception, ``del``), or before the interpreter exits
(a thread left inside a DataLoader at shutdown would abort the process). `len` is the
number of steps where the policy fixes it; ``on_epoch`` is called before every pass
(``loader.sampler.set_epoch``); ``sync`` before each reading of the loop's clock
(``torch.cuda.synchronize``: step times of an asynchronous device); `is_echo` tells a
repeated batch; `verdict` answers "is my loader the bottleneck?" in one line.

This module is the iterator the loop holds. Its background thread and buffer live in
`echosim.loop.feed`, the checks of its arguments and of reported values in
`echosim.loop.arguments`, and what it measures is stored by `echosim.loop.recorder`.

Examples
--------
>>> list(echoing(range(3), 2))
[0, 0, 1, 1, 2, 2]
>>> it = echoing(["a", "b"], "sync")
>>> list(it), it.summary()["mean_echo"]
(['a', 'b'], 1.0)
>>> list(echoing([1, 2], 1, epochs=2))
[1, 2, 1, 2]
"""

from __future__ import annotations

import collections
import contextlib
import math
import time
import warnings
import weakref
from collections.abc import Callable, Iterable

from echosim.control import Driver, diverging, make_controller
from echosim.control.auto import AUTO_DEFAULTS
from echosim.loop.arguments import (
    as_real,
    batch_len,
    callable_name,
    check_arguments,
    check_grad_sq,
    hint_set_epoch,
    len_or_none,
    read_later,
    synced,
)
from echosim.loop.feed import Failure, Feed
from echosim.loop.recorder import KEEP_STEPS, Recorder
from echosim.loop.records import _seconds

__all__ = ["echoing"]

_RECENT = 32  # load times behind the overdue test of greedy's decision
_MAX_UNREAD = 1024  # losses reported as tensors, kept unread at most (`report`)


class echoing:  # noqa: N801 - used like a function: `for batch in echoing(loader):`
    """Iterate over `iterable`'s batches, each repeated by the echo policy.

    Parameters
    ----------
    iterable : iterable
        Any iterable of batches; it is consumed in a background thread.
    policy : "greedy", "sync", "auto" or int K >= 1
        "greedy": repeat the current batch while the next is not ready (1 to
        ``max_echo`` times); K: exactly K times; "sync": once; "auto": greedy under a
        cap tuned from the reported losses (without `report` it is greedy, and says so).
    max_echo : int
        Upper bound on repeats under "greedy" and "auto" (default 64).
    prefetch : int
        Fresh batches the background thread may hold ready (default 1; the thread
        also holds the one it is producing).
    epochs : int or None
        Passes over the iterable (default 1); None repeats it until the loop stops (a
        re-iterable such as a DataLoader or a list; a generator can be passed once).
    batch_size : int, optional
        B, recorded for the planner; by default read off the first batch if it has a
        length (``batch.shape[0]``, or that of its first field).
    clock : callable
        Seconds, monotonic (default `time.perf_counter`).
    auto : dict, optional
        Options of policy "auto" (`echosim.control.auto.AutoEcho`): ``window`` (fresh
        batches per run), ``alpha`` (the chance of any wrong move in the job),
        ``min_effect`` (relative rates this close are equal), ``start`` (the first cap).
    on_epoch : callable, optional
        ``on_epoch(e)`` before pass e = 0, 1, ... over the iterable begins (in the
        background thread, before ``iter(iterable)``): ``on_epoch=loader.sampler.set_epoch``
        makes a `DistributedSampler` reshuffle every pass under ``epochs=None`` or > 1.
        An error it raises reaches the loop, naming the hook, and closes the iterator.
    sync : callable, optional
        Called before each reading of the loop's clock (e.g. ``torch.cuda.synchronize``):
        on an accelerator that runs asynchronously, the step times are then the device's,
        not the time to launch the step's kernels. It costs the CPU's run-ahead (one
        synchronisation per step); leave it out for training runs that only need the
        waits, and use it for pilots and timing runs. The records name it (``clock``).
    keep_steps : int
        Steps whose time and loss are kept one by one (the most recent; default 2**19).
        Older steps are folded, a whole fresh batch at a time, into that batch's first
        and last losses, start and total step time; everything per fresh batch is kept.

    Attributes
    ----------
    load_time, wait_time : list of float
        Per fresh batch: the iterable's time to produce it; the loop's wait for it.
    echo : list of int
        Per fresh batch (finished ones): K_t, the times it was yielded.

    Notes
    -----
    Memory: what is measured is held in typed arrays (`echosim.loop.recorder`): 33 bytes
    per fresh batch and 24 per kept step, within ``1.0625 (33 T + 36 keep_steps)`` bytes
    for T fresh batches: a 10^7-step run with mean echo 2 holds under 200 MB.

    The background thread starts at the first request (``iter`` or ``next``), not at
    construction, and is stopped before the interpreter exits (it is given up to 10 s
    to finish the batch it is producing): an iterator built and never used, or
    abandoned when the program ends, costs nothing and leaves the process's exit
    status as it was.

    ``len(it)`` is the number of steps it will yield where the policy fixes it (sync and
    fixed K: K x ``len(iterable)`` x epochs); under "greedy" and "auto", or for an
    iterable without a length, it is a TypeError, as for Python's own iterators.
    `fresh_batches` is the number of fresh batches, where known.
    """

    def __init__(self, iterable: Iterable, policy="greedy", *, max_echo: int = 64, prefetch: int = 1,
                 epochs: int | None = 1, batch_size: int | None = None,
                 clock: Callable[[], float] = time.perf_counter, auto: dict | None = None,
                 on_epoch: Callable[[int], object] | None = None, sync: Callable[[], object] | None = None,
                 keep_steps: int = KEEP_STEPS):
        self.K = check_arguments(iterable, policy, max_echo, prefetch, epochs, batch_size, clock, auto, on_epoch,
                                 sync, keep_steps)
        self.policy = policy if policy in ("greedy", "auto") else ("sync" if self.K == 1 else "fixed")
        self.max_echo = int(max_echo)
        self._controller = make_controller(self.policy, K=self.K or 1, max_echo=self.max_echo, options=auto)
        self._driver = Driver(self._controller)
        self._window = self._controller.window if self.policy == "auto" else AUTO_DEFAULTS["window"]
        self._clock = clock
        self._sync = sync
        # the loop's clock readings: `sync` first, if given (the no-sync path reads the clock alone)
        self._read = clock if sync is None else synced(clock, sync)
        self.clock = callable_name(clock) + (f" after {callable_name(sync)}()" if sync is not None else "")
        self._epochs = epochs
        self._n_batches = len_or_none(iterable)
        if on_epoch is None and epochs != 1:
            hint_set_epoch(iterable)
        self._batch_size = None if batch_size is None else int(batch_size)
        self._batch_size_given = batch_size is not None
        # what is measured, in bounded memory (echosim.loop.recorder): per fresh batch, and per step
        # the last keep_steps steps (older ones folded per fresh batch)
        self._rec = rec = Recorder(int(keep_steps), max(self.K or 1, self.max_echo))
        self._load_time, self._wait_time, self._echo = rec.load_time, rec.wait_time, rec.echo
        self._step_start, self._step_time, self._loss = rec.step_start, rec.step_time, rec.loss
        self._signals, self._small = rec.signals, rec.small  # per fresh batch where reported
        self._recent: collections.deque = collections.deque(maxlen=_RECENT)
        self._recent_max = 0.0
        self._current = None
        self._k = 0
        self._cap_now = 1
        self._have = False
        self._done = False
        self._t0: float | None = None  # the loop clock's zero (the first request)
        self._paused = 0.0
        self._pause_depth = 0
        self._yielded: float | None = None  # when the running step was handed over (loop clock)
        self._overdue_after = math.inf
        self._overdue_waited = False
        self._step_typical = 0.0
        self._warned_no_report = False
        self._warned_nan = False
        self._iterable_type = type(iterable).__name__
        self._unread: dict[int, object] = {}  # step -> a reported tensor not read yet (`report`)
        self._feed = Feed(iterable, epochs, int(prefetch), clock, on_epoch)
        self._thread = self._feed.thread
        self._finalizer = weakref.finalize(self, self._feed.stop)

    def _start(self) -> None:
        """Start the background thread (at the first request), once."""
        if self._thread.ident is not None or self._feed.stopped:
            return
        self._feed.start()

    # ---- what is measured per fresh batch, as lists (the values are held compactly: `_rec`)

    @property
    def load_time(self) -> list:
        """Per fresh batch: the iterable's time to produce it (seconds; float32 precision)."""
        return self._load_time.tolist()

    @property
    def wait_time(self) -> list:
        """Per fresh batch: the loop's wait for it (seconds; float32 precision)."""
        return self._wait_time.tolist()

    @property
    def echo(self) -> list:
        """Per finished fresh batch: K_t, the times it was yielded."""
        return self._echo.tolist()

    # ---- the loop's clock: seconds since the first request, paused time taken out

    def _now(self) -> float:
        return self._read() - self._paused

    @contextlib.contextmanager
    def paused(self):
        """Time spent inside ``with it.paused():`` (evaluation, checkpoints, logging) counts as
        neither a step nor a wait: it is taken out of every recorded time. The loader keeps
        loading meanwhile, so a long pause fills the prefetch buffer."""
        t = self._clock()
        self._pause_depth += 1
        try:
            yield self
        finally:
            self._pause_depth -= 1
            if self._pause_depth == 0:
                self._paused += self._clock() - t

    # ---- the consumer side

    def __iter__(self):
        self._start()
        return self

    def __len__(self) -> int:
        n = self.fresh_batches
        if n is None:
            if self._epochs is None:
                raise TypeError("len: echoing(epochs=None) repeats the iterable until the loop stops; it has no length")
            raise TypeError(f"object of type 'echoing' has no len(): its iterable ({self._iterable_type}) has none")
        if self.K is None:
            raise TypeError(f"len: policy {self.policy!r} decides the steps per fresh batch as it runs, so their "
                            f"number is unknown; it.fresh_batches is {n}")
        return self.K * n

    def __bool__(self) -> bool:
        return True  # not len(): an iterator is true, whatever its length

    @property
    def fresh_batches(self) -> int | None:
        """Fresh batches the iteration will take: ``len(iterable)`` x epochs (None if unknown)."""
        if self._n_batches is None or self._epochs is None:
            return None
        return self._n_batches * self._epochs

    def ready(self) -> bool:
        """Is the next fresh batch (or the end of the iterable) ready now?"""
        return self._feed.ready()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the next fresh batch (or the end) is ready; False on timeout."""
        self._start()
        with self._feed.cond:
            return self._feed.cond.wait_for(self._feed.ready, timeout)

    def _finish_batch(self) -> None:
        if self._have:
            self._echo.append(self._k)
            self._driver.end(len(self._echo) - 1, self._k)
        self._have = False

    def _take(self, timeout: float | None = None, t0: float | None = None) -> bool:
        """Take the next fresh batch (waiting at most `timeout`); False if it did not come. `t0`:
        the loop clock's time now, if the caller has just read it."""
        rec = self._rec
        if self._unread and len(rec.loss) >= rec._fold_at:
            self._read_unread()  # a step's loss is read before the recorder folds it (`report` does it first)
        if t0 is None:
            t0 = self._now()
        item = self._feed.take(timeout)
        if item is None:
            return False
        t1 = self._read() - self._paused
        self._finish_batch()
        if type(item) is not tuple:  # END or a Failure (echosim.loop.feed)
            self._done = True
            if isinstance(item, Failure):
                self.close()
                raise item.exc
            raise StopIteration
        batch, load, censored, epoch = item
        if self._batch_size is None and not rec.load_time:
            self._batch_size = batch_len(batch)
        rec.load_time.append(load)  # rec.add_batch(load, censored, epoch, t1 - t0), inlined
        rec.censored.append(censored)
        if epoch != rec._epoch:
            rec._epoch = epoch
            rec.epochs.append((len(rec.load_time) - 1, epoch))
        rec.wait_time.append(t1 - t0)
        if len(rec.loss) >= rec._fold_at:
            rec.fold()
        recent = self._recent  # the largest of the last _RECENT load times, without a scan per batch
        if len(recent) == _RECENT and recent[0] >= self._recent_max:
            recent.append(load)
            self._recent_max = max(recent)
        else:
            recent.append(load)
            if load > self._recent_max:
                self._recent_max = load
        self._overdue_after = 2.0 * self._recent_max + 0.5 * self._step_typical
        self._current, self._k, self._have = batch, 0, True
        self._overdue_waited = False
        self._cap_now = self._cap_for_new_batch(t1)
        rec.cap.append(self._cap_now)
        return True

    def _cap_for_new_batch(self, now: float) -> int:
        t = len(self._load_time) - 1
        if (not self._warned_no_report and self.policy == "auto" and len(self._echo) >= 2
                and not any(math.isfinite(x) for x in self._loss)):
            self._warned_no_report = True
            warnings.warn("echoing(policy='auto'): no loss has been reported (call it.report(loss) after each "
                          "step); without a signal it cannot compare caps and stays at its starting cap "
                          f"{self._controller.incumbent}", RuntimeWarning, stacklevel=4)
        return self._driver.begin(t, now)

    def _switch(self) -> bool:
        """Greedy's decision after a step: move to the next fresh batch now (True) or echo."""
        if self._feed.items:  # ready
            return True
        if self._k >= self._cap_now:
            return True
        # Not ready. Echo, unless the loader is overdue by far: then the background thread
        # has been kept from running (a consumer holding the GIL), not slowed by loading, and
        # waiting for it (which releases the GIL) is what greedy means. Waited once in vain,
        # the loader is slow for real (a stall): echo on.
        if not self._overdue_waited and self._clock() - self._feed.free_since > self._overdue_after:
            self._overdue_waited = True
            with self._feed.cond:
                return self._feed.cond.wait_for(self._feed.ready, max(2.0 * self._step_typical, 0.005))
        return False

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._t0 is None:  # the first request: the thread starts, the loop's clock too
            self._start()
            self._t0 = now = self._read() - self._paused
        else:
            now = self._read() - self._paused
        if self._yielded is not None:
            dt = now - self._yielded
            self._step_time.append(dt)
            self._step_typical = dt if self._step_typical == 0.0 else 0.9 * self._step_typical + 0.1 * dt
            self._yielded = None
        if not self._have or self._k >= self._cap_now or (self.K is None and self._feed.items):
            self._take(t0=now)  # (greedy's decision, `_switch`, when the next batch is ready)
        elif self.K is None and self._switch():
            self._take()
        self._k += 1
        self._loss.append(math.nan)
        self._yielded = y = self._read() - self._paused
        self._step_start.append(y - self._t0)
        return self._current

    @property
    def is_echo(self) -> bool:
        """Is the batch just yielded a repeat (an echoed step), not its first step?"""
        return self._k > 1

    @property
    def probe_due(self) -> bool:
        """Should the loop report a held-out probe loss with this step (``report(loss, probe=...)``)?
        True on the first step of every ``window``-th fresh batch: where policy "auto" starts
        a run of one cap, so that the probe measures each run's progress."""
        return self._have and self._k == 1 and (len(self._load_time) - 1) % self._window == 0

    def report(self, loss, *, lagged_loss=None, probe=None, grad_sq=None) -> None:
        """What the step just taken measured: its loss (a number, e.g. ``loss.item()``, or a 0-d
        tensor), and optionally what an echoed step is worth.

        Parameters
        ----------
        loss
            The step's loss. The first step's loss on a fresh batch is measured before the
            model has trained on that batch: an unbiased estimate of the population loss.
        lagged_loss : number or (number, number), optional
            On a fresh batch's first step only: the batch's loss at the weights the
            previous fresh batch started from (one extra forward pass at a weight snapshot).
            Its difference from `loss` is the paired next-batch progress of the previous
            batch; give a pair ``(at the snapshot, at the current weights)`` when the loss
            of the extra passes differs from the training forward pass (dropout, batch norm).
        probe : number, optional
            A held-out loss at the current weights (when `probe_due`).
        grad_sq : (b, |g_b|^2, |g_B|^2), optional
            Squared gradient norms on the first b examples and on the whole batch of B:
            the gradient-noise scale (`echosim.loop.signals.noise_scale`).

        Notes
        -----
        A loss or signal that is not finite (or beyond 1e150) means the run diverged: it
        is recorded, said once, and "auto" falls back to K = 1.

        A 0-d tensor (torch, JAX: anything 0-d with ``.item()`` that is not NumPy's) is kept
        as it is, detached, and read later: reading it forces the host to wait for the
        device, every step. It is read when its value is needed: at a fresh batch's first
        step under "auto" (whose decisions need that loss), when a ``lagged_loss`` comes
        without its pair, when `records` or `summary` are taken, before the steps they
        belong to are folded (``keep_steps``), and, in bulk, every 1024 unread losses (one
        wait per 1024 steps; the tensors they hold meanwhile are a few bytes of device
        memory each). The price: a diverging loss is noticed when
        it is read, not when it is reported.
        """
        if type(loss) is float:
            value, deferred = loss, None
        else:
            deferred = read_later("report: loss", loss)
            if deferred is not None and (self._k == 1 and self.policy == "auto"
                                         or lagged_loss is not None and not isinstance(lagged_loss, tuple)):
                deferred = None  # its value is needed now
            value = math.nan if deferred is not None else as_real("report: loss", loss)
        losses = self._loss
        if not losses:
            raise ValueError("report: no step has been taken yet (report the loss after each step)")
        j = self._rec.folded_steps + len(losses) - 1  # the step (folded ones counted)
        if not math.isnan(losses[-1]) or j in self._unread:
            raise ValueError(f"report: the loss of step {j} was reported already (report once per step)")
        t = len(self._load_time) - 1
        extra = {}
        if lagged_loss is not None:
            if self._k != 1:
                raise ValueError("lagged_loss: only on a fresh batch's first step (it.is_echo is True here)")
            pair = lagged_loss if isinstance(lagged_loss, tuple) else (lagged_loss, None)
            if len(pair) != 2:
                raise ValueError(f"report: lagged_loss: expected a number or a pair of numbers, got {lagged_loss!r:.80}")
            extra["lagged_before"] = as_real("report: lagged_loss", pair[0])
            extra["lagged_after"] = value if pair[1] is None else as_real("report: lagged_loss", pair[1])
        if probe is not None:
            extra["probe"] = as_real("report: probe", probe)
        if grad_sq is not None:
            small, sq_small, sq_full = check_grad_sq(grad_sq, self._batch_size)
        if deferred is not None:
            self._unread[j] = deferred
            bad = [k for k, v in extra.items() if diverging(v)] if extra else ()
        else:
            losses[-1] = value
            if self._k == 1 and not self._warned_no_report:
                self._warned_no_report = math.isfinite(value)  # a loss came: no need to say none did
            bad = [k for k, v in (("loss", value), *extra.items()) if diverging(v)] if extra or diverging(value) else ()
        if bad:
            what = bad[0].replace("lagged_before", "lagged_loss").replace("lagged_after", "lagged_loss")
            self._diverged(what, value if bad[0] == "loss" else extra[bad[0]], j, stacklevel=3)
        for k, v in extra.items():
            self._signals[k][t] = v
        if grad_sq is not None:
            self._small[t] = small
            self._signals["grad_sq_small"][t], self._signals["grad_sq_full"][t] = sq_small, sq_full
        if deferred is not None and (len(self._unread) >= _MAX_UNREAD or len(losses) >= self._rec._fold_at):
            self._read_unread()  # in bulk; and before the recorder folds these steps (at the next fresh batch)
        if bad:
            return
        if self._k == 1 and deferred is None:
            self._driver.first_loss(t, value)
            if "lagged_before" in extra:
                self._driver.lagged_loss(t, extra["lagged_before"] - extra["lagged_after"] + value)
        if "probe" in extra:
            self._driver.probe(t, extra["probe"])

    def _diverged(self, what: str, value: float, step: int, stacklevel: int) -> None:
        if not self._warned_nan:
            self._warned_nan = True
            warnings.warn(f"echoing: the reported {what} is {value} at step {step}: the training run diverged"
                          + ("; policy 'auto' falls back to K = 1" if self.policy == "auto" else ""),
                          RuntimeWarning, stacklevel=stacklevel)
        self._driver.diverged()
        if self.policy == "auto":
            self._cap_now = 1

    def _read_unread(self) -> None:
        """Read the losses reported as tensors and kept unread (`report`) into the recorder's
        losses (the steps it keeps: they are read before it folds any of them)."""
        if not self._unread:
            return
        unread, self._unread = self._unread, {}
        losses, first = self._loss, self._rec.folded_steps
        for j in sorted(unread):
            value = as_real("report: loss", unread[j])
            losses[j - first] = value
            if diverging(value):
                self._diverged("loss", value, j, stacklevel=4)

    def close(self) -> None:
        """Stop the background thread (it finishes the batch it is producing, if any); the
        iterator yields nothing more."""
        if self._yielded is not None:
            self._step_time.append(self._now() - self._yielded)
            self._yielded = None
        self._done = True
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- what was measured

    def records(self):
        """Everything measured so far, as `echosim.loop.records.Records` (times in seconds)."""
        self._read_unread()
        return self._rec.records(self.policy, self.K, self._batch_size, self._k if self._have else None,
                                 self._controller.decisions, clock=self.clock)

    def summary(self) -> dict:
        """Fresh batches, steps, mean echo, times in seconds (keys ending ``_s``), fresh batches
        per second, and the loop's busy fraction in steady state (``utilization``; the wait
        fraction is 1 minus it). Paused time is left out. NaN where nothing was measured."""
        s = self.records().summary()
        if self.policy == "auto":
            s["auto"] = self._controller.describe()
        return s

    def __repr__(self) -> str:
        state = "done" if self._done else ("running" if self._thread.ident is not None else "not started")
        total = "" if self.fresh_batches is None else f" of {self.fresh_batches}"
        return (f"echoing(policy={self.policy!r}{'' if self.K is None or self.K == 1 else f', K={self.K}'}, "
                f"{state}, fresh_batches={len(self._load_time)}{total}, "
                f"steps={self._rec.folded_steps + len(self._loss)}, waited={_seconds(sum(self._wait_time))!r})")

    def _repr_html_(self) -> str:
        import html

        return (f"<p><b>{html.escape(repr(self))}</b></p>" + self.records()._repr_html_()).replace(
            "echosim Records", "what it measured so far")

    def verdict(self, plan=None):
        """Is the loader the bottleneck, and what would echoing buy? One line (``print(it.verdict())``):
        the steps that waited on the loader, the exposed wait per step, epoch-boundary stalls
        apart, and, given a `Plan` made from these records (``echosim.plan(records=...)``),
        the saving it predicts with its band; `echosim.verdict` makes the plan for you."""
        from echosim.loop.verdict import judge

        return judge(self.records(), plan)

    def trace(self, mode: str = "resample"):
        """The iterable's measured time per batch (seconds) as a `Trace`, to plan with; times
        recorded while the loader could run ahead of the loop are left out."""
        if not self._load_time:
            raise ValueError("trace: no batch has been produced yet")
        return self.records().trace(mode)
