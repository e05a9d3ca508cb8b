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
