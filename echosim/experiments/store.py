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

import errno
import json
import math
import os
import platform
import re
import secrets
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


def _temp_name(name: str) -> str:
    """A fresh temp name next to `name`: the writer's pid (for `clean_temp`) and a random token."""
    return f".{name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"


def _temp_pid(name: str) -> int | None:
    """The writer's pid in a temp file name (this version's or the older ``.<name>.<pid>.tmp``)."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[-1] == "tmp":
        for candidate in (parts[-3], parts[-2]):
            if candidate.isdigit():
                return int(candidate)
    return None


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd


def _open_dir(d: Path, follow: bool) -> int | None:
    """Create directory `d` and open it; with `follow` False it must not be a symbolic link.

    Files are then created and renamed relative to this descriptor, so a link planted
    in the store (in place of ``packs/``, or a temp file) cannot redirect a write.
    Returns None where the platform has no directory descriptors.
    """
    d.mkdir(parents=True, exist_ok=True)
    if not _DIR_FD:  # pragma: no cover - not POSIX
        if not follow and d.is_symlink():
            raise StoreError(f"{str(d)!r} is a symbolic link; the store never writes through one (remove it)")
        return None
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | (0 if follow else _NOFOLLOW)
    try:
        return os.open(d, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (not follow and d.is_symlink()):
            raise StoreError(f"{str(d)!r} is a symbolic link; the store never writes through one "
                             "(remove it, or point --store at the directory itself)") from None
        raise OSError(exc.errno, exc.strerror, str(d)) from None


@contextmanager
def _atomic_file(path: Path, follow: bool = True):
    """A binary file that becomes `path` only when the block ends without error.

    The temp file has a random name and is created exclusively (``O_EXCL``, never
    through a link); ``os.replace`` then puts it in place of whatever `path` was (a
    link there is replaced, never written through). With `follow` False the directory
    itself must not be a link either (the store's own ``packs/`` and ``failed/``).
    The writer holds an advisory lock on its temp file while writing, so `clean_temp`
    can tell a temp file whose writer is gone (killed, even a zombie) from one that a
    live writer still owns. On error the temp file is removed, and an `OSError`
    without a file name gets `path` (a full disk while writing names the file).
    """
    path = Path(path)
    dfd = _open_dir(path.parent, follow)
    tmp = _temp_name(path.name)
    where = (lambda name: name) if dfd is not None else (lambda name: str(path.with_name(name)))  # noqa: E731
    kw = {"dir_fd": dfd} if dfd is not None else {}
    try:
        try:
            fd = os.open(where(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, **kw)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path.with_name(tmp))) from None
        try:
            with os.fdopen(fd, "wb") as f:
                _lock(f, blocking=True)
                yield f
                f.flush()
                rkw = {"src_dir_fd": dfd, "dst_dir_fd": dfd} if dfd is not None else {}
                os.replace(where(tmp), where(path.name), **rkw)
        except BaseException as exc:
            try:
                os.unlink(where(tmp), **kw)
            except FileNotFoundError:
                pass
            if isinstance(exc, OSError) and exc.filename is None:
                raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc
            raise
    finally:
        if dfd is not None:
            os.close(dfd)


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


def _pyarrow(sub: str | None = None):
    """pyarrow (or ``pyarrow.<sub>``), or a one-line `MissingExtra` naming the extra."""
    from echosim.experiments.extras import require

    return require("pyarrow" + (f".{sub}" if sub else ""), "the run store")


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
        if root is not None and not str(root).strip():
            raise StoreError("store: an empty path (give a directory, or None for the default store)")
        self.root = Path(default_store() if root is None else root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store {str(self.root)!r} is not a directory")
        self._index: dict[str, Path] | None = None
        self._packs: dict[str, list[Path]] = {}
        self._summaries: dict[str, dict] = {}
        self._buffer: list[dict] = []
        self.quarantined: list[Path] = []
        self.lost: set[str] = set()
        """Run ids that were finished until their pack (and every other copy) proved
        unreadable: they count as not done, so the next sweep computes them again."""

    # -- the index of finished runs -------------------------------------------
    def _load_index(self) -> dict[str, Path]:
        if self._index is None:
            self._index = {}
            d = self.root / PACKS
            for path in sorted(d.glob("*.parquet")) if d.is_dir() else ():
                pq = _pyarrow("parquet")  # only a store that holds packs needs it
                try:
                    meta = pq.read_schema(path).metadata or {}
                    summaries = json.loads(meta[_META_KEY])
                except Exception:  # noqa: BLE001 - any unreadable pack is set aside, not fatal
                    self._quarantine(path)
                    continue
                for rid, row in summaries.items():
                    self._packs.setdefault(rid, []).append(path)
                    if rid not in self._index:
                        self._index[rid] = path
                        self._summaries[rid] = row
        return self._index

    def _quarantine(self, path: Path) -> None:
        """Move an unreadable pack aside; its runs fall back to another pack holding them, or are lost.

        A pack another process moved aside first (two sweeps sharing the store) is
        simply gone: its runs are dropped the same way.
        """
        dfd = _open_dir(self.root / QUARANTINE, follow=False)
        kw = {"src_dir_fd": None, "dst_dir_fd": dfd} if dfd is not None else {}
        target = self.root / QUARANTINE / path.name
        try:
            os.replace(path, target.name if dfd is not None else target, **kw)
            self.quarantined.append(target)
        except FileNotFoundError:
            pass
        finally:
            if dfd is not None:
                os.close(dfd)
        for rid, paths in list(self._packs.items()):
            if path not in paths:
                continue
            paths.remove(path)
            if self._index is not None and self._index.get(rid) == path:
                if paths:
                    self._index[rid] = paths[0]
                else:
                    del self._index[rid]
                    self._summaries.pop(rid, None)
                    del self._packs[rid]
                    self.lost.add(rid)

    def finished(self) -> set[str]:
        """Run ids with a result (status ok or diverged)."""
        return set(self._load_index())

    def has(self, run_id: str) -> bool:
        """Whether `run_id` has a result here (as far as its pack was readable so far)."""
        return run_id in self._load_index()

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

    def _read_pack(self, path: Path):
        """The whole table of a pack, every page's checksum verified; None (and the pack
        quarantined) if any part of it cannot be read: a torn write, garbage in a column
        or a row group, a missing column."""
        pq = _pyarrow("parquet")
        try:
            table = pq.read_table(path, page_checksum_verification=True)
            missing = [c for c in ("run_id", *CURVE_COLUMNS) if c not in table.column_names]
            if missing:
                raise ValueError(f"no column {missing[0]!r}")
        except Exception:  # noqa: BLE001 - any unreadable part (or a pack gone) sets the whole pack aside
            self._quarantine(path)
            return None
        return table

    def read(self, run_ids) -> dict[str, tuple[dict, dict]]:
        """(summary, curves) of each finished run in `run_ids` (others are left out).

        A pack that turns out to be unreadable here is quarantined: its runs are read
        from another pack that holds them, or left out and listed in `lost`.
        """
        pc = _pyarrow("compute")

        index = self._load_index()
        out = {}
        todo = [rid for rid in dict.fromkeys(run_ids) if rid in index]
        while todo:
            by_pack: dict[Path, list[str]] = {}
            for rid in todo:
                if rid in index:
                    by_pack.setdefault(index[rid], []).append(rid)
            todo = []
            for path, ids in by_pack.items():
                table = self._read_pack(path)
                if table is None:
                    todo += [rid for rid in ids if rid in index]  # another copy, if any
                    continue
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
            with _atomic_file(self.root / FAILED / f"{row['run_id']}.json", follow=False) as f:
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
        pa, pq = _pyarrow(), _pyarrow("parquet")

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
        with _atomic_file(path, follow=False) as f:
            pq.write_table(table, f, compression="zstd", write_page_checksum=True)
        index = self._load_index()
        for rid in ids:
            self._packs.setdefault(rid, []).append(path)
            index.setdefault(rid, path)
            self._summaries.setdefault(rid, summaries[rid])
            self.lost.discard(rid)
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
        if not d.is_dir() or d.is_symlink():
            continue
        for p in d.glob(".*.tmp"):
            pid = _temp_pid(p.name)
            if pid is None or pid == os.getpid() or not _writer_gone(p, pid):
                continue
            p.unlink(missing_ok=True)
            n += 1
    return n


def _writer_gone(path: Path, pid: int) -> bool:
    try:  # never through a link, never blocking (a planted FIFO)
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:  # its writer just renamed it into place
        return False
    except OSError:  # a link or something else that is not our temp file: leave it
        return False
    with os.fdopen(fd, "rb") as f:
        if not _lock(f, blocking=False):
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
