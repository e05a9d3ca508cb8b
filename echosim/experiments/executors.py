"""Executors: run pending specs serially, on local worker processes (which die with
their parent), or on a Dask cluster, writing each result as it finishes; progress."""

from __future__ import annotations

import math
import os
import sys
import time


from echosim.experiments import store
from echosim.experiments.assemble import _execute_and_write, _one_line, _warm_all, execute_run

__all__ = ["SweepError", "Progress", "default_workers"]


class SweepError(RuntimeError):
    """The sweep itself could not go on (e.g. a worker process died); finished runs are kept."""


# --------------------------------------------------------------------------- progress


class Progress:
    """done/total, elapsed, ETA: a redrawn bar on a terminal, plain periodic lines otherwise."""

    def __init__(self, total: int, stream=None, enabled: bool = True, every: float = 10.0, label: str = "runs"):
        self.total = total
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.label = label
        self.t0 = time.perf_counter()
        self._last = -math.inf if self.tty else self.t0  # plain lines: the first after `every` seconds

    @staticmethod
    def _clock(s: float) -> str:
        if not math.isfinite(s):
            return "--:--"
        s = int(round(s))
        return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"

    def text(self) -> str:
        elapsed = time.perf_counter() - self.t0
        eta = elapsed / self.done * (self.total - self.done) if self.done else math.inf
        return f"{self.done}/{self.total} {self.label}  elapsed {self._clock(elapsed)}  ETA {self._clock(eta)}"

    def update(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        final = self.done >= self.total
        if self.tty:
            if final or now - self._last >= 0.1:
                width = 24
                filled = int(width * self.done / self.total)
                bar = "#" * filled + "-" * (width - filled)
                self.stream.write(f"\r[{bar}] {self.text()}\x1b[K")
                if final:
                    self.stream.write("\n")
                self.stream.flush()
                self._last = now
        elif final or now - self._last >= self.every:
            self.stream.write(self.text() + "\n")
            self.stream.flush()
            self._last = now


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


def _run_serial(pending, out, progress, payloads, on_done):
    for spec in pending:
        payloads[spec.run_id] = _execute_and_write(spec, out)
        on_done(payloads[spec.run_id])
        progress.update()


def _run_local(pending, out, workers, progress, payloads, on_done):
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
        limit = 4 * workers
        try:
            while True:
                while len(inflight) < limit:
                    spec = next(it, None)
                    if spec is None:
                        break
                    inflight[pool.submit(_execute_and_write, spec, out)] = spec
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    spec = inflight.pop(fut)
                    try:
                        payloads[spec.run_id] = fut.result()
                    except BrokenProcessPool as exc:
                        raise SweepError("a worker process died (out of memory or killed); finished runs "
                                         "are saved, re-run the same command to resume") from exc
                    on_done(payloads[spec.run_id])
                    progress.update()
        except BaseException:
            for fut in inflight:
                fut.cancel()
            raise


def _run_dask(pending, out, scheduler, progress, payloads, on_done):
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
            store.write_run(out, payload)  # written by the client: workers need no shared disk
            payloads[spec.run_id] = payload
            on_done(payload)
            progress.update()
    finally:
        client.close()


