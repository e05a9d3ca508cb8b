"""Sweeps: a validated config → runs → shards → merged tables, on local processes or Dask.

`run_sweep` executes every run of a `SweepConfig` that has no shard yet under the
output directory (so re-running the same command resumes), then merges all of them.
Local execution forks worker processes after the Numba kernels were compiled in the
parent (they inherit the compiled code); ``scheduler=`` sends the same runs to an
existing Dask distributed cluster instead. A run's result depends only on its spec
(seeds are derived from its data-defining axes, see `echosim.experiments.config`), so the tables
are bitwise identical with 1 worker, N workers or Dask — except ``elapsed_s``, the
run's own wall time.

`execute_run` is the unit of work: build the problem, optimizer and pipeline, simulate
the schedule, run the optimizer, and return a payload of plain dicts and arrays.
Exceptions become a "failed" payload carrying the error, never a result.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from echosim.experiments import store
from echosim.experiments.assemble import _log_every, execute_run, warm_up
from echosim.pipeline.schedule import mean_batch_time
from echosim.experiments.executors import Progress, _run_dask, _run_local, _run_serial, default_workers
from echosim.experiments.specs import SweepConfig, build_pipeline, build_problem

__all__ = ["run_sweep", "estimate", "SweepReport"]


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
    old = store.read_manifest(out)
    if old and old.get("config_hash") != config.config_hash:
        note = (f"note: {out} held the results of another config ({old.get('name')}, "
                f"{str(old.get('config_hash'))[:10]}); its shards are kept and reused where run ids match, "
                "its merged tables are replaced")
    store.clean_temp(out)
    return note


def _manifest(config: SweepConfig, counts: dict, complete: bool) -> dict:
    return {
        "schema": store.RESULTS_SCHEMA,
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
        "provenance": store.provenance(),
    }


def run_sweep(config: SweepConfig, out=None, *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, stream=None, on_done=None) -> SweepReport:
    """Run every unfinished run of `config`, then merge all of them.

    Parameters
    ----------
    config : a validated `SweepConfig` (see `echosim.experiments.config.load_config`).
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
    done = store.finished_ids(out)
    pending = [r for r in config.runs if r.run_id not in done]
    store.write_manifest(out, _manifest(config, {"pending": len(pending)}, complete=False))
    payloads: dict = {}
    compile_s = 0.0
    # runs that share their fresh batches (same data seed) run back to back, so each
    # worker's batch cache serves them, and the biggest batches go first, so the last
    # runs to finish are short ones; the order changes no result
    pending.sort(key=lambda r: (-r.optimizer["batch_size"] * r.run.get("n_batches", 1), r.seed, r.run_id))
    used = 1 if workers == 1 or len(pending) <= 1 else min(workers, len(pending))  # processes actually started
    if pending:
        compile_s = warm_up(config) if scheduler is None else 0.0
        bar = Progress(len(pending), stream=stream, enabled=progress)
        on_done = on_done or (lambda payload: None)
        if scheduler is not None:
            _run_dask(pending, out, scheduler, bar, payloads, on_done)
        elif workers == 1 or len(pending) == 1:
            _run_serial(pending, out, bar, payloads, on_done)
        else:
            _run_local(pending, out, used, bar, payloads, on_done)
    merged = store.merge(out, [r.run_id for r in config.runs], config.settings, payloads=payloads,
                           curves_as="arrow")
    counts = {s: int((merged.summary["status"] == s).sum()) if len(merged.summary) else 0
              for s in ("ok", "diverged", "failed")}
    counts["missing"] = len(config.runs) - sum(counts.values())
    complete = counts["failed"] == 0 and counts["missing"] == 0
    store.write_manifest(out, _manifest(config, counts, complete=complete))
    return SweepReport(out=out, n_runs=len(config.runs), n_new=len(pending), n_resumed=len(config.runs) - len(pending),
                       counts=counts, elapsed=time.perf_counter() - t0, compile_seconds=compile_s,
                       workers=used, scheduler=scheduler, summary=merged.summary, tuned=merged.tuned,
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
        T = spec.run["time_budget"] / mean_batch_time(build_pipeline(spec.pipeline, spec.echo))
    if spec.pipeline is not None and spec.pipeline["policy"] == "greedy":
        p = build_pipeline(spec.pipeline, spec.echo)
        K = min(p.max_echo, max(1.0, p.arrival.mean / p.workers / p.step_time.mean))
    else:
        K = float(spec.echo or 1)
    points = T / _log_every(spec.run, max(1, int(T)))
    n_data = getattr(problem, "X", None)
    risk_cost = 3 * (n_data.shape[0] * d if n_data is not None else 300)
    return T * B * d * (1 + 2 * K) + points * risk_cost + 20_000


_CALIBRATION_UNITS = 2e7
"""Cost units of one calibration run (about 0.1-0.5 s here), so --dry-run stays quick."""


def _calibration_copy(spec):
    """`spec` shortened (fewer batches, then a smaller fixed K) to at most _CALIBRATION_UNITS."""
    import dataclasses

    units = _cost_units(spec)
    T = spec.run["n_batches"]
    if units > _CALIBRATION_UNITS and T > 1:
        run = dict(spec.run, n_batches=max(1, int(T * _CALIBRATION_UNITS / units)))
        spec = dataclasses.replace(spec, run=run)
        units = _cost_units(spec)
    policy = None if spec.pipeline is None else spec.pipeline["policy"]
    if units > _CALIBRATION_UNITS and policy in (None, "fixed", "example") and (spec.echo or 1) > 1:
        K = max(1, int((spec.echo or 1) * _CALIBRATION_UNITS / units))
        spec = dataclasses.replace(spec, echo=K)
    return spec


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
    done = store.finished_ids(out)
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
            T = run.pop("time_budget") / mean_batch_time(build_pipeline(spec.pipeline, spec.echo))
            run["n_batches"] = int(min(max(T, 1), 200))
        short = _calibration_copy(dataclasses.replace(spec, run=run))
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


