"""The result store: every finished run, content-addressed, in packs of many runs.

A run is identified by ``run_id``, the hash of its resolved spec (package version
included, `echosim.experiments.specs.RunSpec`), not by the sweep that asked for it:
any later sweep, figure or plan that needs a finished run finds it here and reuses it.
The store is one directory (``$ECHOSIM_STORE``, default ``echosim-results/store``)::

    packs/<first run id>-<n>.parquet  finished runs (status ok or diverged): their curves,
                                      one row per logged point with a ``run_id`` column,
                                      and their summary rows as JSON in the file's metadata
    failed/<run_id>.json              a run that raised: its parameters and error (retried
                                      on the next invocation, removed once it succeeds)
    quarantine/                       packs that could not be read, moved aside

A sweep's own directory (``--out``) holds its view of the store: ``summary.parquet``
(one row per run), ``curves.parquet`` (one row per logged point), ``tuned.parquet``
and ``manifest.json`` (the config, its run ids, the store it used, versions).

Writes are atomic (a locked temp file, then ``os.replace``): a process killed
half-way leaves no partial pack, and the next sweep removes its temp file. No pickles
anywhere: Parquet and JSON only.
"""

from __future__ import annotations

import json
import re
import math
import os
import platform
import re
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "CURVE_COLUMNS",
    "Results",
    "Store",
    "default_store",
    "provenance",
    "merge",
    "load",
    "clean_temp",
    "write_manifest",
    "read_manifest",
]

RESULTS_SCHEMA = "2"
PACKS = "packs"
FAILED = "failed"
QUARANTINE = "quarantine"
CURVE_COLUMNS = ("batches", "steps", "samples", "time", "risk", "risk_avg", "risk_end_avg")
"""Per logged point: fresh batches T, steps, samples B·T, wall-clock (NaN without a
pipeline) and the excess risks F(w) − F* of the last, averaged and batch-end-averaged
iterates."""

_META_KEY = b"echosim.summaries"
_RUN_ID = re.compile(r"^[0-9a-f]{16}$")


class Results(NamedTuple):
    """The tables of a results directory, as pandas DataFrames (plus the manifest dict)."""

    summary: object
    curves: object
    tuned: object
    manifest: dict


def default_store() -> Path:
    """Where finished runs are kept: ``$ECHOSIM_STORE``, else ``echosim-results/store``."""
    return Path(os.environ.get("ECHOSIM_STORE") or Path("echosim-results") / "store")


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


class StoreError(ValueError):
    """The store cannot be used (e.g. its path is a file); one line naming the path."""


class Store:
    """Finished runs, found by run id whichever sweep wrote them.

    ``add`` buffers payloads and ``flush`` writes them as one pack; ``read`` returns
    (summary, curves) of finished runs; ``failure`` the record of a failed one.
    Packs that cannot be read are moved to ``quarantine/`` and reported in
    ``quarantined`` (their runs count as not done, so they are recomputed).
    """

    def __init__(self, root=None):
        self.root = Path(default_store() if root is None else root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {str(self.root)!r} is not a directory")
        self._index: dict[str, Path] | None = None
        self._summaries: dict[str, dict] = {}
        self._buffer: list[dict] = []
        self.quarantined: list[Path] = []

    # -- the index of finished runs -------------------------------------------
    def _load_index(self) -> dict[str, Path]:
        if self._index is None:
            import pyarrow.parquet as pq

            index = {}
            d = self.root / PACKS
            for path in sorted(d.glob("*.parquet")) if d.is_dir() else ():
                try:
                    meta = pq.read_schema(path).metadata or {}
                    summaries = json.loads(meta[_META_KEY])
                except Exception:  # noqa: BLE001 - any unreadable pack is set aside, not fatal
                    self._quarantine(path)
                    continue
                for rid, row in summaries.items():
                    if rid not in index:
                        index[rid] = path
                        self._summaries[rid] = row
            self._index = index
        return self._index

    def _quarantine(self, path: Path) -> None:
        q = self.root / QUARANTINE
        q.mkdir(parents=True, exist_ok=True)
        target = q / path.name
        os.replace(path, target)
        self.quarantined.append(target)

    def finished(self) -> set[str]:
        """Run ids with a result (status ok or diverged)."""
        return set(self._load_index())

    def summary(self, run_id: str) -> dict | None:
        self._load_index()
        return self._summaries.get(run_id)

    def failure(self, run_id: str) -> dict | None:
        """The failure record of `run_id`, or None."""
        path = self.root / FAILED / f"{run_id}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def read(self, run_ids) -> dict[str, tuple[dict, dict]]:
        """(summary, curves) of each finished run in `run_ids` (others are left out)."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        index = self._load_index()
        by_pack: dict[Path, list[str]] = {}
        for rid in run_ids:
            if rid in index:
                by_pack.setdefault(index[rid], []).append(rid)
        out = {}
        for path, ids in by_pack.items():
            table = pq.read_table(path)
            rid_col = table.column("run_id")
            for rid in ids:
                rows = table.filter(pc.equal(rid_col, rid))
                out[rid] = (self._summaries[rid], {name: rows.column(name).to_numpy() for name in CURVE_COLUMNS})
        return out

    # -- writing --------------------------------------------------------------
    def add(self, payload: dict) -> None:
        """Record a run's payload: a failure at once, a result at the next `flush`."""
        row = payload["summary"]
        if row["status"] == "failed":
            with _atomic_file(self.root / FAILED / f"{row['run_id']}.json") as f:
                f.write(_jsonify(row).encode("utf-8"))
        else:
            self._buffer.append(payload)

    @property
    def pending(self) -> int:
        """Results added but not yet written."""
        return len(self._buffer)

    def flush(self) -> list[dict]:
        """Write the buffered results as one pack (atomically); returns their payloads."""
        if not self._buffer:
            return []
        import pyarrow as pa
        import pyarrow.parquet as pq

        done, self._buffer = self._buffer, []
        ids = [p["summary"]["run_id"] for p in done]
        lengths = [len(p["curves"]["batches"]) for p in done]
        cols = {"run_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(ids), dtype=np.int32), lengths)), pa.array(ids))}
        for name in CURVE_COLUMNS:
            parts = [np.asarray(p["curves"][name]) for p in done]
            kind = np.int64 if name in ("batches", "steps", "samples") else np.float64
            cols[name] = pa.array(np.concatenate(parts).astype(kind) if parts else np.zeros(0, kind))
        summaries = {p["summary"]["run_id"]: json.loads(_jsonify(p["summary"])) for p in done}
        table = pa.table(cols).replace_schema_metadata({_META_KEY: json.dumps(summaries).encode(),
                                                        b"echosim.schema": RESULTS_SCHEMA.encode()})
        path = self.root / PACKS / f"{ids[0]}-{len(ids)}.parquet"
        with _atomic_file(path) as f:
            pq.write_table(table, f, compression="zstd")
        index = self._load_index()
        for rid in ids:
            index.setdefault(rid, path)
            self._summaries.setdefault(rid, summaries[rid])
            (self.root / FAILED / f"{rid}.json").unlink(missing_ok=True)
        return done

    def clean_temp(self) -> int:
        """Remove temp files whose writer is gone (see `clean_temp`)."""
        return clean_temp(self.root)


def clean_temp(root) -> int:
    """Remove temporary files whose writer is gone (killed mid-write); returns how many.

    A temp file is stale when no process holds its lock and its writer's pid no longer
    runs (a killed worker whose parent never reaped it is a zombie: it counts as gone).
    A live writer's file is never touched, whatever the timing.
    """
    n = 0
    for sub in (PACKS, FAILED, "."):
        d = Path(root) / sub
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
                       fraction=settings.get("fraction"), window=settings["window"],
                       iterate=settings["iterate"], status=status, rule=settings.get("rule", "first"))


def merge(out, run_ids, settings: dict, payloads: dict | None = None, write: bool = True,
          curves_as: str = "pandas", store: Store | None = None) -> Results:
    """Merge the runs `run_ids` (in this order) into tables, written under `out`.

    `payloads` maps run id → payload already in memory (the others are read from the
    `store` or its failure records; a run with neither is left out and counted as missing).
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
    store = store if store is not None else Store()
    stored = store.read([rid for rid in run_ids if rid not in payloads])
    rows, curve_parts = [], []
    for rid in run_ids:
        p = payloads.get(rid)
        if p is not None:
            summary, curves = p["summary"], p.get("curves")
        elif rid in stored:
            summary, curves = stored[rid]
        else:
            summary, curves = store.failure(rid), None
            if summary is None:
                continue
        row = dict(summary)
        row.update(_analysis(row, curves, settings))
        row["target.rtol"] = math.nan if settings.get("rtol") is None else float(settings["rtol"])
        row["target.atol"] = math.nan if settings.get("atol") is None else float(settings["atol"])
        row["target.fraction"] = math.nan if settings.get("fraction") is None else float(settings["fraction"])
        row["target.window"] = int(settings["window"])
        row["target.rule"] = settings.get("rule", "first")
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
    """Read a sweep's results directory: (summary, curves, tuned) DataFrames and the manifest.

    If the merged tables are missing or stale (a sweep still running, or killed), the
    runs are merged on the fly from the store named in the manifest, with its
    analysis settings. String parameter columns of the curves table come back as
    pandas Categoricals (they repeat along each curve).
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
    run_ids = manifest.get("run_ids")
    if not manifest or run_ids is None:
        raise ValueError(f"{str(path)!r} holds no echosim results (no summary.parquet, no manifest.json)")
    bad = [r for r in run_ids if not isinstance(r, str) or not _RUN_ID.match(r)]
    if bad:
        raise ValueError(f"{mpath}: run_ids must be 16 hex digits, got {bad[0]!r}")
    store = Store(manifest.get("store"))
    settings = manifest.get("settings") or {"rtol": 0.01, "atol": None, "window": 10, "iterate": "last",
                                            "tune_by": "batches"}
    res = merge(d, run_ids, settings, write=False, store=store)
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
