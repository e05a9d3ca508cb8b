"""Executors: run pending specs serially, on local worker processes (which die with
their parent) or on a Dask cluster, and yield each payload as it finishes; progress.

Workers only compute: the sweep's process writes every result to the store, so
workers need no shared disk and a killed worker never leaves half a file.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator

from echosim.experiments import store
from echosim.experiments.assemble import _one_line, _warm_all, execute_run

__all__ = ["SweepError", "Progress", "default_workers", "serial", "local", "dask"]


class SweepError(RuntimeError):
    """The sweep itself could not go on (e.g. a worker process died); finished runs are kept."""


# --------------------------------------------------------------------------- progress


class Progress:
    """done/total, rate and ETA: a tqdm bar on a terminal, a plain line every `every`
    seconds otherwise (logs of batch jobs), and a final line."""

    def __init__(self, total: int, stream=None, enabled: bool = True, every: float = 10.0, unit: str = "run"):
        self.total, self.done, self.unit, self.every = total, 0, unit, every
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = self._last = time.perf_counter()
        self._bar = None
        if self.enabled and self.tty:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit=unit, file=self.stream, dynamic_ncols=True, leave=True)

    def text(self) -> str:
        from tqdm import tqdm

        return tqdm.format_meter(self.done, self.total, time.perf_counter() - self.t0, unit=self.unit, ascii=True)

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            if self.done >= self.total:
                self._bar.close()
            return
        now = time.perf_counter()
        if self.done >= self.total or now - self._last >= self.every:
            self.stream.write(self.text() + "\n")
            self.stream.flush()
            self._last = now

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# --------------------------------------------------------------------------- executors


def default_workers() -> int:
    """All the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _die_with_parent(parent: int) -> None:
    """Worker initializer: exit when the sweep's process dies, even by SIGKILL.

    On Linux the kernel sends SIGKILL at the parent's death (PR_SET_PDEATHSIG);
    elsewhere a daemon thread watches the parent's pid. Either way no worker outlives
    the sweep and races with the one that resumes it.
    """
    import signal
    import threading

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(1, signal.SIGKILL, 0, 0, 0) == 0  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        armed = False
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    if not armed:  # pragma: no cover - not Linux
        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()


def serial(pending) -> Iterator[dict]:
    """Run every spec in this process."""
    for spec in pending:
        yield execute_run(spec)


def local(pending, workers: int) -> Iterator[dict]:
    """Run the specs on `workers` forked processes (they inherit the compiled kernels)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        # keep a bounded number of runs in flight so an interrupt loses little
        it = iter(pending)
        inflight = {}
        try:
            while True:
                while len(inflight) < 4 * workers:
                    spec = next(it, None)
                    if spec is None:
                        break
                    inflight[pool.submit(execute_run, spec)] = spec
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    inflight.pop(fut)
                    try:
                        payload = fut.result()
                    except BrokenProcessPool as exc:
                        raise SweepError("a worker process died (out of memory or killed); finished runs "
                                         "are saved, re-run the same command to resume") from exc
                    yield payload
        finally:
            for fut in inflight:
                fut.cancel()


def dask(pending, scheduler: str) -> Iterator[dict]:
    """Run the specs on the Dask distributed cluster at `scheduler`."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ValueError("--scheduler needs dask.distributed: pip install 'echosim[dask]'") from None
    try:
        client = Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"cannot connect to the Dask scheduler at {scheduler!r}: {exc}") from None
    try:
        client.run(_warm_all)
        futures = client.map(execute_run, pending, key=[f"echosim-run-{s.run_id}" for s in pending])
        by_key = {f.key: s for f, s in zip(futures, pending)}
        for fut in as_completed(futures, loop=client.loop):
            spec = by_key[fut.key]
            try:
                payload = fut.result()
            except Exception as exc:  # noqa: BLE001 - worker lost etc.
                row = spec.params()
                row.update(status="failed", error=_one_line(exc), elapsed_s=math.nan, **store.provenance())
                payload = {"summary": row, "curves": None}
            yield payload
    finally:
        client.close()
