"""Sweeps: a validated config → runs → the run store → merged tables, on local processes or Dask.

`run_sweep` executes every run of a `SweepConfig` that the run store does not hold
yet (whichever sweep computed it: re-running resumes), extends the learning-rate grid
past any edge where a tuned value sits, then merges all runs into the sweep's tables.
Local execution forks worker processes after the Numba kernels were compiled in the
parent (they inherit the compiled code); ``scheduler=`` sends the same work to an
existing Dask distributed cluster instead. A run's result depends only on its spec
(seeds are derived from its data-defining axes, see `echosim.experiments.specs`), so
the tables are bitwise identical with 1 worker, N workers or Dask — except
``elapsed_s``, the run's own wall time.

The unit of work is `echosim.experiments.assemble.execute_cell`: the runs that share a
fresh-batch stream (problem, B, data seed, dtype), whatever their learning rate, K or
method, advanced side by side over one draw of each batch. Exceptions become a
"failed" payload carrying the error, never a result.
"""

from __future__ import annotations

import math
import os
import sys
import time
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from echosim.experiments import store, tables
from echosim.experiments.assemble import _log_at, execute_group, group_by_stream, group_key
from echosim.pipeline.model import POLICIES
from echosim.pipeline.schedule import mean_batch_time
from echosim.experiments import executors
from echosim.experiments.executors import default_workers
from echosim.experiments.progress import Progress
from echosim.experiments.specs import SweepConfig, build_pipeline, build_problem

__all__ = ["run_sweep", "estimate", "SweepReport", "require_extras"]


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
    """The Dask scheduler the runs went to; None if none was contacted (every run was
    in the store, or they ran locally)."""
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

    def __repr__(self) -> str:
        c = self.counts
        return (f"SweepReport(out={str(self.out)!r}, runs={self.n_runs} ({self.n_new} new, {self.n_resumed} resumed), "
                f"ok={c.get('ok', 0)}, diverged={c.get('diverged', 0)}, failed={c.get('failed', 0)}, "
                f"elapsed='{self.elapsed:.1f} s')")

    def in_words(self) -> list[str]:
        """One plain sentence per batch size: what echoing buys, at which K (see `report.in_words`)."""
        from echosim.experiments.report import in_words

        return in_words(self.tuned, self.summary)

    def _repr_html_(self) -> str:
        """A notebook's view: what ran, the tuned table (lr*, median times, seeds converged) and the answer in words."""
        import html

        c = self.counts
        head = (f"<p><b>{html.escape(str(self.out))}</b>: {self.n_runs} runs ({self.n_new} run now, "
                f"{self.n_resumed} resumed) in {self.elapsed:.1f} s; {c.get('ok', 0)} ok, {c.get('diverged', 0)} "
                f"diverged, {c.get('failed', 0)} failed</p>")
        if self.tuned is None or not len(self.tuned):
            return head + "<p>(no results)</p>"
        keep = [col for col in self.tuned.columns
                if col.startswith(("optimizer.", "pipeline.", "problem.", "sweep."))
                and self.tuned[col].nunique(dropna=False) > 1 or col == "optimizer.lr"]
        keep += [col for col in ("lr_edge", "conv_batches", "conv_batches_low", "conv_batches_high", "conv_steps",
                                 "conv_samples", "conv_time", "n_converged", "n_seeds") if col in self.tuned.columns]
        view = self.tuned[list(dict.fromkeys(keep))].copy()
        if "lr_edge" in view:  # "low"/"high", or "" when lr* is inside its grid
            view["lr_edge"] = view["lr_edge"].replace("", "no")
        view = view.rename(columns=_html_label)
        table = view.to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")
        words = "".join(f"<li>{html.escape(line)}</li>" for line in self.in_words())
        unit = ("<p><small>Times to target are medians over seeds at the tuned lr*; inf: not reached within the "
                "budget; the wall-clock is simulated, in the config's time unit (an optimizer step takes "
                "pipeline.step_time, 1 by default).</small></p>")
        return head + table + unit + (f"<p>In words:</p><ul>{words}</ul>" if words else "")


_HTML_LABELS = {
    "optimizer.lr": "lr*", "lr_edge": "lr* at the grid's edge",
    "conv_batches": "T to target (fresh batches)", "conv_batches_low": "T 90% interval, low (fresh batches)",
    "conv_batches_high": "T 90% interval, high (fresh batches)", "conv_steps": "KT to target (optimizer steps)",
    "conv_samples": "BT to target (examples)", "conv_time": "wall-clock to target (simulated time units)",
    "n_converged": "seeds converged", "n_seeds": "seeds",
}


def _html_label(column: str) -> str:
    """The notebook view's name of a tuned-table column: what it counts and in which unit."""
    from echosim.experiments.report import _SHORT

    return _HTML_LABELS.get(column) or _SHORT.get(column, column)


FLUSH_RUNS = 64
"""Finished runs written to the store together, as one pack (fewer, larger files)."""
FLUSH_SECONDS = 2.0
"""...or after this long, whichever comes first: a crash loses at most this much work."""


def _prepare_out(config: SweepConfig, out: Path) -> str:
    """Create `out`; say so if it held another config's tables (they are replaced)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)
    old = store.read_manifest(out)
    if old and old.get("config_hash") != config.config_hash:
        return (f"note: {out} held the tables of another config ({old.get('name')}, "
                f"{str(old.get('config_hash'))[:10]}); they are replaced (its runs stay in the store)")
    return ""


@contextmanager
def _locked(out: Path):
    """Hold `out` for this sweep; a second sweep on the same directory is told it is busy."""
    import fcntl

    lock = out / ".lock"
    try:  # never through a link, never truncating: whatever is there is only locked
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        if lock.is_symlink():
            raise ValueError(f"--out: {str(lock)!r} is a symbolic link; remove it (a sweep never writes "
                             "through one)") from None
        raise OSError(exc.errno, exc.strerror, str(lock)) from None
    with os.fdopen(fd, "rb+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ValueError(f"--out {str(out)!r} is in use by another sweep; wait for it or choose "
                             "another --out (finished runs are shared through the store either way)") from None
        yield


def _manifest(config: SweepConfig, results: store.Store, runs, counts: dict, complete: bool) -> dict:
    return {
        "schema": store.RESULTS_SCHEMA,
        "name": config.name,
        "config_hash": config.config_hash,
        "source": config.source,
        "overrides": list(config.overrides),
        "config_text": config.text,
        "settings": config.settings,
        "axes": list(config.axes),
        "store": str(results.root.resolve()),
        "n_runs": len(runs),
        "run_ids": [r.run_id for r in runs],
        "counts": counts,
        "complete": complete,
        "provenance": store.provenance(),
    }


def require_extras() -> None:
    """Raise `echosim.experiments.extras.MissingExtra` (naming ``echosim[sweep]``) unless what
    a sweep needs, pyarrow for its run store and pandas for its tables, is installed."""
    from echosim.experiments.extras import require

    require("pyarrow.parquet", "a sweep (its run store)")
    require("pandas", "a sweep (its tables)")


def run_sweep(config: SweepConfig, out=None, *, workers: int | None = None, scheduler: str | None = None,
              progress: bool = True, stream=None, on_done=None, store_dir=None,
              desc: str | None = None) -> SweepReport:
    """Run every run of `config` that the store does not hold yet, then merge all of them.

    Parameters
    ----------
    config : a validated `SweepConfig` (see `echosim.experiments.config.load_config`).
    out : the sweep's directory for its tables (default ``config.default_out()``,
        derived from the config's hash, so another config never lands in it by default).
    workers : local worker processes (default: all cores; 1 runs in this process).
    scheduler : address of a Dask distributed scheduler; runs go there instead.
    progress : show progress on `stream` (default stderr; in a Jupyter kernel with tqdm's
        notebook support, a widget).
    desc : what the progress bar is named (default: the config's name).
    on_done : called with each finished run's payload once it is stored.
    store_dir : the run store (default `echosim.experiments.store.default_store`):
        any run it holds, whichever sweep computed it, is reused, not recomputed.
    """
    t0 = time.perf_counter()
    bar_stream = stream  # None: the bar's own default (stderr, or a notebook widget)
    stream = stream if stream is not None else sys.stderr
    desc = config.name if desc is None else desc
    if out is not None and not str(out).strip():
        raise ValueError("out: an empty path (give the sweep's directory, or None for the default)")
    out = Path(out) if out is not None else config.default_out()
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers}")
    if scheduler is not None:
        scheduler = executors.check_scheduler(scheduler)
    require_extras()  # before any work, not after the runs
    results = store.Store(store_dir)
    results.root.mkdir(parents=True, exist_ok=True)  # a store that cannot be made fails now, not after the runs
    note = _prepare_out(config, out)
    with _locked(out):
        results.clean_temp()
        shown = [0]

        def tell_quarantine():
            if len(results.quarantined) > shown[0] and progress:
                print(f"note: moved {len(results.quarantined) - shown[0]} unreadable pack(s) to "
                      f"{results.root / store.QUARANTINE}; their runs are computed again", file=stream)
            shown[0] = len(results.quarantined)

        results.finished()
        tell_quarantine()
        if note and progress:
            print(note, file=stream)
        runs = list(config.runs)
        store.write_manifest(out, _manifest(config, results, runs, {"pending": len(runs)}, complete=False))
        payloads: dict = {}
        counter = {"new": 0, "compile": 0.0, "workers": 0, "scheduler": None}

        def execute(specs, why: str = ""):
            pending = [r for r in specs if not results.has(r.run_id) and r.run_id not in payloads]
            # runs that share their fresh batches (same data seed) run back to back, so each
            # worker's batch cache serves them, and the biggest batches go first, so the last
            # runs to finish are short ones; the order changes no result
            pending.sort(key=lambda r: (-r.optimizer["batch_size"] * r.run.get("n_batches", 1), r.seed, r.run_id))
            if not pending:
                return
            if not counter["new"] and scheduler is None:
                counter["compile"] = executors.warm_up(config, workers, announce=stream if progress else None)
            used = 0 if scheduler is not None else min(workers, len(group_by_stream(pending)))
            counter["workers"] = max(counter["workers"], used)
            if scheduler is not None:
                finished = executors.dask(pending, scheduler)
                counter["scheduler"] = scheduler
            elif used == 1:
                finished = executors.serial(pending)
            else:
                finished = executors.local(pending, used)
            label = f"{desc} ({why})" if why else desc
            _record(finished, results, payloads, Progress(len(pending), stream=bar_stream, enabled=progress,
                                                          desc=label), on_done or (lambda payload: None))
            counter["new"] += len(pending)

        def merged(**kw):
            """The merged tables; runs whose pack proves unreadable while merging are computed again."""
            while True:
                res = tables.merge(out, [r.run_id for r in runs], config.settings, payloads=payloads,
                                  store=results, **kw)
                lost = [r for r in runs if r.run_id in results.lost and r.run_id not in payloads]
                tell_quarantine()
                if not lost:
                    return res
                results.lost.difference_update(r.run_id for r in lost)
                execute(lost, "runs of unreadable packs again")

        execute(runs)
        for round_no in range(config.settings.get("lr_extend", 0)):
            tuned = merged(write=False, curves_as=None).tuned
            more = lr_extensions(runs, tuned, config.settings)
            if not more:
                break
            if progress:
                print(f"extending the lr grid past its edge for {len(more)} run(s) (round {round_no + 1} of at most "
                      f"{config.settings['lr_extend']})", file=stream)
            runs += more
            execute(more, f"lr grid extended, round {round_no + 1}")
        final = merged(curves_as="arrow")
        counts = {s: int((final.summary["status"] == s).sum()) if len(final.summary) else 0
                  for s in ("ok", "diverged", "failed")}
        counts["missing"] = len(runs) - sum(counts.values())
        complete = counts["failed"] == 0 and counts["missing"] == 0
        store.write_manifest(out, _manifest(config, results, runs, counts, complete=complete))
    return SweepReport(out=out, n_runs=len(runs), n_new=counter["new"], n_resumed=len(runs) - counter["new"],
                       counts=counts, elapsed=time.perf_counter() - t0, compile_seconds=counter["compile"],
                       workers=counter["workers"], scheduler=counter["scheduler"], summary=final.summary,
                       tuned=final.tuned, curves_table=final.curves, note=note)


LR_RATIO = 10 ** (1 / 20)
"""The ratio an lr grid is extended by past an edge: the paper's 10^(1/20)."""
LR_EXTEND_BY = 4
"""Grid values added past an edge per round."""


def lr_extensions(runs, tuned, settings) -> list:
    """Runs that continue the lr grid past the edge where a setting's tuned lr sits.

    For every row of `tuned` whose lr is the largest (smallest) of its grid, the runs of
    that setting at that lr are repeated at lr·r^j (lr·r^−j), j = 1 … `LR_EXTEND_BY`,
    r = `LR_RATIO`; a setting is bracketed once a larger (smaller) lr exists that is
    worse, which includes lrs that diverge.
    """
    from echosim.experiments.specs import with_lr

    if tuned is None or not len(tuned) or "lr_edge" not in tuned:
        return []
    params = list(tuned.columns[: list(tuned.columns).index("optimizer.lr")])
    by_setting: dict = {}
    for spec in runs:
        p = spec.params()
        by_setting.setdefault(tuple(_key(p.get(c)) for c in params), []).append(spec)
    known = {r.run_id for r in runs}
    out = []
    for _, row in tuned[tuned["lr_edge"] != ""].iterrows():
        specs = by_setting.get(tuple(_key(row[c]) for c in params), [])
        if not specs:
            continue
        sign = 1 if row["lr_edge"] == "high" else -1
        edge = (max if sign > 0 else min)(s.optimizer["lr"] for s in specs)
        for spec in specs:
            if spec.optimizer["lr"] != edge:
                continue
            for j in range(1, LR_EXTEND_BY + 1):
                new = with_lr(spec, float(edge * LR_RATIO ** (sign * j)))
                if new.run_id not in known:
                    known.add(new.run_id)
                    out.append(new)
    return out


def _key(v):
    """A hashable, NaN-safe form of a parameter value (tables turn None into NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v) if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) else v


def _record(finished, results: store.Store, payloads: dict, bar: Progress, on_done) -> None:
    """Store each payload as it finishes, in packs; on any exit, store what is finished."""
    last = time.perf_counter()

    def flush():
        for payload in results.flush():
            on_done(payload)

    try:
        with closing(finished):
            for payload in finished:
                payloads[payload["summary"]["run_id"]] = payload
                results.add(payload)
                if payload["summary"]["status"] == "failed":
                    on_done(payload)
                bar.update()
                if results.pending >= FLUSH_RUNS or time.perf_counter() - last >= FLUSH_SECONDS:
                    flush()
                    last = time.perf_counter()
    finally:
        bar.close()
        flush()


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
    if spec.pipeline is not None and POLICIES[spec.pipeline["policy"]].capped:
        p = build_pipeline(spec.pipeline, spec.echo)
        K = min(p.max_echo, max(1.0, p.arrival.mean / p.workers / p.step_time.mean))
    else:
        K = float(spec.echo or 1)
    points = len(_log_at(spec.run, max(1, int(T))))
    rows = getattr(problem, "eval_rows", None)  # a data set's risk is evaluated on these rows only
    risk_cost = 3 * (rows * d if rows is not None else 300)
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
    takes_echo = spec.pipeline is None or POLICIES[spec.pipeline["policy"]].takes_echo
    if units > _CALIBRATION_UNITS and takes_echo and (spec.echo or 1) > 1:
        K = max(1, int((spec.echo or 1) * _CALIBRATION_UNITS / units))
        spec = dataclasses.replace(spec, echo=K)
    return spec


def estimate(config: SweepConfig, out=None, workers: int | None = None, store_dir=None, announce=None) -> dict:
    """Predicted wall time of the runs still to do.

    Method: a cost model in T·B·d·(1 + 2K) plus per-logged-point and per-run terms,
    calibrated by timing shortened copies (at most 200 fresh batches) of the learning-
    rate groups of the grid's cheapest and most expensive runs, as the sweep runs them;
    compile time is measured separately. Extra runs from lr-grid extension are not counted. Runs the
    store already holds are not counted. `announce`: a stream told in one line when
    the kernels must be compiled first (the first estimate on a machine waits for it).
    """
    import dataclasses

    workers = default_workers() if workers is None else int(workers)
    out = Path(out) if out is not None else config.default_out()
    done = store.Store(store_dir).finished()
    pending = [r for r in config.runs if r.run_id not in done]
    compile_s = executors.warm_up(config, workers, announce=announce)
    if not pending:
        return {"n_runs": len(config.runs), "n_pending": 0, "seconds": 0.0, "compile_seconds": compile_s,
                "workers": workers, "method": "nothing to run"}
    units = np.array([_cost_units(r) for r in pending])
    picks = sorted({int(np.argmin(units)), int(np.argmax(units))})
    groups = {}
    for spec in pending:
        groups.setdefault(group_key(spec), []).append(spec)
    t_sum = u_sum = 0.0
    for i in picks:
        shorts = []
        for spec in groups[group_key(pending[i])]:  # timed as the sweep runs it: its whole lr group
            run = dict(spec.run)
            if "n_batches" in run:
                run["n_batches"] = min(run["n_batches"], 200)
            else:
                T = run.pop("time_budget") / mean_batch_time(build_pipeline(spec.pipeline, spec.echo))
                run["n_batches"] = int(min(max(T, 1), 200))
            shorts.append(_calibration_copy(dataclasses.replace(spec, run=run)))
        t = time.perf_counter()
        execute_group(shorts)
        t_sum += time.perf_counter() - t
        u_sum += sum(_cost_units(s) for s in shorts)
    kappa = t_sum / u_sum
    w = min(workers, len(group_by_stream(pending)))
    seconds = kappa * units.sum() / w
    return {"n_runs": len(config.runs), "n_pending": len(pending), "seconds": float(seconds),
            "compile_seconds": compile_s, "workers": w,
            "method": ("cost model T·B·d·(1+2K) + per-point + per-run terms, calibrated by timing the "
                       f"learning-rate groups of {len(picks)} shortened runs of the grid; lr-grid extension "
                       "rounds are not counted")}


