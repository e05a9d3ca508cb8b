"""The result store: every finished run, content-addressed, in packs of many runs.

A run is identified by ``run_id``, the hash of its resolved spec (package version
included, `echosim.experiments.specs.RunSpec`), not by the sweep that asked for it:
any later sweep, figure or plan that needs a finished run finds it here and reuses it.
The store is one directory (``$ECHOSIM_STORE``, default ``echosim-results/store``):

    packs/<first run id>-<n>.parquet  finished runs (status ok or diverged): their curves,
                                      one row per logged point with a ``run_id`` column,
                                      and their summary rows as JSON in the file's metadata
    failed/<run_id>.json              a run that raised: its parameters and error (retried
                                      on the next invocation, removed once it succeeds)
    quarantine/                       packs that could not be read, moved aside

A sweep's own directory (``--out``) holds its ``manifest.json`` (the config, its run
ids, the store it used, versions), written here, and its merged tables
(`echosim.experiments.tables`).

Writes are atomic (`echosim._files.atomic_file`: a locked temp file, fsync, then
``os.replace``): a process killed half-way leaves no partial pack, and the next sweep
removes its temp file. Every Parquet file written here (packs and a sweep's tables)
carries a checksum per page, verified when it is read. No pickles anywhere: Parquet
and JSON only.
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from echosim._files import atomic_file, open_dir, temp_pid, writer_gone

__all__ = [
    "CURVE_COLUMNS",
    "Store",
    "StoreError",
    "default_store",
    "provenance",
    "clean_temp",
    "valid_run_id",
    "write_table",
    "read_table",
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


def _row_json(row: dict) -> str:
    """A row as JSON text, through the one conversion of NumPy values (`specs.jsonable`,
    imported when a row is written so that importing the store stays light)."""
    from echosim.experiments.specs import jsonable

    return json.dumps(jsonable(row))


def _atomic_file(path: Path, follow: bool = True):
    """`echosim._files.atomic_file`, refusing a linked store directory with a `StoreError`."""
    return atomic_file(path, follow=follow, error=StoreError)


def _pyarrow(sub: str | None = None):
    """pyarrow (or ``pyarrow.<sub>``), or a one-line `MissingExtra` naming the extra."""
    from echosim.experiments.extras import require

    return require("pyarrow" + (f".{sub}" if sub else ""), "the run store")


def _nan_equal(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _check_rows(table, summaries: dict) -> None:
    """Raise unless the rows of a pack agree with the summaries in its footer: the runs
    are the same, each run's batches, steps and wall-clock never go down, samples = B x
    batches, and its last row is the summary's final point.

    Page checksums catch any damaged page of a pack written since they were added; a
    pack written before has none, and this is what it is verified against.
    """
    col = table.column("run_id").combine_chunks()
    if not hasattr(col, "indices"):
        col = col.dictionary_encode()
    codes = col.indices.to_numpy(zero_copy_only=False)
    names = col.dictionary.to_pylist()
    if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
        raise ValueError("run_id out of range")
    present = np.unique(codes)
    if {names[i] for i in present} != {rid for rid, row in summaries.items() if row.get("final_batches", 1)}:
        raise ValueError("the rows' runs are not the footer's")
    cols = {c: table.column(c).to_numpy() for c in CURVE_COLUMNS}
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    for rows in np.split(order, bounds) if codes.size else ():
        row = summaries[names[codes[rows[0]]]]
        b, k, t = cols["batches"][rows], cols["steps"][rows], cols["time"][rows]
        if np.any(np.diff(b) < 0) or np.any(np.diff(k) < 0) or not (np.all(np.isnan(t)) or np.all(np.diff(t) >= 0)):
            raise ValueError("batches, steps or time go down")
        B = row.get("optimizer.batch_size")
        if isinstance(B, int) and not np.array_equal(cols["samples"][rows], b * B):
            raise ValueError("samples are not B x batches")
        last = rows[-1]
        finals = {"batches": "final_batches", "risk": "final_risk", "risk_avg": "final_risk_avg",
                  "risk_end_avg": "final_risk_end_avg", "time": "final_time"}
        for c, key in finals.items():
            if key in row and row[key] is not None and not _nan_equal(float(cols[c][last]), float(row[key])):
                raise ValueError(f"the last {c} is not the summary's {key}")


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
        dfd = open_dir(self.root / QUARANTINE, follow=False, error=StoreError)
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
            _check_rows(table, json.loads((table.schema.metadata or {})[_META_KEY]))
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
                f.write(_row_json(row).encode("utf-8"))
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
        summaries = {p["summary"]["run_id"]: json.loads(_row_json(p["summary"])) for p in done}
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
            pid = temp_pid(p.name)
            if pid is None or pid == os.getpid() or not writer_gone(p, pid):
                continue
            p.unlink(missing_ok=True)
            n += 1
    return n


def valid_run_id(value) -> bool:
    """Whether `value` has the form of a run id (16 hex digits), so it names no path."""
    return isinstance(value, str) and _RUN_ID.match(value) is not None


def write_table(table, path) -> None:
    """Write a pyarrow Table as one Parquet file at `path`, atomically, every page with
    its checksum (as the packs); `read_table` verifies them."""
    pq = _pyarrow("parquet")

    with _atomic_file(Path(path)) as f:
        pq.write_table(table, f, compression="zstd", write_page_checksum=True)


def read_table(path):
    """A Parquet file written by `write_table` (or a pack), every page's checksum verified;
    a `ValueError` naming the file if any part of it cannot be read."""
    pq = _pyarrow("parquet")
    try:
        return pq.read_table(path, page_checksum_verification=True)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{str(path)!r} is damaged ({' '.join(str(exc).split())[:200]})") from None
    except Exception as exc:  # noqa: BLE001 - pyarrow's errors for garbage: ArrowInvalid, ...
        raise ValueError(f"{str(path)!r} is damaged ({' '.join(str(exc).split())[:200]})") from None


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
