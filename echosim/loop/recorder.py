"""`Recorder`: what `echoing` measures, stored compactly while the loop runs, in bounded memory.

Per fresh batch, complete for the whole run, in typed arrays (`array.array`, no Python
object per value): the load and wait times (float32: 7 significant digits, 0.1 µs on a
1 s load), the steps and the cap (uint16, or uint32 when a cap can exceed 65,535), the
censored flag (1 byte) and the epoch (its changes only). The optional signals are
stored where reported (a dict per signal). Per step, the last ``keep_steps`` steps
(and at most half as many again before they are folded) in float64: start, time and loss;
the fresh batch of each step is not stored (it follows from the steps per batch).
Older steps are folded, a whole fresh batch at a time, into four per-batch totals: the
start of its first step (float64), the sum of its step times, the losses of its first
and last steps (float32).

Memory (`nbytes` counts it): 33 bytes per fresh batch (37 with uint32 counts) and 24 per
kept step, with between ``keep_steps`` and 1.5 ``keep_steps`` steps kept (older ones are
folded when there are 1.5 ``keep_steps``), plus CPython's over-allocation of a growing
array (at most 1/16): at most ``1.0625 (33 T + 36 keep_steps)`` bytes and 4 kB, for T fresh
batches, plus 16 bytes per reported optional signal. A 10^7-step run with mean echo 2
(T = 5·10^6) and the default ``keep_steps = 2**19`` holds at most 196 MB, whatever its
steps per batch; a 10^7-step run under sync (T = 10^7) at most 370 MB: per fresh batch
data is never dropped. `records()` then builds float64 arrays for the `Records` it returns
(about 100 bytes per fresh batch while they live).
"""

from __future__ import annotations

import sys
from array import array

import numpy as np

from echosim.loop.records import SIGNAL_FIELDS, Records

__all__ = ["Recorder", "KEEP_STEPS"]

KEEP_STEPS = 1 << 19
"""Steps kept one by one (the most recent) by default; older ones are folded per fresh batch."""


def _np(a: array, dtype) -> np.ndarray:
    return np.array(a, dtype=dtype) if len(a) else np.empty(0, dtype=dtype)


class Recorder:
    """The measurements of one run through `echoing` (see the module docstring)."""

    def __init__(self, keep_steps: int = KEEP_STEPS, max_count: int = 1):
        self.keep_steps = int(keep_steps)
        self._fold_at = self.keep_steps + self.keep_steps // 2
        self._epoch = 0
        count = "H" if max_count < (1 << 16) else "I" if max_count < (1 << 32) else "Q"
        # per fresh batch (the batch being stepped on included, except in `echo`)
        self.load_time = array("f")
        self.wait_time = array("f")
        self.echo = array(count)  # finished batches only
        self.censored = array("B")
        self.cap = array(count)
        self.epochs: list = []  # [first batch, epoch] where the epoch changes
        self.signals = {k: _Sparse() for k in SIGNAL_FIELDS}  # name -> the batches where reported
        self.small = _Sparse("Q")
        # per kept step: the steps of fresh batches kept_from on
        self.step_start = array("d")
        self.step_time = array("d")  # one fewer than the steps while a step runs
        self.loss = array("d")
        # per folded fresh batch
        self.kept_from = 0
        self.folded_steps = 0
        self.folded_start = array("d")
        self.folded_busy = array("f")
        self.folded_first = array("f")
        self.folded_last = array("f")

    def add_batch(self, load: float, censored: bool, epoch: int, wait: float) -> None:
        """A new fresh batch (its cap is appended to `cap` by the caller, once chosen)."""
        self.load_time.append(load)
        self.censored.append(censored)
        if epoch != self._epoch:
            self._epoch = epoch
            self.epochs.append((len(self.load_time) - 1, epoch))
        self.wait_time.append(wait)
        if len(self.loss) >= self._fold_at:
            self.fold()

    def fold(self) -> None:
        """Fold the oldest finished fresh batches' steps into per-batch totals, leaving at least
        ``keep_steps`` steps kept (only whole batches are folded)."""
        n_kept = len(self.loss)
        counts = np.asarray(self.echo[self.kept_from:], dtype=np.int64)  # finished batches whose steps are kept
        if counts.size == 0:
            return
        ends = np.cumsum(counts)
        b = int(np.searchsorted(ends, n_kept - self.keep_steps, side="right"))  # batches to fold
        if b == 0:
            return
        s = int(ends[b - 1])  # their steps
        first = np.concatenate([[0], ends[:b - 1]])
        last = ends[:b] - 1
        start = np.frombuffer(self.step_start[:s], dtype=np.float64)
        loss = np.frombuffer(self.loss[:s], dtype=np.float64)
        times = np.frombuffer(self.step_time[:s], dtype=np.float64)
        self.folded_start.frombytes(start[first].tobytes())
        self.folded_busy.frombytes(np.add.reduceat(times, first).astype(np.float32).tobytes())
        self.folded_first.frombytes(loss[first].astype(np.float32).tobytes())
        self.folded_last.frombytes(loss[last].astype(np.float32).tobytes())
        del self.step_start[:s], self.step_time[:s], self.loss[:s]
        self.kept_from += b
        self.folded_steps += s

    def records(self, policy: str, echo, batch_size, running: int | None, decisions, clock: str = "") -> Records:
        """The records so far; `running` is the steps of the batch being stepped on (None if none);
        `clock` names the loop's clock."""
        K = _np(self.echo, np.int64)
        if running is not None:
            K = np.append(K, running)
        T = K.size
        kf = self.kept_from
        n = len(self.loss)
        step_time = np.full(n, np.nan)
        step_time[:len(self.step_time)] = _np(self.step_time, np.float64)
        epoch = np.zeros(T, dtype=np.int64)
        for first, e in self.epochs:
            if first < T:
                epoch[first:] = e
        signals = {k: v.dense(T, np.nan, np.float64) for k, v in self.signals.items()}
        small = self.small.dense(T, 0, np.int64)
        return Records(
            policy=policy, echo=echo, batch_size=batch_size,
            load_time=_np(self.load_time, np.float64)[:T], load_censored=_np(self.censored, bool)[:T],
            wait_time=_np(self.wait_time, np.float64)[:T], steps_per_batch=K, cap=_np(self.cap, np.int64)[:T],
            epoch=epoch, step_batch=np.repeat(np.arange(kf, T, dtype=np.int64), K[kf:]),
            step_start=_np(self.step_start, np.float64), step_time=step_time, loss=_np(self.loss, np.float64),
            small_batch=small, **signals, decisions=tuple(decisions), clock=clock, kept_from=kf,
            folded_start=_np(self.folded_start, np.float64), folded_busy=_np(self.folded_busy, np.float64),
            folded_first_loss=_np(self.folded_first, np.float64), folded_last_loss=_np(self.folded_last, np.float64))

    def nbytes(self) -> int:
        """Bytes held by the stored values (the arrays' allocations, dict entries at their size)."""
        arrays = (self.load_time, self.wait_time, self.echo, self.censored, self.cap, self.step_start,
                  self.step_time, self.loss, self.folded_start, self.folded_busy, self.folded_first,
                  self.folded_last)
        total = sum(sys.getsizeof(a) for a in arrays)  # the allocation, over-allocation included
        total += sys.getsizeof(self.epochs) + 64 * len(self.epochs)  # a tuple of two ints per epoch
        return total + sum(v.nbytes() for v in (*self.signals.values(), self.small))


class _Sparse:
    """Values of some fresh batches (t nondecreasing): ``sparse[t] = v`` appends, or replaces the
    value of the last batch set; 16 bytes per batch set."""

    __slots__ = ("index", "value")

    def __init__(self, kind: str = "d"):
        self.index = array("Q")
        self.value = array(kind)

    def __setitem__(self, t: int, v) -> None:
        if self.index and self.index[-1] == t:
            self.value[-1] = v
        else:
            self.index.append(t)
            self.value.append(v)

    def dense(self, T: int, fill, dtype) -> np.ndarray:
        out = np.full(T, fill, dtype=dtype)
        if self.index:
            idx = np.array(self.index, dtype=np.int64)
            ok = idx < T
            out[idx[ok]] = np.array(self.value, dtype=dtype)[ok]
        return out

    def nbytes(self) -> int:
        return sys.getsizeof(self.index) + sys.getsizeof(self.value)
