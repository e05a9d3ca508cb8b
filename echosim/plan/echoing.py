"""`echoing`: data echoing for a real training loop, around any iterable of batches.

A background thread pulls fresh batches from the iterable (a PyTorch DataLoader, a
tf.data iterator, a generator) into a small buffer while the training loop works;
the loop iterates over `echoing` instead and gets each fresh batch K times:

- ``policy="greedy"``: the current batch again while the next one is not ready
  (at least once, at most ``max_echo`` times): echo exactly as long as the loader
  would leave the accelerator idle;
- ``policy=K`` (an integer): exactly K times (Choi et al.'s batch echoing with echo
  factor e = K); ``policy="sync"`` is K = 1 (prefetching only).

It records, per fresh batch, how long the iterable took to produce it (``load_time``,
measured in the background thread), how long the loop waited for it (``wait_time``)
and how many steps used it (``echo``); `summary` condenses them, `trace` returns the
load times as a `Trace` for `echosim.plan.plan`. No torch dependency: it only calls
``iter()`` and ``next()``.

Examples
--------
>>> list(echoing(range(3), 2))
[0, 0, 1, 1, 2, 2]
>>> it = echoing(["a", "b"], "sync")
>>> list(it), it.summary()["mean_echo"]
(['a', 'b'], 1.0)
"""

from __future__ import annotations

import numbers
import queue
import threading
import time
from collections.abc import Callable, Iterable

import numpy as np

__all__ = ["echoing"]

_END = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


class echoing:  # noqa: N801 - used like a function: `for batch in echoing(loader):`
    """Iterate over `iterable`'s batches, each repeated by the echo policy.

    Parameters
    ----------
    iterable : iterable
        Any iterable of batches; it is consumed in a background thread.
    policy : "greedy", "sync" or int K >= 1
        "greedy": repeat the current batch while the next is not ready (1 to
        ``max_echo`` times); K: exactly K times; "sync": once.
    max_echo : int
        Upper bound on repeats under "greedy" (default 64).
    prefetch : int
        Fresh batches the background thread may hold ready (default 1; the thread
        also holds the one it is producing).
    clock : callable
        Seconds, monotonic (default `time.perf_counter`).

    Attributes
    ----------
    load_time, wait_time : list of float
        Per fresh batch: the iterable's time to produce it; the loop's wait for it.
    echo : list of int
        Per fresh batch (finished ones): K_t, the times it was yielded.
    """

    def __init__(self, iterable: Iterable, policy="greedy", *, max_echo: int = 64, prefetch: int = 1,
                 clock: Callable[[], float] = time.perf_counter):
        if isinstance(policy, str):
            if policy not in ("greedy", "sync"):
                raise ValueError(f"policy: expected 'greedy', 'sync' or an integer K >= 1, got {policy!r}")
            self.K = None if policy == "greedy" else 1
        elif isinstance(policy, numbers.Integral) and not isinstance(policy, bool) and policy >= 1:
            self.K = int(policy)
        else:
            raise ValueError(f"policy: expected 'greedy', 'sync' or an integer K >= 1, got {policy!r}")
        for name, v in (("max_echo", max_echo), ("prefetch", prefetch)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name}: expected an integer >= 1, got {v!r}")
        if not callable(clock):
            raise ValueError(f"clock: expected a callable returning seconds, got {clock!r}")
        self.policy = "greedy" if self.K is None else ("sync" if self.K == 1 else "fixed")
        self.max_echo = int(max_echo)
        self._clock = clock
        self._it = iter(iterable)
        self._q: queue.Queue = queue.Queue(maxsize=int(prefetch))
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._done = False  # the consumer has seen the end
        self.load_time: list[float] = []
        self.wait_time: list[float] = []
        self.echo: list[int] = []
        self._current = None
        self._k = 0
        self._have = False
        self._t_start: float | None = None
        self._t_last: float | None = None
        self._thread = threading.Thread(target=self._produce, name="echosim-echoing", daemon=True)
        self._thread.start()

    # ---- background thread

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(item, timeout=0.05)  # wakes to notice close(); not a timing assumption
            except queue.Full:
                continue
            with self._cond:
                self._cond.notify_all()
            return True
        return False

    def _produce(self) -> None:
        while not self._stop.is_set():
            t0 = self._clock()
            try:
                item = next(self._it)
            except StopIteration:
                self._put(_END)
                return
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                self._put(_Failure(exc))
                return
            self.load_time.append(self._clock() - t0)
            if not self._put(item):
                return

    # ---- the consumer side

    def __iter__(self):
        return self

    def ready(self) -> bool:
        """Is the next fresh batch (or the end of the iterable) ready now?"""
        return self._q.qsize() > 0

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until the next fresh batch (or the end) is ready; False on timeout."""
        with self._cond:
            return self._cond.wait_for(self.ready, timeout)

    def _take(self):
        t0 = self._clock()
        item = self._q.get()
        t1 = self._clock()
        if self._t_start is None:
            self._t_start = t0
        if self._have:
            self.echo.append(self._k)
        if item is _END or isinstance(item, _Failure):
            self._have = False
            self._done = True
            self._t_last = t1
            if isinstance(item, _Failure):
                raise item.exc
            raise StopIteration
        self.wait_time.append(t1 - t0)
        self._current, self._k, self._have = item, 0, True

    def __next__(self):
        if self._done:
            raise StopIteration
        if not self._have:
            self._take()
        elif self.K is not None:
            if self._k >= self.K:
                self._take()
        elif self._k >= self.max_echo or self.ready():
            self._take()
        self._k += 1
        self._t_last = self._clock()
        return self._current

    def close(self) -> None:
        """Stop the background thread (it finishes the batch it is producing, if any)."""
        self._stop.set()
        try:
            while True:
                self._q.get_nowait()
        except queue.Empty:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- what was measured

    def summary(self) -> dict:
        """Fresh batches, steps, mean echo, elapsed seconds, throughput (fresh batches/s),
        the fraction of time the loop waited for data, and 1 minus it (``utilization``:
        the loop's busy fraction; the accelerator's if the loop's own overhead is small)."""
        echo = list(self.echo) + ([self._k] if self._have else [])
        n = len(echo)
        steps = int(sum(echo))
        elapsed = (self._t_last - self._t_start) if self._t_start is not None and self._t_last is not None else 0.0
        wait = float(sum(self.wait_time[1:]))  # the first wait is start-up, not steady state
        span = elapsed - (self.wait_time[0] if self.wait_time else 0.0)
        return {"policy": self.policy, "batches": n, "steps": steps, "mean_echo": steps / n if n else float("nan"),
                "elapsed": elapsed, "throughput": (n - 1) / span if n > 1 and span > 0 else float("nan"),
                "wait_fraction": wait / span if span > 0 else float("nan"),
                "utilization": 1.0 - wait / span if span > 0 else float("nan"),
                "mean_load_time": float(np.mean(self.load_time)) if self.load_time else float("nan")}

    def trace(self, mode: str = "resample"):
        """The iterable's measured time per batch (seconds) as a `Trace`, to plan with."""
        from echosim.pipeline.traces import Trace

        if not self.load_time:
            raise ValueError("trace: no batch has been produced yet")
        return Trace(np.asarray(self.load_time, dtype=float), mode)
