"""Result store: atomic shards, failure records, no pickles; the merged tables (tables.merge, load)."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from echosim.experiments import store as results
from echosim.experiments import tables
from echosim.experiments.config import parse_config
from echosim.experiments.assemble import execute_run

CONFIG = {
    "problem": {"kind": "logistic", "dim": 3},
    "pipeline": {"arrival": {"kind": "exponential", "mean": 3.0}},
    "optimizer": {"lr": [0.5, 2.0], "batch_size": 4, "echo": [1, 2]},
    "sweep": {"n_batches": 30, "repetitions": 2, "name": "store"},
}


@pytest.fixture(scope="module")
def conf():
    return parse_config(CONFIG)


@pytest.fixture(scope="module")
def payloads(conf):
    return {r.run_id: execute_run(r) for r in conf.runs}


def test_a_pack_round_trip_is_exact_and_not_a_pickle(tmp_path, conf, payloads):
    store = results.Store(tmp_path)
    for p in payloads.values():
        store.add(p)
    assert store.pending == len(payloads) and store.finished() == set()
    store.flush()
    (pack,) = (tmp_path / "packs").glob("*.parquet")
    assert pack.read_bytes()[:4] == b"PAR1"  # Parquet, not pickle
    again = results.Store(tmp_path)  # a new process sees the same runs
    assert again.finished() == set(payloads)
    for rid, (summary, curves) in again.read(list(payloads)).items():
        assert summary["run_id"] == rid and summary["status"] == "ok" and "version.numpy" in summary
        for name in results.CURVE_COLUMNS:
            np.testing.assert_array_equal(curves[name], payloads[rid]["curves"][name])
    assert not list(tmp_path.rglob("*.tmp"))


def test_run_ids_include_the_package_version(conf):
    import echosim

    assert conf.runs[0].resolved()["version"] == echosim.__version__


def test_temp_files_are_ignored_and_stale_ones_cleaned(tmp_path, conf, payloads):
    store = results.Store(tmp_path)
    store.add(payloads[conf.runs[0].run_id])
    store.flush()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / "packs" / f".{conf.runs[1].run_id}-1.parquet.{dead.pid}.tmp"
    live = tmp_path / "packs" / f".{conf.runs[2].run_id}-1.parquet.{os.getppid()}.tmp"
    stale.write_bytes(b"partial")
    live.write_bytes(b"partial")
    assert results.Store(tmp_path).finished() == {conf.runs[0].run_id}
    assert results.clean_temp(tmp_path) == 1
    assert not stale.exists() and live.exists()


def test_a_writer_killed_mid_write_leaves_a_temp_file_that_resume_removes(tmp_path):
    target = tmp_path / "packs" / "0123456789abcdef-1.parquet"
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import sys\nfrom pathlib import Path\nfrom echosim.experiments.store import _atomic_file\n"
         f"with _atomic_file(Path({str(target)!r})) as f:\n"
         "    f.write(b'partial'); f.flush(); print('writing', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "writing"
        (temp,) = target.parent.glob(".*.tmp")
        assert results.clean_temp(tmp_path) == 0 and temp.exists()  # a live writer's file is kept
        writer.kill()
        os.waitid(os.P_PID, writer.pid, os.WEXITED | os.WNOWAIT)  # dead but not reaped: a zombie
        assert results.clean_temp(tmp_path) == 1 and not temp.exists()
        assert not target.exists() and results.Store(tmp_path).finished() == set()
    finally:
        writer.kill()
        writer.wait()
        writer.stdin.close()
        writer.stdout.close()


def test_failures_are_json_records_replaced_by_a_later_success(tmp_path, conf, payloads):
    spec = conf.runs[1]
    store = results.Store(tmp_path)
    store.add({"summary": dict(spec.params(), status="failed", error="RuntimeError: boom"), "curves": None})
    assert json.loads((tmp_path / "failed" / f"{spec.run_id}.json").read_text())["error"] == "RuntimeError: boom"
    assert spec.run_id not in store.finished() and store.failure(spec.run_id)["status"] == "failed"
    store.add(payloads[spec.run_id])
    store.flush()
    assert store.failure(spec.run_id) is None and spec.run_id in results.Store(tmp_path).finished()


def test_merge_gives_a_row_per_run_and_a_row_per_logged_point(tmp_path, conf, payloads):
    store = results.Store(tmp_path / "store")
    failed = conf.runs[0]
    for rid, p in payloads.items():
        store.add(p if rid != failed.run_id else
                  {"summary": dict(failed.params(), status="failed", error="ValueError: bad"), "curves": None})
    store.flush()
    ids = [r.run_id for r in conf.runs]
    results.write_manifest(tmp_path, {"run_ids": ids, "store": str(store.root), "settings": conf.settings,
                                      "complete": True})
    merged = tables.merge(tmp_path, ids, conf.settings, store=store)
    s, c, t = merged.summary, merged.curves, merged.tuned
    assert list(s["run_id"]) == ids
    assert set(s["status"]) == {"ok", "failed"}
    bad = s[s["status"] == "failed"].iloc[0]
    assert bad["error"] == "ValueError: bad" and bad["conv_batches"] == math.inf and not bad["converged"]
    ok = s[s["status"] == "ok"]
    assert {"optimizer.lr", "optimizer.echo", "pipeline.arrival", "seed", "pipeline_seed", "version.numba",
            "target.rtol", "conv_time", "F_star"} <= set(s.columns)
    n_points = sum(len(payloads[r]["curves"]["batches"]) for r in ok["run_id"])
    assert len(c) == n_points
    assert {"optimizer.lr", "seed", "status", "version.numpy", "batches", "risk", "time"} <= set(c.columns)
    assert set(c["run_id"].astype(str)) == set(ok["run_id"])
    assert len(t) == 2  # one row per echo factor
    for name in ("summary", "curves", "tuned"):
        assert (tmp_path / f"{name}.parquet").read_bytes()[:4] == b"PAR1"
    # the merged tables read back equal through load()
    loaded = tables.load(tmp_path)
    pd.testing.assert_frame_equal(loaded.summary, s, check_dtype=False)
    assert len(loaded.curves) == len(c) and len(loaded.tuned) == len(t)


@pytest.mark.parametrize("name", ["summary", "curves", "tuned"])
def test_a_sweeps_tables_carry_page_checksums_and_a_damaged_one_is_merged_again(tmp_path, conf, payloads, name):
    store = results.Store(tmp_path / "store")
    for p in payloads.values():
        store.add(p)
    store.flush()
    ids = [r.run_id for r in conf.runs]
    results.write_manifest(tmp_path, {"run_ids": ids, "store": str(store.root), "settings": conf.settings,
                                      "complete": True})
    merged = tables.merge(tmp_path, ids, conf.settings, store=store)
    path = tmp_path / f"{name}.parquet"
    (start, length), *_ = [(s, n) for _, col, s, n in _column_chunks(path)
                           if col in ("risk", "run_id", "optimizer.lr")]
    _scribble(path, start + length // 2, n=min(64, length // 2))
    with pytest.warns(UserWarning, match=f"{name}.parquet' is damaged.*merged again from the store"):
        again = tables.load(tmp_path)
    pd.testing.assert_frame_equal(again.summary, merged.summary, check_dtype=False)
    assert len(again.curves) == len(merged.curves) and len(again.tuned) == len(merged.tuned)
    path.unlink()
    results.write_manifest(tmp_path, {})
    tables.merge(tmp_path, ids, conf.settings, store=store)
    _scribble(path, start + length // 2, n=min(64, length // 2))
    with pytest.raises(ValueError, match="is damaged.*no manifest"):
        tables.load(tmp_path)


def test_changing_the_target_needs_no_rerun(tmp_path, conf, payloads):
    ids = [r.run_id for r in conf.runs]
    loose = dict(conf.settings, rtol=0.5)
    a = tables.merge(tmp_path, ids, conf.settings, payloads=payloads, write=False).summary
    b = tables.merge(tmp_path, ids, loose, payloads=payloads, write=False).summary
    assert (b["conv_batches"] <= a["conv_batches"]).all() and b["converged"].all()


def test_load_merges_from_the_store_on_the_fly_and_rejects_non_result_paths(tmp_path, conf, payloads):
    store = results.Store(tmp_path / "store")
    for p in payloads.values():
        store.add(p)
    store.flush()
    ids = [r.run_id for r in conf.runs]
    results.write_manifest(tmp_path, {"run_ids": ids, "store": str(store.root), "settings": conf.settings,
                                      "complete": False})  # as a sweep killed before merging leaves it
    res = tables.load(tmp_path)
    assert len(res.summary) == len(conf.runs) and len(res.curves) > 0
    results.write_manifest(tmp_path, {"run_ids": ["../../outside"], "store": str(store.root), "complete": False})
    with pytest.raises(ValueError, match="16 hex digits"):
        tables.load(tmp_path)  # read only what the store wrote
    with pytest.raises(ValueError, match="not a directory"):
        tables.load(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no echosim results"):
        tables.load(empty)


def test_provenance_names_the_versions():
    p = results.provenance()
    assert {"version.python", "version.numpy", "version.numba", "version.echosim"} <= set(p)


@pytest.mark.parametrize("run_ids", [["../../outside"], ["0123456789abcdef", "/etc/passwd"], "../x", [7]])
def test_load_reads_only_run_ids_the_store_wrote(tmp_path, conf, payloads, run_ids):
    d = tmp_path / "sweep"
    d.mkdir()
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"not to be read")
    (d / "manifest.json").write_text(json.dumps({"run_ids": run_ids, "complete": False}))
    with pytest.raises(ValueError, match=r"manifest.json: run_ids must be 16 hex digits"):
        tables.load(d)


# --------------------------------------------------------------------------- faults


def _pack_of(tmp_path, payloads, ids=None):
    store = results.Store(tmp_path)
    for rid, p in payloads.items():
        if ids is None or rid in ids:
            store.add(p)
    store.flush()
    (pack,) = (tmp_path / "packs").glob("*.parquet")
    return pack


def _scribble(path, offset, n=64):
    """Overwrite n bytes at `offset` with a fixed garbage pattern (the file keeps its size)."""
    data = bytearray(path.read_bytes())
    data[offset:offset + n] = bytes((37 * i + 11) % 256 for i in range(n))
    path.write_bytes(bytes(data))


def _column_chunks(path):
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            start = col.dictionary_page_offset or col.data_page_offset
            yield g, col.path_in_schema, start, col.total_compressed_size


@pytest.mark.parametrize("column", ["run_id", *results.CURVE_COLUMNS])
def test_garbage_in_any_column_with_the_footer_intact_quarantines_the_pack(tmp_path, payloads, column):
    pack = _pack_of(tmp_path, payloads)
    size = pack.stat().st_size
    (start, length), = [(s, n) for _, name, s, n in _column_chunks(pack) if name == column]
    _scribble(pack, start + length // 2, n=min(64, length // 2))
    assert pack.stat().st_size == size  # the footer (and the summaries in it) still reads
    store = results.Store(tmp_path)
    assert store.finished() == set(payloads)  # the index comes from the footer alone
    assert store.read(list(payloads)) == {}  # nothing wrong is ever handed out
    assert store.lost == set(payloads) and store.finished() == set()
    assert [p.name for p in store.quarantined] == [pack.name] and not pack.exists()
    assert results.Store(tmp_path).finished() == set()  # so the next sweep computes them again


@pytest.mark.parametrize("column", ["run_id", *results.CURVE_COLUMNS])
def test_a_pack_written_before_page_checksums_is_still_verified_on_read(tmp_path, payloads, column):
    import pyarrow.parquet as pq

    pack = _pack_of(tmp_path, payloads)
    pq.write_table(pq.read_table(pack), pack, compression="zstd")  # as before page checksums: none
    assert results.Store(tmp_path).read(list(payloads)).keys() == set(payloads)  # intact: read as before
    (start, length), = [(s, n) for _, name, s, n in _column_chunks(pack) if name == column]
    _scribble(pack, start + length // 2, n=min(64, length // 2))
    store = results.Store(tmp_path)
    assert store.read(list(payloads)) == {}  # the rows disagree with the footer's summaries: set aside
    assert [p.name for p in store.quarantined] == [pack.name] and store.lost == set(payloads)


def test_garbage_in_a_later_row_group_is_caught_too_and_other_copies_are_used(tmp_path, payloads):
    import pyarrow.parquet as pq

    ids = list(payloads)
    good = _pack_of(tmp_path / "a", payloads)
    table = pq.read_table(good)
    bad = tmp_path / "store" / "packs" / "0000000000000000-all.parquet"  # sorts first: the index's choice
    bad.parent.mkdir(parents=True)
    pq.write_table(table, bad, row_group_size=max(1, table.num_rows // 3), compression="zstd",
                   write_page_checksum=True)
    groups = sorted({g for g, *_ in _column_chunks(bad)})
    assert len(groups) >= 3
    _, _, start, length = [c for c in _column_chunks(bad) if c[0] == groups[-1] and c[1] == "risk"][0]
    _scribble(bad, start + length // 2)
    copy = bad.with_name(ids[0] + "-1.parquet")  # a second pack that holds one of the runs
    sub = table.filter(pc_equal(table, ids[0]))
    pq.write_table(sub.replace_schema_metadata({results._META_KEY: json.dumps(
        {ids[0]: json.loads(table.schema.metadata[results._META_KEY])[ids[0]]}).encode()}), copy,
        write_page_checksum=True)
    store = results.Store(tmp_path / "store")
    got = store.read(ids)
    assert set(got) == {ids[0]} and store.lost == set(ids[1:])  # the copy serves its run, the rest are lost
    np.testing.assert_array_equal(got[ids[0]][1]["risk"], payloads[ids[0]]["curves"]["risk"])


def pc_equal(table, rid):
    import pyarrow.compute as pc

    return pc.equal(table.column("run_id"), rid)


def test_store_writes_never_follow_a_link_planted_in_the_store(tmp_path, conf, payloads):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious")
    root = tmp_path / "store"
    (root / "failed").mkdir(parents=True)
    spec = conf.runs[0]
    # a link where a failure record goes: replaced by the record, never written through
    (root / "failed" / f"{spec.run_id}.json").symlink_to(victim)
    store = results.Store(root)
    store.add({"summary": dict(spec.params(), status="failed", error="RuntimeError: x"), "curves": None})
    assert victim.read_text() == "precious" and not (root / "failed" / f"{spec.run_id}.json").is_symlink()
    # a link where a pack goes: the same
    first = next(iter(payloads))
    (root / "packs").mkdir()
    (root / "packs" / f"{first}-{len(payloads)}.parquet").symlink_to(victim)
    for p in payloads.values():
        store.add(p)
    store.flush()
    assert victim.read_text() == "precious"
    assert results.Store(root).finished() == set(payloads)
    # packs/ itself a link out of the store: refused, nothing written there
    elsewhere = tmp_path / "store2"
    elsewhere.mkdir()
    (elsewhere / "packs").symlink_to(outside, target_is_directory=True)
    s2 = results.Store(elsewhere)
    s2.add(payloads[first])
    with pytest.raises(results.StoreError, match="symbolic link"):
        s2.flush()
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
