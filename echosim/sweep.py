"""Sweeps: a validated config → runs → shards → merged tables, on local processes or Dask.

`run_sweep` executes every run of a `SweepConfig` that has no shard yet under the
output directory (so re-running the same command resumes), then merges all of them.
Local execution forks worker processes after the Numba kernels were compiled in the
parent (they inherit the compiled code); ``scheduler=`` sends the same runs to an
existing Dask distributed cluster instead. A run's result depends only on its spec
(seeds are derived from its data-defining axes, see `echosim.config`), so the tables
are bitwise identical with 1 worker, N workers or Dask — except ``elapsed_s``, the
run's own wall time.

`execute_run` is the unit of work: build the problem, optimizer and pipeline, simulate
the schedule, run the optimizer, and return a payload of plain dicts and arrays.
Exceptions become a "failed" payload carrying the error, never a result.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from echosim import results
from echosim.config import SweepConfig, build_optimizer, build_pipeline, build_problem

__all__ = ["execute_run", "run_sweep", "estimate", "warm_up", "SweepReport", "SweepError", "Progress",
           "format_tuned", "regime_check", "default_workers"]


class SweepError(RuntimeError):
    """The sweep itself could not go on (e.g. a worker process died); finished runs are kept."""


# --------------------------------------------------------------------------- one run


def _log_every(spec_run: dict, T: int) -> int:
    every = spec_run.get("log_every", "auto")
    if every == "auto":
        return max(1, math.ceil(T / 2000))
    return int(every)


def _batch_time(pipeline) -> float:
    """Rough wall-clock per fresh batch, to size a time-budget simulation."""
    load = pipeline.arrival.mean / pipeline.workers
    steps = pipeline.echo if pipeline.policy in ("fixed", "example") else 1.0
    per_step = pipeline.step_time.mean + (pipeline.switch_overhead if pipeline.policy == "example" else 0.0)
    return max(load, steps * per_step + (0.0 if pipeline.policy == "example" else pipeline.switch_overhead))


def simulate_budget(pipeline, budget: float, seed: int, batch_size: int | None = None):
    """Simulate a pipeline for a wall-clock budget; returns (schedule, steps done by the budget).

    The schedule is simulated for a deterministic number of fresh batches (doubled
    until it runs past the budget); the run keeps the steps that end by `budget`, so
    its last batch may have fewer steps than the policy planned.
    """
    from echosim.pipeline import simulate

    T = math.ceil(1.25 * budget / _batch_time(pipeline)) + 16
    while True:
        schedule = simulate(pipeline, T, seed=seed, batch_size=batch_size)
        if schedule.makespan > budget:
            break
        if T > 50_000_000:
            raise ValueError(f"time_budget={budget:g} needs more than {T} fresh batches")
        T *= 2
    n = int(np.searchsorted(schedule.step_end, budget, side="right"))
    if n == 0:
        raise ValueError(f"time_budget={budget:g}: no optimizer step ends within the budget "
                         f"(the first ends at {schedule.step_end[0]:.4g})")
    return schedule, n


def truncate_schedule(schedule, n: int):
    """The first `n` steps of a Schedule, with the fresh batches they use (for run())."""
    import dataclasses

    used = int(schedule.step_batch[n - 1]) + 1
    spb = np.bincount(schedule.step_batch[:n], minlength=used).astype(np.int64)
    ex = None if schedule.step_examples is None else schedule.step_examples[:n]
    return dataclasses.replace(
        schedule, ready_time=schedule.ready_time[:used], steps_per_batch=spb, step_start=schedule.step_start[:n],
        step_end=schedule.step_end[:n], step_batch=schedule.step_batch[:n], step_examples=ex,
        enter_time=schedule.enter_time[:used], take_time=schedule.take_time[:used],
        busy_time=float(np.sum(schedule.step_end[:n] - schedule.step_start[:n])))


def _simulate_run(spec) -> tuple[dict, dict]:
    from echosim.experiment import run
    from echosim.pipeline import simulate

    problem = build_problem(spec.problem).memoize_batches()
    optimizer = build_optimizer(spec.optimizer)
    B = spec.optimizer["batch_size"]
    info: dict = {}
    if spec.pipeline is None:
        T = spec.run["n_batches"]
        echo = np.full(T, int(spec.optimizer["echo"]), dtype=np.int64)
    else:
        pipeline = build_pipeline(spec.pipeline)
        by_example = pipeline.policy == "example"
        if "time_budget" in spec.run:
            full, n = simulate_budget(pipeline, spec.run["time_budget"], spec.pipeline_seed,
                                      batch_size=B if by_example else None)
            schedule = truncate_schedule(full, n)
            info.update({f"schedule.{k}": v for k, v in full.summary().items()})
        else:
            schedule = simulate(pipeline, spec.run["n_batches"], seed=spec.pipeline_seed,
                                batch_size=B if by_example else None)
            info.update({f"schedule.{k}": v for k, v in schedule.summary().items()})
        echo = schedule
    T = echo.n_batches if spec.pipeline is not None else T
    # log points are in fresh batches, or in steps under example echoing (run()'s unit)
    units = echo.n_steps if spec.pipeline is not None and echo.step_examples is not None else T
    every = _log_every(spec.run, units)
    logs = np.arange(every, units + 1, every, dtype=np.int64)
    traj = run(problem, optimizer, batch_size=B, echo=echo, n_batches=T if spec.pipeline is None else None,
               seed=spec.seed, dtype=spec.run.get("dtype", "float64"), log=logs)
    steps = np.asarray(traj.steps, dtype=np.int64)
    t = np.full(len(steps), np.nan) if traj.time is None else np.asarray(traj.time, dtype=np.float64)
    n_steps = int(echo.sum()) if spec.pipeline is None else int(echo.n_steps)
    curves = {
        "batches": np.asarray(traj.batches, dtype=np.int64),
        "steps": steps,
        "samples": np.asarray(traj.batches, dtype=np.int64) * B,
        "time": t,
        "risk": np.asarray(traj.risk, dtype=np.float64),
        "risk_avg": np.asarray(traj.risk_avg, dtype=np.float64),
        "risk_end_avg": np.asarray(traj.risk_end_avg, dtype=np.float64),
    }
    const = problem.constants()
    last = len(steps) > 0
    info.update(
        status=traj.status,
        error="",
        diverged_at=math.nan if traj.diverged_at is None else float(traj.diverged_at),
        n_batches=int(T),
        n_steps=n_steps,
        mean_echo=n_steps / T,
        final_batches=int(curves["batches"][-1]) if last else 0,
        final_risk=float(curves["risk"][-1]) if last else math.nan,
        final_risk_avg=float(curves["risk_avg"][-1]) if last else math.nan,
        final_risk_end_avg=float(curves["risk_end_avg"][-1]) if last else math.nan,
        final_time=float(t[-1]) if last else math.nan,
        F_star=float(problem.F_star),
        beta=float(const["beta"]),
        rho=float(const["rho"]),
        D=float(const["D"]),
        constants_kind=str(getattr(problem, "constants_kind", "")),
    )
    return info, curves


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return text[:500]


def execute_run(spec) -> dict:
    """Run one spec; returns ``{"summary": row dict, "curves": dict of arrays or None}``.

    Never raises for a run's own errors: an exception gives status "failed" and its
    message in ``error`` (and no curves).
    """
    t0 = time.perf_counter()
    row = spec.params()
    curves = None
    try:
        info, curves = _simulate_run(spec)
        row.update(info)
    except Exception as exc:  # noqa: BLE001 - a failed run is data, not a crash
        row.update(status="failed", error=_one_line(exc))
    row["elapsed_s"] = time.perf_counter() - t0
    row.update(results.provenance())
    return {"summary": row, "curves": curves}


def _execute_and_write(spec, out) -> dict:
    payload = execute_run(spec)
    results.write_run(out, payload)
    return payload


# --------------------------------------------------------------------------- warm-up


def warm_up(config: SweepConfig | None = None) -> float:
    """Compile (or load from Numba's cache) every kernel the sweep needs; returns seconds.

    Called in the parent before forking workers (they inherit the compiled code) and,
    under Dask, once on every worker.
    """
    from echosim.experiment import compile_kernels

    t0 = time.perf_counter()
    dtypes = {"float64"}
    pipelines = True
    if config is not None:
        dtypes = {r.run.get("dtype", "float64") for r in config.runs} or {"float64"}
        pipelines = any(r.pipeline is not None for r in config.runs)
    compile_kernels(tuple(sorted(dtypes)))
    if pipelines:
        from echosim.pipeline import Pipeline, simulate

        simulate(Pipeline(1.0, policy="fixed", echo=1.0), n_batches=2, seed=0)
    return time.perf_counter() - t0


def _warm_all():  # for Dask workers
    return warm_up(None)


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
                row.update(status="failed", error=_one_line(exc), elapsed_s=math.nan, **results.provenance())
                payload = {"summary": row, "curves": None}
            results.write_run(out, payload)  # written by the client: workers need no shared disk
            payloads[spec.run_id] = payload
            on_done(payload)
            progress.update()
    finally:
        client.close()


# --------------------------------------------------------------------------- the sweep


@dataclass
class SweepReport:
    """What `run_sweep` did and the merged tables."""

    out: Path
    n_runs: int
    n_new: int
    n_resumed: int
    counts: dict
    elapsed: float
    compile_seconds: float
    workers: int
    scheduler: str | None
    summary: object = field(repr=False)
    tuned: object = field(repr=False)
    curves_table: object = field(repr=False, default=None)
    note: str = ""

    @property
    def curves(self):
        """The curves table as a pandas DataFrame (converted on first use)."""
        if not hasattr(self, "_curves_df"):
            self._curves_df = None if self.curves_table is None else self.curves_table.to_pandas()
        return self._curves_df


def _prepare_out(config: SweepConfig, out: Path) -> str:
    """Create `out`; say so if it held another config's results (their shards are reused)."""
    out.mkdir(parents=True, exist_ok=True)
    note = ""
    old = results.read_manifest(out)
    if old and old.get("config_hash") != config.config_hash:
        note = (f"note: {out} held the results of another config ({old.get('name')}, "
                f"{str(old.get('config_hash'))[:10]}); its shards are kept and reused where run ids match, "
                "its merged tables are replaced")
    results.clean_temp(out)
    return note


def _manifest(config: SweepConfig, counts: dict, complete: bool) -> dict:
    return {
        "schema": results.RESULTS_SCHEMA,
        "name": config.name,
        "config_hash": config.config_hash,
        "source": config.source,
        "overrides": list(config.overrides),
        "config_text": config.text,
        "settings": config.settings,
        "axes": list(config.axes),
        "n_runs": len(config.runs),
        "run_ids": [r.run_id for r in config.runs],
        "counts": counts,
        "complete": complete,
        "provenance": results.provenance(),
    }


def run_sweep(config: SweepConfig, out=None, *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, stream=None, on_done=None) -> SweepReport:
    """Run every unfinished run of `config`, then merge all of them.

    Parameters
    ----------
    config : a validated `SweepConfig` (see `echosim.config.load_config`).
    out : results directory (default ``config.default_out()``, derived from the
        config's hash, so another config never lands in it by default).
    workers : local worker processes (default: all cores; 1 runs in this process).
    scheduler : address of a Dask distributed scheduler; runs go there instead.
    progress : show progress on `stream` (default stderr).
    on_done : called with each finished run's payload, as it is written.
    """
    t0 = time.perf_counter()
    stream = stream if stream is not None else sys.stderr
    out = Path(out) if out is not None else config.default_out()
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers}")
    note = _prepare_out(config, out)
    if note and progress:
        print(note, file=stream)
    done = results.finished_ids(out)
    pending = [r for r in config.runs if r.run_id not in done]
    results.write_manifest(out, _manifest(config, {"pending": len(pending)}, complete=False))
    payloads: dict = {}
    compile_s = 0.0
    # runs that share their fresh batches (same data seed) run back to back, so each
    # worker's batch cache serves them, and the biggest batches go first, so the last
    # runs to finish are short ones; the order changes no result
    pending.sort(key=lambda r: (-r.optimizer["batch_size"] * r.run.get("n_batches", 1), r.seed, r.run_id))
    if pending:
        compile_s = warm_up(config) if scheduler is None else 0.0
        bar = Progress(len(pending), stream=stream, enabled=progress)
        on_done = on_done or (lambda payload: None)
        if scheduler is not None:
            _run_dask(pending, out, scheduler, bar, payloads, on_done)
        elif workers == 1 or len(pending) == 1:
            _run_serial(pending, out, bar, payloads, on_done)
        else:
            _run_local(pending, out, min(workers, len(pending)), bar, payloads, on_done)
    merged = results.merge(out, [r.run_id for r in config.runs], config.settings, payloads=payloads,
                           curves_as="arrow")
    counts = {s: int((merged.summary["status"] == s).sum()) if len(merged.summary) else 0
              for s in ("ok", "diverged", "failed")}
    counts["missing"] = len(config.runs) - sum(counts.values())
    complete = counts["failed"] == 0 and counts["missing"] == 0
    results.write_manifest(out, _manifest(config, counts, complete=complete))
    return SweepReport(out=out, n_runs=len(config.runs), n_new=len(pending), n_resumed=len(config.runs) - len(pending),
                       counts=counts, elapsed=time.perf_counter() - t0, compile_seconds=compile_s,
                       workers=workers, scheduler=scheduler, summary=merged.summary, tuned=merged.tuned,
                       curves_table=merged.curves, note=note)


# --------------------------------------------------------------------------- estimate


def _cost_units(spec) -> float:
    """Cost proxy of one run: data and gradient work T·B·d·(1 + 2K), per logged point, per run."""
    problem = build_problem(spec.problem)
    d = problem.dim
    B = spec.optimizer["batch_size"]
    if "n_batches" in spec.run:
        T = spec.run["n_batches"]
    else:
        T = spec.run["time_budget"] / _batch_time(build_pipeline(spec.pipeline))
    if spec.pipeline is not None and spec.pipeline["policy"] == "greedy":
        p = build_pipeline(spec.pipeline)
        K = min(p.max_echo, max(1.0, p.arrival.mean / p.workers / p.step_time.mean))
    else:
        K = float(spec.optimizer.get("echo", 1))
    points = T / _log_every(spec.run, max(1, int(T)))
    n_data = getattr(problem, "X", None)
    risk_cost = 3 * (n_data.shape[0] * d if n_data is not None else 300)
    return T * B * d * (1 + 2 * K) + points * risk_cost + 20_000


def estimate(config: SweepConfig, out=None, workers: int | None = None) -> dict:
    """Predicted wall time of the runs still to do.

    Method: a cost model in T·B·d·(1 + 2K) plus per-logged-point and per-run terms,
    calibrated by timing shortened copies (at most 200 fresh batches) of the grid's
    cheapest and most expensive runs; compile time is measured separately. Runs with a
    shard under `out` are not counted.
    """
    import dataclasses

    workers = default_workers() if workers is None else int(workers)
    out = Path(out) if out is not None else config.default_out()
    done = results.finished_ids(out)
    pending = [r for r in config.runs if r.run_id not in done]
    compile_s = warm_up(config)
    if not pending:
        return {"n_runs": len(config.runs), "n_pending": 0, "seconds": 0.0, "compile_seconds": compile_s,
                "workers": workers, "method": "nothing to run"}
    units = np.array([_cost_units(r) for r in pending])
    picks = sorted({int(np.argmin(units)), int(np.argmax(units))})
    t_sum = u_sum = 0.0
    for i in picks:
        spec = pending[i]
        run = dict(spec.run)
        if "n_batches" in run:
            run["n_batches"] = min(run["n_batches"], 200)
        else:
            T = run.pop("time_budget") / _batch_time(build_pipeline(spec.pipeline))
            run["n_batches"] = int(min(max(T, 1), 200))
        short = dataclasses.replace(spec, run=run)
        t = time.perf_counter()
        execute_run(short)
        t_sum += time.perf_counter() - t
        u_sum += _cost_units(short)
    kappa = t_sum / u_sum
    w = min(workers, len(pending))
    seconds = kappa * units.sum() / w
    return {"n_runs": len(config.runs), "n_pending": len(pending), "seconds": float(seconds),
            "compile_seconds": compile_s, "workers": w,
            "method": ("cost model T·B·d·(1+2K) + per-point + per-run terms, calibrated by timing "
                       f"{len(picks)} shortened runs of the grid")}


# --------------------------------------------------------------------------- reporting


def _fmt(v, digits=4) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        if math.isinf(v):
            return "never"
        if v == int(v) and abs(v) < 1e9:
            return str(int(v))
        return f"{v:.{digits}g}"
    return str(v)


def format_tuned(tuned, config: SweepConfig) -> str:
    """The tuned table as aligned text: per setting, lr* and the median times to target."""
    if tuned is None or len(tuned) == 0:
        return "(no results)"
    vary = []
    for a in config.axes:  # an axis inside a service-time table shows as its table's column
        col = a if a in tuned.columns else ".".join(a.split(".")[:2])
        if a != "optimizer.lr" and col in tuned.columns and col not in vary:
            vary.append(col)
    # batch size first, echo factor last: the rows read like the paper's Figure 2 panels
    vary.sort(key=lambda c: (c != "optimizer.batch_size", c == "optimizer.echo"))
    if vary:
        tuned = tuned.sort_values(vary, kind="stable", na_position="last")
    short = {"optimizer.batch_size": "B", "optimizer.echo": "K", "sweep.n_batches": "T_max",
             "sweep.time_budget": "budget", "optimizer.method": "method", "pipeline.policy": "policy"}
    cols = [(short.get(a, a.split(".", 1)[1]), a) for a in vary]
    has_time = "conv_time" in tuned.columns and tuned["conv_time"].notna().any()
    header = [c for c, _ in cols] + ["lr*", "T to target", "KT steps", "BT samples"]
    header += ["wall-clock"] if has_time else []
    header += ["converged"]
    lines = []
    for _, r in tuned.iterrows():
        lr = r["optimizer.lr"]
        lr_s = _fmt(lr, 3) + ("^" if r.get("lr_edge") == "high" else "_" if r.get("lr_edge") == "low" else "")
        if isinstance(lr, float) and math.isnan(lr):
            lr_s = "none"
        row = [_fmt(r[a]) for _, a in cols] + [lr_s, _fmt(r["conv_batches"]), _fmt(r["conv_steps"]),
                                                 _fmt(r["conv_samples"])]
        row += [_fmt(r["conv_time"])] if has_time else []
        row += [f"{r['n_converged']}/{r['n_seeds']}"]
        lines.append(row)
    widths = [max(len(h), *(len(l[i]) for l in lines)) for i, h in enumerate(header)]
    fmt = "  ".join("{:>%d}" % w for w in widths)
    text = [fmt.format(*header), fmt.format(*["-" * w for w in widths])]
    text += [fmt.format(*l) for l in lines]
    s = config.settings
    target = (f"trailing mean of the last {s['window']} logged losses <= (1 + {s['rtol']:g}) F*"
              if s.get("rtol") is not None else f"trailing mean of {s['window']} excess risks <= {s['atol']:g}")
    notes = [f"median over {config.settings['repetitions']} seed(s) at the tuned lr; target: {target} "
             f"({s['iterate']} iterate); lr tuned by {s['tune_by']}; 'never': not reached within the budget"]
    if (tuned["lr_edge"] != "").any():
        notes.append("^/_: the tuned lr is the largest/smallest of the grid (widen the lr grid to be sure)")
    return "\n".join(text + notes)


def regime_check(tuned, summary=None, rtol: float | None = 0.01) -> str:
    """Per batch size: fit T(K) ≈ a/K + c to the tuned times, K_sat = a/c, next to the theory's K_sat.

    The theory's K_sat = βBε/(16ρ²) (``theory.saturation_echo``, digest §3.7) is
    evaluated with the problem's worst-case constants, ε = rtol·F*, and β replaced by
    1/η_max when the grid's largest lr is below 1/β (the step, not the smoothness,
    then limits progress). Both grow linearly in B; the fitted values say where the
    simulation actually puts the boundary.
    """
    import theory
    from echosim.metrics import fit_saturation, regime

    need = {"optimizer.batch_size", "optimizer.echo", "conv_batches"}
    if tuned is None or not need <= set(tuned.columns):
        return ""
    lines, fitted, predicted = [], {}, {}

    def num(v):
        return "0" if abs(v) < 1e-6 else f"{v:.3g}"

    for B, g in tuned.groupby("optimizer.batch_size", sort=True):
        g = g[g["optimizer.echo"].notna()].sort_values("optimizer.echo").drop_duplicates("optimizer.echo")
        if len(g) < 3:
            continue
        K = g["optimizer.echo"].to_numpy(dtype=float)
        T = g["conv_batches"].to_numpy(dtype=float)
        fit = fit_saturation(K, T)
        fitted[B] = fit["K_sat"]
        j = min(3, len(K) - 1)
        ratio = _fmt(T[-1] / T[0], 3) if np.isfinite(T[[0, -1]]).all() else "-"
        kt = _fmt(K[j] * T[j] / (K[0] * T[0]), 3) if np.isfinite(T[[0, j]]).all() else "-"
        lines.append(f"  B={int(B)}: T(K={K[-1]:g})/T(K={K[0]:g}) = {ratio}, KT(K={K[j]:g})/KT(K={K[0]:g}) = {kt}; "
                     f"fit T ≈ {num(fit['a'])}/K + {num(fit['c'])}, K_sat = {num(fit['K_sat'])} "
                     f"-> {regime(fit['K_sat'], K[-1])}")
        if summary is not None and len(summary) and {"beta", "rho", "F_star"} <= set(summary.columns):
            rows = summary[(summary["optimizer.batch_size"] == B) & summary["beta"].notna()]
            if len(rows):
                r0 = rows.iloc[0]
                lr_max = float(summary["optimizer.lr"].max())
                beta = max(float(r0["beta"]), 1.0 / lr_max) if lr_max > 0 else float(r0["beta"])
                eps = (rtol if rtol is not None else 0.01) * float(r0["F_star"])
                predicted[B] = float(theory.saturation_echo(eps=eps, beta=beta, rho=float(r0["rho"]), B=float(B)))
    if not lines:
        return ""
    head = "regime check (digest §3.7: fit T(K) ≈ a/K + c per B; K_sat = a/c, where the curvature and noise terms are equal):"
    if predicted:
        th = ", ".join(f"{v:.2g} (B={int(b)})" for b, v in predicted.items())
        lines.append(f"  theory.saturation_echo(ε = rtol·F*, β_eff = max(β, 1/η_max), ρ): K_sat = {th}")
        big = max(predicted)
        if big in fitted and math.isfinite(fitted[big]) and predicted[big] > 0:
            lines.append(f"  both grow with B; at B={int(big)} the simulation's K_sat is {fitted[big] / predicted[big]:.3g}x "
                         "the theory's (worst-case ρ and D make the bound's noise term pessimistic)")
    return head + "\n" + "\n".join(lines)
