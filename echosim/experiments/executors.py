"""Executors: run pending specs serially, on local worker processes (which die with
their parent) or on a Dask cluster, and yield each payload as it finishes; progress.

Workers only compute: the sweep's process writes every result to the store, so
workers need no shared disk and a killed worker never leaves half a file. The unit
of work is a cell of runs that share a fresh-batch stream
(`echosim.experiments.assemble.execute_cell`): their fresh batches are generated once
for all of them, and each run's result is the same as alone.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator

from echosim.experiments import store
from echosim.experiments.assemble import _one_line, execute_cell, group_by_stream
from echosim.experiments.specs import SweepConfig

__all__ = ["SweepError", "default_workers", "serial", "local", "dask", "check_scheduler"]


class SweepError(RuntimeError):
    """The sweep itself could not go on (e.g. a worker process died); finished runs are kept."""


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
    the sweep and races with the one that resumes it. Ctrl-C (SIGINT to the whole
    process group) is the parent's to handle: a worker ignores it, so it prints no
    traceback of its own, and the parent stops the workers.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

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


def _tasks(pending) -> list[list]:
    """Cells of runs that share a fresh-batch stream, biggest first."""
    groups = group_by_stream(pending)
    groups.sort(key=lambda g: -g[0].optimizer["batch_size"] * g[0].run.get("n_batches", 1) * len(g))
    return groups


def serial(pending) -> Iterator[dict]:
    """Run every spec in this process."""
    for group in _tasks(pending):
        yield from execute_cell(group)


def local(pending, workers: int) -> Iterator[dict]:
    """Run the specs on `workers` forked processes (they inherit the compiled kernels)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        # keep a bounded number of groups in flight so an interrupt loses little
        it = iter(_tasks(pending))
        inflight = {}
        try:
            while True:
                while len(inflight) < 2 * workers:
                    group = next(it, None)
                    if group is None:
                        break
                    inflight[pool.submit(execute_cell, group)] = group
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    inflight.pop(fut)
                    try:
                        payloads = fut.result()
                    except BrokenProcessPool as exc:
                        raise SweepError("a worker process died (out of memory or killed); finished runs "
                                         "are saved, re-run the same command to resume") from exc
                    yield from payloads
        except BaseException:  # an interrupt (or the consumer gave up): stop the workers now
            _stop_workers(pool)
            raise
        finally:
            for fut in inflight:
                fut.cancel()


def _stop_workers(pool) -> None:
    """Kill a pool's worker processes and let it shut down without waiting for their groups."""
    for proc in list(getattr(pool, "_processes", {}).values()):  # CPython's pool keeps them here
        try:
            proc.kill()
        except (OSError, ValueError):  # already gone
            pass
    pool.shutdown(wait=False, cancel_futures=True)


SCHEDULER_SCHEMES = ("tcp", "tls")
CONNECT_SECONDS = 5.0
"""How long to wait for a TCP connection to a Dask scheduler's port (name lookup included)."""
HANDSHAKE_SECONDS = 10.0
"""...and then for Dask's own handshake with a scheduler that accepted the connection."""


def check_scheduler(address: str) -> str:
    """A Dask scheduler address, checked before any work: ``tcp://host:port`` (or
    ``tls://``, or ``host:port`` for tcp). Returns it with its scheme; ValueError otherwise."""
    import re

    if not isinstance(address, str):
        raise ValueError(f"scheduler: expected an address such as tcp://host:8786, got {address!r}")
    text = address.strip()
    scheme, sep, rest = text.rpartition("://")
    if not sep:
        scheme, rest = "tcp", text
    m = re.fullmatch(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})", rest)
    why = ""
    if scheme not in SCHEDULER_SCHEMES:
        why = f"the scheme must be {' or '.join(s + '://' for s in SCHEDULER_SCHEMES)}"
    elif m is None:
        why = "expected HOST:PORT after the scheme"
    elif not 1 <= int(m.group(2)) <= 65535:
        why = "the port must be 1 to 65535"
    if why:
        raise ValueError(f"scheduler: {address!r} is not a Dask scheduler address ({why}), e.g. tcp://host:8786")
    return f"{scheme}://{rest}"


def _reach(address: str, seconds: float) -> None:
    """ValueError unless a TCP connection to the scheduler's host and port opens within `seconds`
    (name lookup included), so that a wrong address fails in seconds, not after Dask's retries."""
    import socket
    import threading

    hostport = address.split("://", 1)[1]
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    outcome: list = []

    def probe():
        try:
            socket.create_connection((host, int(port)), timeout=seconds).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(exc.strerror or str(exc) or type(exc).__name__)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(seconds)
    if not outcome:
        raise ValueError(f"cannot connect to the Dask scheduler at {address!r}: no answer within {seconds:g} s")
    if outcome[0] is not None:
        raise ValueError(f"cannot connect to the Dask scheduler at {address!r}: {outcome[0]}")


def dask(pending, scheduler: str) -> Iterator[dict]:
    """Run the specs on the Dask distributed cluster at `scheduler`."""
    address = check_scheduler(scheduler)
    try:
        import importlib.util

        found = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):  # pragma: no cover - a broken install
        found = False
    if not found:
        raise ValueError("--scheduler needs dask.distributed: pip install 'echosim[dask]'")
    _reach(address, CONNECT_SECONDS)  # before importing distributed (seconds): a wrong address fails at once
    from distributed import Client, as_completed

    try:
        client = Client(address, timeout=f"{HANDSHAKE_SECONDS:g}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ValueError(f"cannot connect to the Dask scheduler at {address!r}: {exc}") from None
    try:
        client.run(_warm_parts, *_kernel_parts(None, runs=pending))
        groups = _tasks(pending)
        futures = client.map(execute_cell, groups, key=[f"echosim-cell-{g[0].run_id}" for g in groups])
        by_key = {f.key: g for f, g in zip(futures, groups)}
        for fut in as_completed(futures, loop=client.loop):
            try:
                payloads = fut.result()
            except Exception as exc:  # noqa: BLE001 - worker lost etc.
                payloads = []
                for spec in by_key[fut.key]:
                    row = spec.params()
                    row.update(status="failed", error=_one_line(exc), elapsed_s=math.nan, **store.provenance())
                    payloads.append({"summary": row, "curves": None})
            yield from payloads
    finally:
        client.close()


# --------------------------------------------------------------------------- warm-up


def warm_up(config: SweepConfig | None = None, workers: int = 1, announce=None) -> float:
    """Compile (or load from Numba's cache) every kernel the runs of `config` use; returns seconds.

    Called in a sweep's parent before forking workers (they inherit the compiled code),
    under Dask once on every worker, and by ``echosim run`` before its run. With
    `workers` ≥ 2 and the batch draws or the pipeline kernels not in Numba's on-disk
    cache yet, a helper process compiles them into it while this process compiles the
    optimizer kernel, and this process then loads them: two cores compile at once.
    Without a usable cache (or a helper) this process compiles them itself, as it
    would alone. `announce`: a stream told in one line when something must be compiled
    (the first run on a machine waits seconds for it).
    """
    t0 = time.perf_counter()
    dtypes, parts = _kernel_parts(config)
    cached = {p: _cached(p) for p in parts}
    if announce is not None and not all(cached.values()):
        print(compile_notice([p for p in parts if not cached[p]], dtypes), file=announce, flush=True)
    theirs = [p for p in parts if p in ("draws", "pipeline")]
    mine = [p for p in parts if p not in theirs]
    cold = workers > 1 and mine and not all(cached[p] for p in theirs)
    helper = _start_helper(theirs, dtypes) if cold else None
    _compile(mine, dtypes)
    if helper is not None:
        helper.join()
    _compile(theirs, dtypes)
    return time.perf_counter() - t0


def _part_words(part: str) -> str:
    """A kernel part (`_kernel_parts`) in words: "the echoed_gd optimizer on the logistic loss"."""
    if part == "draws":
        return "the synthetic problems' batch draws"
    if part == "pipeline":
        return "the pipeline simulator"
    method, loss, *rest = part.split(":")
    return f"the {method} optimizer on the {loss} loss" + (" (recording first-step losses)"
                                                           if "first_loss" in rest else "")


def compile_notice(parts, dtypes=("float64",)) -> str:
    """The line said before compiling: which kernels, and when they will have to compile again.

    Numba keeps the compiled code on disk (``NUMBA_CACHE_DIR``, else ``__pycache__`` next to
    the sources): a later run that uses the same kernels loads them in a fraction of a
    second; a method, loss or dtype not compiled before compiles its own, and everything
    compiles again after echosim or Numba is upgraded or the cache directory changes.
    """
    what = ", ".join(_part_words(p) for p in parts) or "the kernels"
    kinds = "/".join(dtypes)
    return (f"compiling Numba kernels ({kinds}): {what}; seconds now, then loaded from Numba's disk cache by later "
            "runs that use them, until echosim or Numba is upgraded or NUMBA_CACHE_DIR changes")


def _kernel_parts(config: SweepConfig | None, runs=None) -> tuple[tuple, list]:
    """(dtypes, parts) the runs of `config` (or `runs`, specs) use: the optimizer kernel of
    each method and loss (`echosim.training.runner.kernel_key`: sweeps run every group
    through `run_many`), "draws" (synthetic batches), "pipeline"; for `config` None the
    default sweep's."""
    from echosim.experiments.assemble import is_coupled
    from echosim.experiments.specs import loss_of
    from echosim.training.runner import kernel_key

    if config is None and runs is None:
        from echosim.experiments.config import default_config

        config = default_config()
    runs = list(config.runs if runs is None else runs)
    dtypes = tuple(sorted({r.run.get("dtype", "float64") for r in runs})) or ("float64",)
    # a run under a coupled policy ("auto") goes through `run_coupled`: one optimizer, first-step losses
    parts = list(dict.fromkeys(kernel_key(r.optimizer["method"], loss_of(r.problem), many=not coupled,
                                          first_loss=coupled)
                               for r in runs for coupled in [is_coupled(r)]))
    parts += ["draws"] * any(r.problem["kind"] != "dataset" for r in runs)
    parts += ["pipeline"] * any(r.pipeline is not None for r in runs)
    return dtypes, parts


def _cached(part: str) -> bool:
    """Whether Numba's on-disk cache holds code compiled from the current source of `part`'s
    main kernel (a guess, used only to skip forking a helper that would merely load it,
    forking costs ~0.1 s, and to say when compiling starts: see the kernels' `kernel_cached`)."""
    if part != "pipeline":
        from echosim.training.runner import kernel_cached

        return kernel_cached(part)
    from echosim.pipeline.kernel import kernel_cached

    return kernel_cached()


def _compile(parts, dtypes) -> None:
    from echosim.training.runner import compile_kernels

    compile_kernels(dtypes, kernels=[p for p in parts if p != "pipeline"])
    if "pipeline" in parts:
        from echosim.pipeline.model import Pipeline
        from echosim.pipeline.schedule import simulate

        simulate(Pipeline(1.0, policy="fixed", echo=1.0), n_batches=2, seed=0)


def _compile_in_helper(parent: int, parts, dtypes) -> None:
    _die_with_parent(parent)
    _compile(parts, dtypes)


def _start_helper(parts, dtypes):
    """A forked process that compiles `parts` into Numba's cache, or None where there is no fork."""
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():
        return None
    helper = multiprocessing.get_context("fork").Process(target=_compile_in_helper, daemon=True,
                                                         args=(os.getpid(), parts, dtypes))
    try:
        helper.start()
    except (AssertionError, OSError):  # a daemon process may not have children; no more processes
        return None
    return helper


def _warm_parts(dtypes, parts):  # for Dask workers: compile what the pending runs use
    _compile(parts, dtypes)
