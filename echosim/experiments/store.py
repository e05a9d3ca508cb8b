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

A sweep's own directory (``--out``) holds its ``manifest.json`` (the config, its run
ids, the store it used, versions), written here, and its merged tables
(`echosim.experiments.tables`).

Writes are atomic (a locked temp file, then ``os.replace``): a process killed
half-way leaves no partial pack, and the next sweep removes its temp file. No pickles
anywhere: Parquet and JSON only.
"""

from __future__ import annotations

import json
import re
import os
import platform
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = [
    "CURVE_COLUMNS",
    "Store",
    "StoreError",
    "default_store",
    "provenance",
    "clean_temp",
    "valid_run_id",
    "write_table",
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


def valid_run_id(value) -> bool:
    """Whether `value` has the form of a run id (16 hex digits), so it names no path."""
    return isinstance(value, str) and _RUN_ID.match(value) is not None


def write_table(table, path) -> None:
    """Write a pyarrow Table as one Parquet file at `path`, atomically."""
    import pyarrow.parquet as pq

    with _atomic_file(Path(path)) as f:
        pq.write_table(table, f, compression="zstd")


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
