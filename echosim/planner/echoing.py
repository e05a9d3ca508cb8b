"""`echoing`: data echoing for a real training loop, around any iterable of batches.

A background thread pulls fresh batches from the iterable (a PyTorch DataLoader, a
tf.data iterator, a generator) into a small buffer while the training loop works;
the loop iterates over `echoing` instead and gets each fresh batch K times:

- ``policy="greedy"``: the current batch again while the next one is not ready
  (at least once, at most ``max_echo`` times): echo exactly as long as the loader
  would leave the accelerator idle;
- ``policy=K`` (an integer): exactly K times (Choi et al.'s batch echoing with echo
  factor e = K); ``policy="sync"`` is K = 1 (prefetching only);
- ``policy="auto"``: greedy under an echo cap that it tunes from the losses the loop
  reports (`report`), so that echoed steps are taken only while they speed training
  up (`echosim.pipeline.auto`; docs/background/auto-echo.md).

The loop may tell it the loss of every step with ``it.report(loss)``. It records, per
fresh batch, how long the iterable took to produce it, how long the loop waited for
it, how many steps used it, and per step its time and loss: `records` returns them
(`echosim.planner.records.Records`) to plan from, `summary` condenses them. No torch
dependency: it only calls ``iter()`` and ``next()``.

The background thread ends when the iterable does, at `close`, or when the `echoing`
object is no longer referenced (a ``break`` out of the loop, an exception, ``del``).

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
import numbers
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator

import numpy as np

__all__ = ["echoing"]

_END = object()
_RECENT = 32  # load times behind the overdue test of greedy's decision


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class _Feed:
    """The producer side, shared with the background thread. It holds no reference to the
    `echoing` object, so that dropping the iterator can stop the thread (a finalizer)."""

    def __init__(self, iterable, epochs, capacity: int, clock):
        self.iterable = iterable
        self.epochs = epochs
        self.capacity = capacity
        self.clock = clock
        self.cond = threading.Condition()
        self.items: collections.deque = collections.deque()
        self.stopped = False
        self.free_since = clock()  # when the thread last became free to produce the next batch

    def ready(self) -> bool:
        return bool(self.items)

    def run(self) -> None:
        epoch = 0
        blocked = False
        try:
            while not self.stopped and (self.epochs is None or epoch < self.epochs):
                it = iter(self.iterable)
                produced = False
                while not self.stopped:
                    t0 = self.clock()
                    try:
                        item = next(it)
                    except StopIteration:
                        break
                    t1 = self.clock()
                    produced = True
                    blocked = self._put((item, t1 - t0, blocked, epoch))
                    item = None
                it = None
                if not produced and epoch > 0:
                    break  # a re-iterable that came back empty: do not spin
                epoch += 1
            self._put(_END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(_Failure(exc))
        finally:
            self.iterable = None  # let the loader (and its worker processes) go

    def _put(self, item) -> bool:
        """Append `item` when there is room; True if the buffer was full on arrival."""
        with self.cond:
            blocked = len(self.items) >= self.capacity
            while len(self.items) >= self.capacity and not self.stopped:
                self.cond.wait()
            if self.stopped:
                return blocked
            self.items.append(item)
            self.free_since = self.clock()
            self.cond.notify_all()
        return blocked

    def take(self, timeout: float | None = None):
        """The next item, waiting for it (None on timeout)."""
        with self.cond:
            if not self.cond.wait_for(self.ready, timeout):
                return None
            item = self.items.popleft()
            self.cond.notify_all()
            return item

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.items.clear()
            self.cond.notify_all()


def _batch_len(batch) -> int | None:
    """The number of examples in a batch, where it can be read off (first array-like field)."""
    b = batch
    for _ in range(3):
        shape = getattr(b, "shape", None)
        if shape is not None and len(shape) >= 1:
            return int(shape[0])
        if isinstance(b, (list, tuple)) and b:
            b = b[0]
        elif isinstance(b, dict) and b:
            b = next(iter(b.values()))
        else:
            return None
    return None


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
        Options of policy "auto" (`echosim.pipeline.auto.AutoEcho`): ``window``
        (fresh batches per block, >= 2), ``z`` (the decisions' significance).

    Attributes
    ----------
    load_time, wait_time : list of float
        Per fresh batch: the iterable's time to produce it; the loop's wait for it.
    echo : list of int
        Per fresh batch (finished ones): K_t, the times it was yielded.
    """

    def __init__(self, iterable: Iterable, policy="greedy", *, max_echo: int = 64, prefetch: int = 1,
                 epochs: int | None = 1, batch_size: int | None = None,
                 clock: Callable[[], float] = time.perf_counter, auto: dict | None = None):
        allowed = "'greedy', 'sync', 'auto' or an integer K >= 1"
        if isinstance(policy, str):
            if policy not in ("greedy", "sync", "auto"):
                raise ValueError(f"policy: expected {allowed}, got {policy!r}")
            self.K = 1 if policy == "sync" else None
        elif isinstance(policy, numbers.Integral) and not isinstance(policy, bool) and policy >= 1:
            self.K = int(policy)
        else:
            raise ValueError(f"policy: expected {allowed}, got {policy!r}")
        for name, v in (("max_echo", max_echo), ("prefetch", prefetch)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, numbers.Integral)
                                   or epochs < 1):
            raise ValueError(f"epochs: expected an integer >= 1 or None (repeat until the loop stops), "
                             f"got {epochs!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                       or batch_size < 1):
            raise ValueError(f"batch_size: expected an integer >= 1, got {batch_size!r}")
        if not callable(clock):
            raise ValueError(f"clock: expected a callable returning seconds, got {clock!r}")
        if not isinstance(iterable, Iterable):
            raise ValueError(f"iterable: expected an iterable of batches (e.g. a DataLoader), got "
                             f"{type(iterable).__name__}")
        if epochs != 1 and isinstance(iterable, Iterator):
            raise ValueError("epochs: this iterable is a one-pass iterator (a generator?), which cannot be "
                             "re-iterated; pass a re-iterable such as a DataLoader or a list, or epochs=1")
        if auto is not None and policy != "auto":
            raise ValueError(f"auto: options of policy 'auto', but policy is {policy!r}")
        if auto is not None:
            from echosim.pipeline.auto import AUTO_OPTIONS

            unknown = [k for k in (auto if isinstance(auto, dict) else {"?": 0}) if k not in AUTO_OPTIONS]
            if not isinstance(auto, dict) or unknown:
                raise ValueError(f"auto: expected a dict of options {', '.join(AUTO_OPTIONS)}, got "
                                 f"{auto!r}")
        self.policy = policy if policy in ("greedy", "auto") else ("sync" if self.K == 1 else "fixed")
        self.max_echo = int(max_echo)
        self._controller = None
        if self.policy == "auto":
            from echosim.pipeline.auto import AutoEcho

            self._controller = AutoEcho(max_echo=self.max_echo, **(auto or {}))
        self._clock = clock
        self._batch_size = None if batch_size is None else int(batch_size)
        self._batch_size_given = batch_size is not None
        # per fresh batch
        self.load_time: list[float] = []
        self.wait_time: list[float] = []
        self.echo: list[int] = []
        self._censored: list[bool] = []
        self._cap: list[int] = []
        self._epoch: list[int] = []
        # per step
        self._step_batch: list[int] = []
        self._step_start: list[float] = []
        self._step_time: list[float] = []
        self._loss: list[float] = []
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
        self._feed = _Feed(iterable, epochs, int(prefetch), clock)
        self._thread = threading.Thread(target=self._feed.run, name="echosim-echoing", daemon=True)
        self._finalizer = weakref.finalize(self, self._feed.stop)
        self._thread.start()

    # ---- the loop's clock: seconds since the first request, paused time taken out

    def _now(self) -> float:
        return self._clock() - self._paused

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
        return self

    def ready(self) -> bool:
        """Is the next fresh batch (or the end of the iterable) ready now?"""
        return self._feed.ready()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the next fresh batch (or the end) is ready; False on timeout."""
        with self._feed.cond:
            return self._feed.cond.wait_for(self._feed.ready, timeout)

    def _finish_batch(self) -> None:
        if self._have:
            self.echo.append(self._k)
            if self._controller is not None:
                self._controller.batch_done(self._k)
        self._have = False

    def _take(self, timeout: float | None = None) -> bool:
        """Take the next fresh batch (waiting at most `timeout`); False if it did not come."""
        t0 = self._now()
        item = self._feed.take(timeout)
        if item is None:
            return False
        t1 = self._now()
        self._finish_batch()
        if item is _END or isinstance(item, _Failure):
            self._done = True
            if isinstance(item, _Failure):
                raise item.exc
            raise StopIteration
        batch, load, censored, epoch = item
        if self._batch_size is None and not self.load_time:
            self._batch_size = _batch_len(batch)
        self.load_time.append(load)
        self._censored.append(censored)
        self._epoch.append(epoch)
        self.wait_time.append(t1 - t0)
        recent = self.load_time[-_RECENT:]
        self._overdue_after = 2.0 * max(recent) + 0.5 * self._step_typical
        self._current, self._k, self._have = batch, 0, True
        self._overdue_waited = False
        self._cap_now = self._cap_for_new_batch()
        self._cap.append(self._cap_now)
        return True

    def _cap_for_new_batch(self) -> int:
        if self.K is not None:
            return self.K
        if self._controller is None:
            return self.max_echo
        if not self._warned_no_report and len(self.echo) >= 2 and not any(math.isfinite(x) for x in self._loss):
            self._warned_no_report = True
            warnings.warn("echoing(policy='auto'): no loss has been reported (call it.report(loss) after each "
                          "step); behaving as greedy", RuntimeWarning, stacklevel=4)
        return self._controller.cap(len(self.load_time) - 1, self._now())

    def _switch(self) -> bool:
        """Greedy's decision after a step: move to the next fresh batch now (True) or echo."""
        if self._feed.ready():
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
        now = self._now()
        if self._t0 is None:
            self._t0 = now
        if self._yielded is not None:
            dt = now - self._yielded
            self._step_time.append(dt)
            self._step_typical = dt if self._step_typical == 0.0 else 0.9 * self._step_typical + 0.1 * dt
            self._yielded = None
        if not self._have or self._k >= self._cap_now or (self.K is None and self._switch()):
            self._take()
        self._k += 1
        self._step_batch.append(len(self.load_time) - 1)
        self._loss.append(math.nan)
        self._yielded = self._now()
        self._step_start.append(self._yielded - self._t0)
        return self._current

    def report(self, loss) -> None:
        """The loss of the step just taken (a float, e.g. ``loss.item()``).

        The first step's loss on a fresh batch is measured before the model has trained on
        that batch: an unbiased estimate of the current population loss, which policy
        "auto" acts on; the others are recorded. A non-finite loss means the run diverged:
        it is recorded, said once, and "auto" falls back to K = 1.
        """
        if isinstance(loss, bool) or isinstance(loss, (str, bytes)):
            raise ValueError(f"report: loss must be a number (a float), got {loss!r}")
        try:
            value = float(loss)
        except (TypeError, ValueError):
            raise ValueError(f"report: loss must be a number (a float, e.g. loss.item()), got "
                             f"{type(loss).__name__} {loss!r:.60}") from None
        if not self._step_batch:
            raise ValueError("report: no step has been taken yet (report the loss after each step)")
        if not math.isnan(self._loss[-1]):
            raise ValueError(f"report: the loss of step {len(self._loss) - 1} was reported already "
                             "(report once per step)")
        self._loss[-1] = value
        if not math.isfinite(value):
            if not self._warned_nan:
                self._warned_nan = True
                warnings.warn(f"echoing: the reported loss is {value} at step {len(self._loss) - 1}: the training "
                              "run diverged" + ("; policy 'auto' falls back to K = 1" if self._controller else ""),
                              RuntimeWarning, stacklevel=2)
            if self._controller is not None:
                self._controller.diverged()
                self._cap_now = 1
            return
        if self._k == 1 and self._controller is not None:
            self._controller.observe(len(self.load_time) - 1, value, self._step_start[-1])

    def close(self) -> None:
        """Stop the background thread (it finishes the batch it is producing, if any)."""
        if self._yielded is not None:
            self._step_time.append(self._now() - self._yielded)
            self._yielded = None
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- what was measured

    def records(self):
        """Everything measured so far, as `echosim.planner.records.Records` (times in seconds)."""
        from echosim.planner.records import Records

        K = list(self.echo) + ([self._k] if self._have else [])
        T = len(K)
        step_time = list(self._step_time) + [math.nan] * (len(self._step_batch) - len(self._step_time))
        decisions = tuple(self._controller.decisions) if self._controller is not None else ()
        return Records(
            policy=self.policy, echo=self.K, batch_size=self._batch_size,
            load_time=np.asarray(self.load_time[:T], dtype=float),
            load_censored=np.asarray(self._censored[:T], dtype=bool),
            wait_time=np.asarray(self.wait_time[:T], dtype=float),
            steps_per_batch=np.asarray(K, dtype=np.int64), cap=np.asarray(self._cap[:T], dtype=np.int64),
            epoch=np.asarray(self._epoch[:T], dtype=np.int64),
            step_batch=np.asarray(self._step_batch, dtype=np.int64),
            step_start=np.asarray(self._step_start, dtype=float),
            step_time=np.asarray(step_time, dtype=float), loss=np.asarray(self._loss, dtype=float),
            decisions=decisions)

    def summary(self) -> dict:
        """Fresh batches, steps, mean echo, times in seconds (keys ending ``_s``), fresh batches
        per second, and the loop's busy fraction in steady state (``utilization``; the wait
        fraction is 1 minus it). Paused time is left out. NaN where nothing was measured."""
        s = self.records().summary()
        if self._controller is not None:
            s["auto"] = self._controller.describe()
        return s

    def trace(self, mode: str = "resample"):
        """The iterable's measured time per batch (seconds) as a `Trace`, to plan with; times
        recorded while the loader could run ahead of the loop are left out."""
        if not self.load_time:
            raise ValueError("trace: no batch has been produced yet")
        return self.records().trace(mode)
