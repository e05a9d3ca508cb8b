"""The fresh batches a run's kernel consumes, a chunk at a time: batch echoing
(`BatchFeed`: the kernel's unit is a fresh batch, used for K_t steps), example echoing
(`ExampleFeed`: the unit is one step, on the examples the schedule gives it), the windows
of batches a feed draws (`Windows`: feeds of one stream that share one draw each window
once) and the sub-batch rows of the sampling methods (`RowStream`).
"""

from __future__ import annotations

import numpy as np

from echosim.training.problems import BATCHES_PER_BLOCK, STREAM_OPTIMIZER, block_rng

__all__ = ["BatchFeed", "ExampleFeed", "RowStream", "Windows", "chunk_batches", "sub_batch_rows"]


def chunk_batches(batch_size: int, dim: int, itemsize: int, chunk_bytes: int) -> int:
    """Fresh batches per kernel call: about `chunk_bytes` of data, a multiple of the block size."""
    n = chunk_bytes // max(1, batch_size * dim * itemsize)
    return max(BATCHES_PER_BLOCK, n // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK)


class Windows:
    """Fresh batches lo..hi−1 of one stream (problem, seed, B, dtype), drawn with
    ``problem.batches``; the last window drawn is kept, so feeds that share this source
    and advance window by window in step draw each window once."""

    def __init__(self, problem, seed: int, B: int, dtype):
        self.problem, self.seed, self.B, self.dtype = problem, seed, B, np.dtype(dtype)
        self._last = None

    def stream(self) -> tuple:
        """What defines the stream: runs that share a source must agree on it."""
        return self.problem, self.seed, self.B, self.dtype

    def get(self, lo: int, hi: int):
        """(X, Y) of fresh batches lo..hi−1 (lo block-aligned); shared arrays, only to be read."""
        if self._last is None or self._last[0] != (lo, hi):
            X, Y = self.problem.batches(self.seed, lo, hi, self.B, self.dtype)
            self._last = ((lo, hi), X, Y)
        return self._last[1], self._last[2]


class BatchFeed:
    """Batch echoing: the kernel's unit is a fresh batch, used for K_t steps; K_t arrive block by block.

    Data are drawn in windows of `chunk` fresh batches aligned to multiples of that size
    (the last one cut at the horizon T, where known), so a run advanced at once draws
    exactly the windows it always drew, and one advanced in small blocks draws each
    window once.
    """

    def __init__(self, windows: Windows, T, chunk: int):
        self.windows, self.T, self.chunk = windows, T, chunk
        self.K = np.zeros(0, dtype=np.int64)
        self._cum_steps = np.zeros(1, dtype=np.int64)

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
            X, Y = self.windows.get(lo, hi)
            e = min(u1, hi)
            yield s, e, X[s - lo:e - lo], Y[s - lo:e - lo]
            s = e

    def batches_after(self, units):
        return units

    def steps_after(self, units):
        return self._cum_steps[units]


class ExampleFeed:
    """Example echoing: the kernel's unit is one step, on the examples the schedule gives it.

    Example i of fresh batch t has id t·B + i; a step's batch is gathered from the
    fresh batches its examples come from. With one step per unit, ``avg`` and
    ``end_avg`` coincide. The learning rate of a step is that of its newest batch.
    """

    def __init__(self, problem, schedule, B, seed, dtype, chunk: int):
        if schedule.batch_size != B:
            raise ValueError(f"batch_size={B} does not match the example-echoing schedule's "
                             f"batch_size={schedule.batch_size}")
        self.problem, self.B, self.seed, self.dtype = problem, B, seed, dtype
        self.examples = np.asarray(schedule.step_examples, dtype=np.int64)
        self.step_batch = np.asarray(schedule.step_batch, dtype=np.int64)
        self.K = np.ones(len(self.step_batch), dtype=np.int64)
        self.chunk = chunk

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


class RowStream:
    """The sub-batch rows of every step, drawn from block-keyed generators (one per
    `BATCHES_PER_BLOCK` fresh batches) in order and continuing across calls, so a run
    advanced in blocks draws the rows a whole run draws (`sub_batch_rows`; a test holds
    them equal)."""

    def __init__(self, seed: int, B: int, sub_batch: int, replace: bool):
        self.seed, self.B, self.sub_batch, self.replace = seed, B, sub_batch, replace
        self._rng = None  # (block, generator) of the rows being drawn

    def rows(self, K, s, e) -> np.ndarray:
        """The rows of every step of batches s..e−1, whose step counts are K[s:e]."""
        out = []
        for first in range((s // BATCHES_PER_BLOCK) * BATCHES_PER_BLOCK, e, BATCHES_PER_BLOCK):
            block = first // BATCHES_PER_BLOCK
            if self._rng is None or self._rng[0] != block:
                self._rng = (block, block_rng(self.seed, STREAM_OPTIMIZER, block))
            a, b = max(s, first), min(e, first + BATCHES_PER_BLOCK)
            out.append(_draw_rows(self._rng[1], int(K[a:b].sum()), self.sub_batch, self.B, self.replace))
        return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)


def sub_batch_rows(optimizer, seed, K, start, stop, B):
    """Sub-batch rows for every step of batches start..stop−1, from block-keyed generators
    (one per 16 fresh batches) at once: what `RowStream` draws as a run goes (a test
    holds them equal)."""
    b = optimizer.sub_batch
    out = []
    for first in range(start, stop, BATCHES_PER_BLOCK):
        rng = block_rng(seed, STREAM_OPTIMIZER, first // BATCHES_PER_BLOCK)
        n = int(K[first : min(first + BATCHES_PER_BLOCK, stop)].sum())
        out.append(_draw_rows(rng, n, b, B, optimizer.replace))
    return np.ascontiguousarray(np.concatenate(out), dtype=np.int64)


def _draw_rows(rng, n, b, B, replace):
    """n steps' rows of b out of B: with replacement, or the first b of a random permutation."""
    if replace:
        return rng.integers(0, B, size=(n, b))
    return np.argsort(rng.random((n, B)), axis=1)[:, :b]

