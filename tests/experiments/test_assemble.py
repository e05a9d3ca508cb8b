"""The run assembler: a group of learning rates gives bitwise what its runs give one at a
time, so a sweep's results never depend on how its runs were grouped (or resumed)."""

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
    """Bitwise equal, but for the run's own wall time."""
    a, b = dict(got["summary"]), dict(want["summary"])
    assert a.pop("elapsed_s") >= 0 and b.pop("elapsed_s") >= 0  # the only machine-dependent column
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k])), k
    if want["curves"] is None:
        assert got["curves"] is None
        return
    assert got["curves"].keys() == want["curves"].keys()
    for k, v in want["curves"].items():
        np.testing.assert_array_equal(got["curves"][k], v, err_msg=k)


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

    real = runner.run_many

    def broken(problem, optimizers, **kwargs):  # fails for a group, works for one run
        if len(optimizers) > 1:
            raise RuntimeError("no")
        return real(problem, optimizers, **kwargs)

    monkeypatch.setattr(runner, "run_many", broken)
    group = group_by_learning_rate(parse_config(CONFIGS["least-squares-diverging"]).runs)[0]
    got = execute_group(group)
    assert {p["summary"]["status"] for p in got} == {"ok", "diverged"}  # no "failed": each ran alone
    for payload, spec in zip(got, group):
        assert_payloads_equal(payload, execute_run(spec))


@pytest.mark.parametrize("budget", [{"n_batches": 300}, {"n_batches": 300, "max_steps": 700, "log_unit": "step"},
                                    {"time_budget": 900.0}], ids=["batches", "step-budget", "time-budget"])
def test_a_long_pipeline_run_gives_the_payload_of_one_that_holds_its_steps(budget, monkeypatch):
    """Steps derived in chunks of 29 (see echosim.pipeline.stream) change no result."""
    from echosim.pipeline import stream

    config = {
        "problem": {"kind": "least_squares", "dim": 3},
        "pipeline": {"arrival": {"kind": "gamma", "mean": 4.0, "cv": 0.5}, "policy": ["greedy", "fixed"],
                     "step_time": {"kind": "gamma", "mean": 1.0, "cv": 0.3}, "switch_overhead": 0.1},
        "optimizer": {"lr": 0.1, "batch_size": 4, "echo": 2.5},
        "sweep": {"name": "long", **budget},
    }
    runs = parse_config(config).runs
    held = [execute_run(spec) for spec in runs]
    monkeypatch.setattr(stream, "STEP_CHUNK", 29)
    for spec, want in zip(runs, held):
        assert want["summary"]["status"] == "ok" and want["summary"]["n_steps"] > 10 * 29
        assert_payloads_equal(execute_run(spec), want)


def test_a_cell_of_one_stream_gives_each_run_what_it_gives_alone():
    """Runs that share a fresh-batch stream (same problem, B, data seed) but differ in lr, K and
    method run side by side in one cell, each bitwise its own run (elapsed_s aside)."""
    from echosim.experiments.assemble import execute_cell, group_by_stream

    runs = parse_config({
        "problem": {"kind": "logistic", "dim": 3, "radius": 0.5, "w_star_norm": 3.0},
        "pipeline": {"arrival": {"kind": "gamma", "mean": 3.0, "cv": 0.5}},
        "optimizer": {"lr": [0.5, 4.0, 1e7], "batch_size": 8, "echo": [1, 3],
                      "method": ["echoed_gd", "echoed_nesterov"]},
        "sweep": {"n_batches": 40, "repetitions": 2, "name": "cells"},
    }).runs
    cells = group_by_stream(runs)
    assert [len(c) for c in cells] == [12, 12]  # one cell per repetition (data seed)
    assert all(len({s.seed for s in c}) == 1 for c in cells)
    for cell in cells:
        got = execute_cell(cell)
        for payload, spec in zip(got, cell, strict=True):
            assert payload["summary"]["run_id"] == spec.run_id
            assert_payloads_equal(payload, execute_run(spec))
    assert {p["summary"]["status"] for p in got} == {"ok", "diverged"}
    with pytest.raises(ValueError, match="one fresh-batch stream"):
        execute_cell(cells[0][:1] + cells[1][:1])
