"""The run assembler: a group of learning rates gives what its runs give one at a time."""

import math

import numpy as np
import pytest

from echosim.experiments.assemble import execute_group, execute_run, group_by_learning_rate
from echosim.experiments.config import parse_config

CONFIGS = {
    "logistic-pipeline": {
        "problem": {"kind": "logistic", "dim": 3, "radius": 0.5, "w_star_norm": 3.0},
        "pipeline": {"arrival": {"kind": "gamma", "mean": 3.0, "cv": 0.5}},
        "optimizer": {"lr": [0.5, 1.0, 4.0], "batch_size": 8, "echo": [1, 3]},
        "sweep": {"n_batches": 40, "repetitions": 2, "name": "tiny"},
    },
    "least-squares-diverging": {
        "problem": {"kind": "least_squares", "dim": 4, "decay": 1.0},
        "optimizer": {"lr": [0.1, 0.5, 1e5], "batch_size": 6, "echo": 2, "method": "echoed_nesterov"},
        "sweep": {"n_batches": 30, "name": "ls"},
    },
}


def assert_payloads_equal(got, want):
    a, b = dict(got["summary"]), dict(want["summary"])
    assert a.pop("elapsed_s") >= 0 and b.pop("elapsed_s") >= 0  # the only machine-dependent column
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], float) and k.startswith("final_"):
            assert a[k] == pytest.approx(b[k], rel=1e-12, abs=1e-15, nan_ok=True), k
        else:
            assert a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])), k
    if want["curves"] is None:
        assert got["curves"] is None
        return
    assert got["curves"].keys() == want["curves"].keys()
    for k, v in want["curves"].items():
        if v.dtype.kind == "i" or k == "time":
            np.testing.assert_array_equal(got["curves"][k], v)
        else:
            np.testing.assert_allclose(got["curves"][k], v, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", CONFIGS)
def test_execute_group_equals_execute_run_for_each_spec(name):
    runs = parse_config(CONFIGS[name]).runs
    groups = group_by_learning_rate(runs)
    assert sorted(s.run_id for g in groups for s in g) == sorted(s.run_id for s in runs)
    assert all(len(g) == 3 for g in groups)
    for group in groups:
        for got, spec in zip(execute_group(group), group):
            assert_payloads_equal(got, execute_run(spec))
    statuses = {p["summary"]["status"] for g in groups for p in execute_group(g)}
    assert statuses == ({"ok", "diverged"} if "diverging" in name else {"ok"})


def test_groups_share_everything_but_the_learning_rate():
    runs = parse_config(CONFIGS["logistic-pipeline"]).runs
    for group in group_by_learning_rate(runs):
        assert len({s.optimizer["lr"] for s in group}) == len(group)
        assert len({(s.seed, s.pipeline_seed, s.echo) for s in group}) == 1
    with pytest.raises(ValueError, match="more than the learning rate"):
        execute_group(runs[:4])


def test_a_group_that_fails_as_a_whole_falls_back_to_one_run_at_a_time(monkeypatch):
    from echosim.training import runner

    def broken(*args, **kwargs):
        raise RuntimeError("no")

    monkeypatch.setattr(runner, "run_many", broken)
    group = group_by_learning_rate(parse_config(CONFIGS["least-squares-diverging"]).runs)[0]
    for got, spec in zip(execute_group(group), group):
        assert_payloads_equal(got, execute_run(spec))
