"""Result store: one Parquet shard per finished run, merged into tidy tables.

Layout of a results directory::

    runs/<run_id>.parquet     one finished run (status ok or diverged): its curve, one
                              row per logged point, and its summary row as JSON in the
                              file's metadata (key ``echosim.summary``)
    failed/<run_id>.json      a run that raised: its parameters and error (retried on
                              the next invocation, removed once it succeeds)
    summary.parquet           merged: one row per run (every status)
    curves.parquet            merged: one row per logged point of every run
    tuned.parquet             one row per setting of everything but the lr
    manifest.json             the config (text and hash), run ids, counts, versions

``run_id`` is the hash of the run's resolved config (`echosim.experiments.specs.RunSpec`), so a
re-run of the same sweep finds its finished runs and skips them ("resume"). A shard
is written to a temporary name and moved into place with ``os.replace``: a run killed
half-way leaves no partial shard. No pickles anywhere: Parquet and JSON only.
"""

from __future__ import annotations

import json
import re
import math
import os
import platform
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "CURVE_COLUMNS",
    "Results",
    "provenance",
    "shard_path",
    "write_run",
    "write_shard",
    "write_failure",
    "read_shard",
    "read_failure",
    "finished_ids",
    "clean_temp",
    "merge",
    "load",
]

RESULTS_SCHEMA = "1"
SHARDS = "runs"
_RUN_ID = re.compile(r"[0-9a-f]{16}")
FAILED = "failed"
CURVE_COLUMNS = ("batches", "steps", "samples", "time", "risk", "risk_avg", "risk_end_avg")
"""Per logged point: fresh batches T, steps, samples B·T, wall-clock (NaN without a
pipeline) and the excess risks F(w) − F* of the last, averaged and batch-end-averaged
iterates."""

_META_KEY = b"echosim.summary"


class Results(NamedTuple):
    """The tables of a results directory, as pandas DataFrames (plus the manifest dict)."""

    summary: object
    curves: object
    tuned: object
    manifest: dict


@lru_cache(maxsize=1)
def provenance() -> dict:
    """Versions of the packages that produced a result (``version.*`` columns)."""
    from importlib import metadata

    out = {"version.python": platform.python_version()}
    for name in ("echosim", "numpy", "numba", "scipy", "pyarrow"):
        try:
            out[f"version.{name}"] = metadata.version(name)
        except metadata.PackageNotFoundError:  # pragma: no cover - editable installs have it
            out[f"version.{name}"] = "unknown"
    return out


def _jsonify(d: dict) -> str:
    def conv(v):
        if isinstance(v, (np.integer,)):
            return int(v)
        if isinstance(v, (np.floating,)):
            return float(v)
        if isinstance(v, np.bool_):
            return bool(v)
        return v

    return json.dumps({k: conv(v) for k, v in d.items()})


def shard_path(out, run_id: str) -> Path:
    return Path(out) / SHARDS / f"{run_id}.parquet"


def _failure_path(out, run_id: str) -> Path:
    return Path(out) / FAILED / f"{run_id}.json"


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


@contextmanager
def _atomic_file(path: Path):
    """A binary file that becomes `path` only when the block ends without error.

    The writer holds an advisory lock on its temp file while writing, so `clean_temp`
    can tell a temp file whose writer is gone (killed, even a zombie) from one that a
    live writer still owns. On error the temp file is removed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp_name(path)
    with open(tmp, "wb") as f:
        _lock(f, blocking=True)
        try:
            yield f
            f.flush()
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def _lock(f, blocking: bool) -> bool:
    """Take an exclusive advisory lock on an open file; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: liveness falls back to the pid
        return True
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def write_shard(out, summary: dict, curves: dict) -> Path:
    """Write one finished run atomically (temp file, then ``os.replace``); returns its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    run_id = summary["run_id"]
    cols = {}
    for name in CURVE_COLUMNS:
        a = np.asarray(curves[name])
        cols[name] = pa.array(a.astype(np.int64) if name in ("batches", "steps", "samples") else
                              a.astype(np.float64))
    table = pa.table(cols).replace_schema_metadata({_META_KEY: _jsonify(summary).encode(),
                                                    b"echosim.schema": RESULTS_SCHEMA.encode()})
    final = shard_path(out, run_id)
    with _atomic_file(final) as f:
        pq.write_table(table, f, compression="zstd")
    failed = _failure_path(out, run_id)
    if failed.exists():
        failed.unlink(missing_ok=True)
    return final


def write_failure(out, summary: dict) -> Path:
    """Record a failed run (JSON: its parameters and error); it is retried next time."""
    path = _failure_path(out, summary["run_id"])
    with _atomic_file(path) as f:
        f.write(_jsonify(summary).encode("utf-8"))
    return path


def write_run(out, payload: dict) -> Path:
    """Write a run's payload (``{"summary": ..., "curves": ... or None}``) as shard or failure."""
    if payload["summary"]["status"] == "failed":
        return write_failure(out, payload["summary"])
    return write_shard(out, payload["summary"], payload["curves"])


def read_shard(path) -> tuple[dict, dict]:
    """(summary dict, curves as a dict of arrays) of one shard."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    if _META_KEY not in meta:
        raise ValueError(f"{path}: not an echosim result shard (no {_META_KEY.decode()} metadata)")
    summary = json.loads(meta[_META_KEY])
    curves = {name: table.column(name).to_numpy() for name in CURVE_COLUMNS}
    return summary, curves


def read_failure(out, run_id: str) -> dict | None:
    path = _failure_path(out, run_id)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def finished_ids(out) -> set[str]:
    """Run ids that have a complete shard under `out` (temporary files are ignored)."""
    d = Path(out) / SHARDS
    if not d.is_dir():
        return set()
    return {p.name[:-8] for p in d.iterdir() if p.name.endswith(".parquet") and not p.name.startswith(".")}


def clean_temp(out) -> int:
    """Remove temporary files whose writer is gone (killed mid-write); returns how many.

    A temp file is stale when no process holds its lock and its writer's pid no longer
    runs (a killed worker whose parent never reaped it is a zombie: it counts as gone).
    A live writer's file is never touched, whatever the timing.
    """
    n = 0
    for sub in (SHARDS, FAILED, "."):
        d = Path(out) / sub
        if not d.is_dir():
            continue
        for p in d.glob(".*.tmp"):
            try:
                pid = int(p.name.rsplit(".", 2)[-2])
            except (ValueError, IndexError):
                continue
            if pid == os.getpid() or not _writer_gone(p, pid):
                continue
            p.unlink(missing_ok=True)
            n += 1
    return n


def _writer_gone(path: Path, pid: int) -> bool:
    try:
        with open(path, "rb") as f:
            if not _lock(f, blocking=False):
                return False
    except FileNotFoundError:  # its writer just renamed it into place
        return False
    return not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (macOS): a zombie cannot be told apart, keep its file
        return True
    return state not in ("Z", "X")


# --------------------------------------------------------------------------- merge


def _analysis(row: dict, curves: dict | None, settings: dict) -> dict:
    from echosim.experiments.analysis import convergence

    F_star = row.get("F_star")
    status = row.get("status", "failed")
    if curves is None or status == "failed" or F_star is None or not math.isfinite(F_star):
        has_time = row.get("pipeline.policy") is not None
        return {"converged": False, "conv_index": -1, "conv_batches": math.inf, "conv_steps": math.inf,
                "conv_samples": math.inf, "conv_time": math.inf if has_time else math.nan}
    return convergence(curves, F_star, rtol=settings.get("rtol"), atol=settings.get("atol"),
                       window=settings["window"], iterate=settings["iterate"], status=status)


def merge(out, run_ids, settings: dict, payloads: dict | None = None, write: bool = True,
          curves_as: str = "pandas") -> Results:
    """Merge the runs `run_ids` (in this order) of directory `out` into tables.

    `payloads` maps run id → payload already in memory (the others are read from their
    shard or failure record; a run with neither is left out and counted as missing).
    Convergence times are computed here with `settings` (rtol/atol, window, iterate), so
    changing the target needs no re-run. With `write`, the tables are written to
    ``summary.parquet``, ``curves.parquet`` and ``tuned.parquet`` atomically.
    ``curves_as``: "pandas" (a DataFrame), "arrow" (a pyarrow Table, no conversion) or
    None (left out).
    """
    import pandas as pd
    import pyarrow as pa

    from echosim.experiments.analysis import tune

    payloads = payloads or {}
    rows, curve_parts = [], []
    for rid in run_ids:
        p = payloads.get(rid)
        if p is not None:
            summary, curves = p["summary"], p.get("curves")
        else:
            path = shard_path(out, rid)
            if path.exists():
                summary, curves = read_shard(path)
            else:
                summary, curves = read_failure(out, rid), None
                if summary is None:
                    continue
        row = dict(summary)
        row.update(_analysis(row, curves, settings))
        row["target.rtol"] = math.nan if settings.get("rtol") is None else float(settings["rtol"])
        row["target.atol"] = math.nan if settings.get("atol") is None else float(settings["atol"])
        row["target.window"] = int(settings["window"])
        row["target.iterate"] = settings["iterate"]
        rows.append(row)
        if curves is not None and summary.get("status") != "failed":
            curve_parts.append((len(rows) - 1, curves))
    summary_df = pd.DataFrame(rows)
    if len(summary_df):
        summary_df = _order_columns(_uniform_types(summary_df))
    tuned_df = tune(summary_df, by=settings.get("tune_by", "batches")) if len(summary_df) else pd.DataFrame()
    curves_tbl = _curves_table(summary_df, curve_parts)
    if write:
        out = Path(out)
        _write_table(pa.Table.from_pandas(summary_df, preserve_index=False), out / "summary.parquet")
        _write_table(curves_tbl, out / "curves.parquet")
        _write_table(pa.Table.from_pandas(tuned_df, preserve_index=False), out / "tuned.parquet")
    curves = {"pandas": _to_pandas, "arrow": lambda t: t, None: lambda t: None}[curves_as](curves_tbl)
    return Results(summary_df, curves, tuned_df, {})


_FIRST = ("run_id", "status", "error")


def _uniform_types(df):
    """Columns mixing strings and numbers (e.g. a grid over momentum 'nesterov' and 0.9)
    become strings, so that they fit one Parquet type."""
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if str in kinds and len(kinds) > 1:
                df[c] = [None if v is None else str(v) for v in df[c]]
    return df


def _order_columns(df):
    params = [c for c in df.columns if c.split(".")[0] in ("problem", "pipeline", "optimizer", "sweep") and "." in c]
    seeds = [c for c in ("repetition", "base_seed", "seed", "pipeline_seed") if c in df.columns]
    conv = [c for c in df.columns if c.startswith(("conv_", "target.")) or c == "converged"]
    version = [c for c in df.columns if c.startswith("version.")]
    first = [c for c in _FIRST if c in df.columns]
    rest = [c for c in df.columns if c not in set(params + seeds + conv + version + first)]
    return df[first + params + seeds + conv + rest + version]


def _curves_table(summary_df, parts):
    """The long table: curve columns plus every summary column but the analysis ones."""
    import pyarrow as pa

    if not parts:
        return pa.table({name: pa.array([], type=pa.int64() if name in ("batches", "steps", "samples")
                                        else pa.float64()) for name in CURVE_COLUMNS})
    index = np.concatenate([np.full(len(c["batches"]), i, dtype=np.int64) for i, c in parts])
    keep = [c for c in summary_df.columns
            if not (c.startswith(("conv_", "final_", "schedule.", "target."))
                    or c in ("converged", "elapsed_s", "error", "diverged_at"))]
    small = pa.Table.from_pandas(summary_df[keep], preserve_index=False)
    # strings repeat along a curve: dictionary-encode them on the one-row-per-run table,
    # then repeat every column with one `take`
    cols = [col.dictionary_encode() if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
            else col for col in small.columns]
    params = pa.table(cols, names=keep).take(pa.array(index))
    arrays = list(params.columns)
    names = list(keep)
    for name in CURVE_COLUMNS:
        arrays.append(pa.array(np.concatenate([np.asarray(c[name]) for _, c in parts])))
        names.append(name)
    return pa.table(arrays, names=names)


def _write_table(table, path: Path) -> None:
    import pyarrow.parquet as pq

    with _atomic_file(path) as f:
        pq.write_table(table, f, compression="zstd")


def _to_pandas(table):
    return table.to_pandas()


def load(path, curves: bool = True) -> Results:
    """Read a results directory: (summary, curves, tuned) DataFrames and the manifest.

    If the merged tables are missing (a sweep still running, or killed), the shards are
    merged on the fly with the manifest's analysis settings (default target otherwise).
    String parameter columns of the curves table come back as pandas Categoricals
    (they repeat along each curve).
    """
    import pandas as pd
    import pyarrow.parquet as pq

    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"results path {str(path)!r} is not a directory (expected a sweep's --out)")
    manifest = {}
    mpath = d / "manifest.json"
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except ValueError:
            raise ValueError(f"{mpath}: not valid JSON") from None
    if (d / "summary.parquet").exists() and manifest.get("complete", True):
        summary = pd.read_parquet(d / "summary.parquet")
        tuned = pd.read_parquet(d / "tuned.parquet") if (d / "tuned.parquet").exists() else pd.DataFrame()
        curves_df = None
        if curves:
            curves_df = pq.read_table(d / "curves.parquet").to_pandas() if (d / "curves.parquet").exists() \
                else pd.DataFrame()
        return Results(summary, curves_df, tuned, manifest)
    if not (d / SHARDS).is_dir() and not (d / FAILED).is_dir():
        raise ValueError(f"{str(path)!r} holds no echosim results (no summary.parquet, no runs/)")
    run_ids = manifest.get("run_ids")
    if run_ids is None:
        ids = finished_ids(d) | {p.stem for p in (d / FAILED).glob("*.json")}
        run_ids = sorted(i for i in ids if _RUN_ID.fullmatch(i))
    # read only what the store wrote: run ids are 16 lowercase hex digits, never paths
    bad = next((r for r in run_ids if not (isinstance(r, str) and _RUN_ID.fullmatch(r))), None) \
        if isinstance(run_ids, list) else run_ids
    if bad is not None:
        raise ValueError(f"{mpath}: run_ids holds {str(bad)[:60]!r}, not a run id (16 hex digits); "
                         "the manifest was not written by echosim")
    settings = manifest.get("settings") or {"rtol": 0.01, "atol": None, "window": 10, "iterate": "last",
                                            "tune_by": "batches"}
    res = merge(d, run_ids, settings, write=False)
    return Results(res.summary, res.curves if curves else None, res.tuned, manifest)


def write_manifest(out, data: dict) -> None:
    """Write ``manifest.json`` atomically."""
    with _atomic_file(Path(out) / "manifest.json") as f:
        f.write(json.dumps(data, indent=1, default=str).encode("utf-8"))


def read_manifest(out) -> dict | None:
    path = Path(out) / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
