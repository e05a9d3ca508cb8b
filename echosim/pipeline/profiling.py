"""Time a real data loader: `profile` turns any iterable into a `Trace` to simulate.

`profile` times how long an iterable (a ``torch.utils.data.DataLoader``, a
``tf.data`` iterator, any generator) takes to hand over each batch; then
`echosim.pipeline.traces.fit_service_times` fits parametric families to the times.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable

import numpy as np

from echosim._validate import check_int
from echosim.pipeline.traces import Trace

__all__ = ["profile"]


def profile(
    iterable: Iterable,
    n: int,
    *,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 0,
    mode: str = "resample",
) -> Trace:
    """Time how long ``iterable`` takes to produce each of its first ``n`` batches.

    Only the ``next()`` call is timed. Creating the iterator (``iter()``, e.g.
    starting worker processes), the warm-up batches and anything done between two
    ``next()`` calls (a consumer's training step; here only this function's
    bookkeeping) are not counted. The result is the time a consumer that is never the
    bottleneck waits for each batch. With a prefetching loader (several workers, a
    buffer) that is the *delivery* interval, not one worker's time per batch: profile
    with one worker and no prefetch to get the per-worker service times that
    `echosim.pipeline` expects.

    Parameters
    ----------
    iterable : iterable
        Anything ``iter()`` accepts. Its items are consumed and discarded.
    n : int
        Number of batches to time, ``n >= 1``.
    clock : callable, default time.perf_counter
        Returns the current time in seconds; injectable for tests.
    warmup : int, default 0
        Batches fetched first and not timed (a DataLoader's first batch includes
        starting its workers).
    mode : {"resample", "cycle"}
        Mode of the returned `Trace`: ``"resample"`` (the default, as for trace files read
        by the planner and `echoing.trace`) draws i.i.d. from the times; ``"cycle"``
        replays them in order.

    Returns
    -------
    Trace
        The ``n`` measured times, in seconds, in the order they were produced.

    Raises
    ------
    ValueError
        ``n < 1`` or ``warmup < 0``; the iterable yields nothing after the warm-up;
        the clock returns a non-positive duration (too coarse or not monotonic).

    Warns
    -----
    RuntimeWarning
        If the iterable is exhausted after ``1 <= k < n`` timed batches: the trace
        holds those ``k`` times (note `fit_service_times` needs at least 2).
    """
    check_int("n", n, lo=1)
    check_int("warmup", warmup, lo=0)
    if not callable(clock):
        raise ValueError(f"clock must be a callable returning seconds, got {clock!r}")
    if mode not in ("cycle", "resample"):
        raise ValueError(f"mode must be one of ('cycle', 'resample'), got {mode!r}")

    try:
        it = iter(iterable)
    except TypeError:
        raise ValueError(f"iterable must be an iterable of batches (e.g. a DataLoader), got "
                         f"{type(iterable).__name__} {iterable!r:.60}") from None
    for k in range(warmup):
        try:
            next(it)
        except StopIteration:
            raise ValueError(
                f"iterable: exhausted during warm-up after {k} of {warmup} batches"
            ) from None

    times: list[float] = []
    for _ in range(n):
        t0 = clock()
        try:
            next(it)
        except StopIteration:
            break
        times.append(clock() - t0)

    if not times:
        raise ValueError("iterable: yielded no batch to time (it is empty after warm-up)")
    bad = [i for i, t in enumerate(times) if not t > 0.0]
    if bad:
        raise ValueError(
            f"clock: batch {bad[0]} took {times[bad[0]]!r} s; every duration must be > 0 "
            "(the clock is too coarse or not monotonic)"
        )
    if len(times) < n:
        warnings.warn(
            f"profile: iterable was exhausted after {len(times)} of n={n} batches; "
            "the trace holds only those",
            RuntimeWarning,
            stacklevel=2,
        )
    return Trace(np.asarray(times, dtype=np.float64), mode)


