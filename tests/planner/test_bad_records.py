"""Records whose fields are out of range: a ValueError naming the field (API), one line and exit 2 (CLI)."""

import dataclasses

import numpy as np
import pytest

import echosim
from echosim.cli import main


def records(policy="sync", n=12, B=64):
    it = echosim.echoing(range(n), policy, batch_size=B)
    for i, _ in enumerate(it):
        it.report(1.0 / (1 + i))
    return it.records()


@pytest.mark.parametrize("field, value, match", [
    ("load_time", lambda r: np.r_[r.load_time[:-1], -1.0], "load_time: expected times in seconds"),
    ("wait_time", lambda r: np.r_[r.wait_time[:-1], np.inf], "wait_time: expected times in seconds"),
    ("small_batch", lambda r: np.full(r.n_batches, 64), "small_batch: expected b < the batch size"),
    ("grad_sq_full", lambda r: np.full(r.n_batches, -1.0), "grad_sq_full: expected squared norms >= 0"),
    ("echo", lambda r: 10 ** 20, "echo: expected 1 for policy 'sync'"),
])
def test_records_out_of_range_are_refused_when_made(field, value, match):
    r = records()
    with pytest.raises(ValueError, match=f"^records: {match}"):
        dataclasses.replace(r, **{field: value(r)})


def test_k_beyond_the_planners_limit_is_refused_by_plan():
    r = records(2)
    bad = dataclasses.replace(r, echo=5000, cap=np.full(r.n_batches, 5000), steps_per_batch=np.full(r.n_batches, 5000), step_batch=np.repeat(
        np.arange(r.n_batches), 5000), step_start=np.zeros(5000 * r.n_batches),
        step_time=np.zeros(5000 * r.n_batches), loss=np.zeros(5000 * r.n_batches))
    with pytest.raises(ValueError, match="^records: .*echo must be an integer K in 1..4096"):
        echosim.plan(records=bad, batch_size=64, steps_to_target={64: 1100, 1024: 160}, seeds=1)


def test_cli_bad_records_one_line_exit_2(tmp_path, capsys):
    r = records(2)
    bad = dataclasses.replace(r, echo=5000, cap=np.full(r.n_batches, 5000), steps_per_batch=np.full(r.n_batches, 5000), step_batch=np.repeat(
        np.arange(r.n_batches), 5000), step_start=np.zeros(5000 * r.n_batches),
        step_time=np.zeros(5000 * r.n_batches), loss=np.zeros(5000 * r.n_batches))
    path = tmp_path / "bad.npz"
    bad.save(path)
    assert main(["plan", "--records", str(path), "--batch-size", "64", "--steps-to-target", "64=1100",
                 "--steps-to-target", "1024=160", "--seeds", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "records" in err[0] and "echo" in err[0]
