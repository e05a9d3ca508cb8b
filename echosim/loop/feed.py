"""The producer side of `echoing`: a background thread that pulls fresh batches from the
iterable into a small buffer, and stops them all before the interpreter exits.

The consumer takes ``(batch, load time, censored, epoch)`` tuples from `Feed.take`, then
`END`, or a `Failure` carrying what the iterable (or the ``on_epoch`` hook) raised.
"""

from __future__ import annotations

import atexit
import collections
import threading
import time
import weakref

from echosim.loop.arguments import callable_name

__all__ = ["END", "EXIT_JOIN", "LIVE", "Failure", "Feed", "call_hook", "stop_all_at_exit"]

END = object()


class Failure:
    """An exception the iterable (or the on_epoch hook) raised, handed to the consumer."""

    def __init__(self, exc: BaseException):
        self.exc = exc


class Feed:
    """The producer side, shared with the background thread. It holds no reference to the
    `echoing` object, so that dropping the iterator can stop the thread (a finalizer)."""

    def __init__(self, iterable, epochs, capacity: int, clock, on_epoch=None):
        self.iterable = iterable
        self.epochs = epochs
        self.on_epoch = on_epoch
        self.thread = threading.Thread(target=self.run, name="echosim-echoing", daemon=True)
        self.capacity = capacity
        self.clock = clock
        self.cond = threading.Condition()
        self.items: collections.deque = collections.deque()
        self.stopped = False
        self.pending = None  # an item the thread holds while the buffer is full: `take` places it
        self.free_since = clock()  # when the thread last became free to produce the next batch

    def start(self) -> None:
        """Start the thread, to be stopped before the interpreter exits."""
        # registered (again) after the loader's own exit hooks, such as a DataLoader's: runs before them
        atexit.unregister(stop_all_at_exit)
        atexit.register(stop_all_at_exit)
        LIVE.add(self)
        self.thread.start()

    def ready(self) -> bool:
        return bool(self.items)

    def run(self) -> None:
        epoch = 0
        blocked = False
        try:
            while not self.stopped and (self.epochs is None or epoch < self.epochs):
                if self.on_epoch is not None:
                    call_hook(self.on_epoch, epoch)
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
            self._put(END)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            self._put(Failure(exc))
        finally:
            self.iterable = self.on_epoch = None  # let the loader (and its worker processes) go

    def _put(self, item) -> bool:
        """Append `item` when there is room; True if the buffer was full on arrival."""
        with self.cond:
            blocked = len(self.items) >= self.capacity
            if blocked:
                # wait for room; the taker places the item itself when it makes room (so that
                # it need not wait for this thread to be scheduled again to find it ready)
                self.pending = item
                while self.pending is not None and not self.stopped:
                    self.cond.wait()
                self.pending = None
                self.free_since = self.clock()
                return blocked
            if self.stopped:
                return blocked
            self.items.append(item)
            self.free_since = self.clock()
            self.cond.notify_all()
        return blocked

    def take(self, timeout: float | None = None):
        """The next item, waiting for it (None on timeout)."""
        with self.cond:
            if not self.items and not self.cond.wait_for(self.ready, timeout):
                return None
            item = self.items.popleft()
            if self.pending is not None:  # the thread waits for room with its next item: place it
                self.items.append(self.pending)
                self.pending = None
                self.cond.notify_all()
            return item

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.pending = None
            self.items.clear()
            self.cond.notify_all()


def call_hook(hook, epoch: int) -> None:
    """``hook(epoch)``; an error it raises names it (it reaches the loop from the thread)."""
    try:
        hook(epoch)
    except BaseException as exc:
        exc.add_note(f"raised by echoing's on_epoch hook {callable_name(hook)} at the start of epoch {epoch} "
                     "(in echoing's background thread); the iterator is closed")
        raise


# Feeds whose thread was started: stopped and joined before the interpreter shuts down. A
# daemon thread still inside a loader's C code (a DataLoader) at shutdown aborts the process.
LIVE: weakref.WeakSet[Feed] = weakref.WeakSet()
EXIT_JOIN = 10.0  # seconds, in all, to let the threads finish the batch they are producing


def stop_all_at_exit() -> None:
    feeds = list(LIVE)
    for feed in feeds:
        feed.stop()
    deadline = time.monotonic() + EXIT_JOIN
    for feed in feeds:
        thread = feed.thread
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
