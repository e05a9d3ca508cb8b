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

import errno
import json
import os
import platform
import re
import secrets
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
