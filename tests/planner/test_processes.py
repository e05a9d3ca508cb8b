"""The planner's choice of worker processes per sweep: in this process for small sweeps,
and no more processes than the load average leaves cores for."""

import pytest

from echosim.planner.simulated import PARALLEL_WORK, _sweep_work, processes_for


def test_small_sweeps_run_in_this_process(monkeypatch):
    import os

    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert processes_for(4, PARALLEL_WORK / 2) == 1
    assert processes_for(1, PARALLEL_WORK * 10) == 1


@pytest.mark.parametrize("load, cores, want", [(0.0, 2, 2), (0.9, 2, 2), (1.5, 2, 1), (12.0, 2, 1),
                                               (1.0, 8, 4), (5.2, 8, 3), (0.0, 3, 3)])
def test_large_sweeps_use_the_cores_the_load_leaves(monkeypatch, load, cores, want):
    import os

    from echosim.experiments import executors

    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(executors, "default_workers", lambda: cores)
    assert processes_for(4, PARALLEL_WORK * 10) == want


def test_sweep_work_counts_steps_per_fresh_batch():
    # fixed K=4 counts 4 steps a batch, greedy min(R, max_echo), sync 1
    one = _sweep_work([{"policy": "sync", "echo": 1}], 100, 8, 10, 3, 2)
    assert one == 100 * 8 * 10 * 3 * 2
    assert _sweep_work([{"policy": "fixed", "echo": 4}], 100, 8, 10, 3, 2) == 4 * one
    assert _sweep_work([{"policy": "greedy", "echo": 1, "R": 6.5, "max_echo": 64}], 100, 8, 10, 3, 2) == 6.5 * one
    assert _sweep_work([{"policy": "greedy", "echo": 1, "R": 100.0, "max_echo": 16}], 100, 8, 10, 3, 2) == 16 * one


def _pipe():
    return {"arrival": {"kind": "gamma", "mean": 0.08, "cv": 0.5}, "step_time": {"kind": "deterministic", "value": 0.01},
            "workers": 1, "prefetch": 2}


def test_compile_first_warms_every_policy_of_the_plan_with_the_processes_given(monkeypatch):
    import warnings

    from echosim.experiments import executors
    from echosim.planner.simulated import PROBLEMS, compile_first

    seen = []
    monkeypatch.setattr(executors, "warm_up", lambda conf, workers, announce=None: seen.append((conf, workers)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing said: the sweeps say what applies to them
        compile_first(dict(PROBLEMS["logistic"]), {}, _pipe(), ["sync", "fixed", "greedy", "auto", "sync"], 64, 2)
    (conf, workers), = seen
    assert workers == 2
    assert sorted({r.pipeline["policy"] for r in conf.runs}) == ["auto", "fixed", "greedy", "sync"]
    assert {r.optimizer["method"] for r in conf.runs} == {"echoed_gd"}


def test_compile_first_leaves_a_bad_setting_to_the_sweeps(monkeypatch):
    from echosim.experiments import executors
    from echosim.planner.simulated import PROBLEMS, compile_first

    seen = []
    monkeypatch.setattr(executors, "warm_up", lambda *a, **k: seen.append(a))
    compile_first(dict(PROBLEMS["logistic"]), {"momentum": "fast"}, _pipe(), ["sync"], 64, 2)
    assert seen == []
