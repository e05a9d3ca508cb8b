"""The torch job's pure pieces (benchmarks/torch_job/rules.py), without torch: the target
rule against its definition, the interleaved order, the record format and the summary."""

import ast
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_job" / "rules.py"
_spec = importlib.util.spec_from_file_location("torch_job_rules", PATH)
rules = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rules)


def naive_stays(values, target):
    for n in range(len(values)):
        if all(v <= target for v in values[n:]):
            return n
    return None


def naive_first(values, target):
    return next((n for n, v in enumerate(values) if v <= target), None)


def _imported(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    return names | {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level == 0}


def test_rules_import_only_the_standard_library_and_numpy():
    assert _imported(PATH) - set(sys.stdlib_module_names) == {"numpy", "harness"}
    # the shared harness imports the standard library alone at import (echosim only inside functions)
    top = ast.parse((PATH.parents[1] / "harness.py").read_text(encoding="utf-8")).body
    names = {a.name.split(".")[0] for node in top if isinstance(node, ast.Import) for a in node.names}
    names |= {node.module.split(".")[0] for node in top if isinstance(node, ast.ImportFrom)}
    assert names - {"__future__"} <= set(sys.stdlib_module_names)


@given(st.lists(st.one_of(st.floats(0.0, 3.0), st.just(math.nan)), max_size=30), st.floats(0.1, 2.0))
def test_target_rules_equal_their_definitions(values, target):
    assert rules.reaches_and_stays(values, target) == naive_stays(values, target)
    assert rules.first_entry(values, target) == naive_first(values, target)


def test_target_rules_on_a_curve_that_dips_then_comes_back():
    v = [2.3, 1.0, 0.4, 0.6, 0.45, 0.3, 0.2]
    assert rules.first_entry(v, 0.5) == 2
    assert rules.reaches_and_stays(v, 0.5) == 4
    assert rules.reaches_and_stays(v + [0.51], 0.5) is None
    assert rules.reaches_and_stays([], 0.5) is None


def test_at_target_reads_steps_and_seconds_at_T():
    arrays = {"val_loss": np.array([2.0, 0.9, 1.2, 0.7, 0.6]), "steps_cum": np.array([0, 4, 8, 12, 16]),
              "train_time": np.array([0.0, 0.5, 1.0, 1.5, 2.0])}
    assert rules.at_target(arrays, 1.0) == {"T": 3, "T_first": 1, "steps": 12, "seconds": 1.5, "seconds_first": 0.5}
    assert rules.at_target(arrays, 0.1)["seconds"] is None


@pytest.mark.parametrize("n_seeds", [1, 3, 5, 7])
def test_interleaved_order_runs_every_policy_once_per_seed_in_rotated_positions(n_seeds):
    policies = [1, 2, 4, 8, "greedy"]
    seeds = list(range(10, 10 + n_seeds))
    order = rules.interleaved_order(policies, seeds)
    assert len(order) == len(policies) * n_seeds
    blocks = [[p for s, p in order if s == seed] for seed in seeds]
    assert [s for s, _ in order] == [s for s in seeds for _ in policies]  # one seed's block at a time
    assert all(sorted(map(str, b)) == sorted(map(str, policies)) for b in blocks)
    for p in policies:  # no policy always first or last: positions differ between the first P blocks
        positions = [b.index(p) for b in blocks[: len(policies)]]
        assert len(set(positions)) == len(positions)


@pytest.mark.parametrize("policies,seeds", [([], [0]), ([1, "sync"], [0]), ([1, 2], [0, 0]), ([1], [])])
def test_interleaved_order_refuses_repeats_and_empty_lists(policies, seeds):
    with pytest.raises(ValueError):
        rules.interleaved_order(policies, seeds)


def test_parse_policy():
    assert rules.parse_policy(" 4") == 4
    assert rules.parse_policy("greedy") == "greedy"
    assert rules.policy_label(rules.parse_policy("8")) == "K=8"
    assert rules.run_name(8, 2) == "K8-seed2"
    for bad in ("0", "-2", ""):
        with pytest.raises(ValueError, match="policy"):
            rules.parse_policy(bad)


def _record(policy, seed, block, position):
    return {"format": rules.FORMAT, "name": rules.run_name(policy, seed), "policy": policy,
            "label": rules.policy_label(policy), "seed": seed, "block": block, "position": position,
            "config": {"lr": 0.2}, "versions": {}, "loadavg_start": [1.0, 1.0, 1.0], "loadavg_end": [2.0, 1.0, 1.0],
            "fresh_batches": 4, "steps": 8, "snapshot_seconds": 1e-4, "elapsed_seconds": 1.0,
            "echoing_summary": {"throughput": float("nan"), "mean_echo": 2.0}}


def _arrays(val_loss, K=2):
    n = len(val_loss) - 1
    return {"val_loss": np.asarray(val_loss, float), "val_acc": np.zeros(n + 1), "train_time": np.arange(n + 1) * 0.1,
            "steps_cum": np.arange(n + 1) * K, "echo": np.full(n, K), "step_time": np.full(n * K, 0.01),
            "step_loss": np.ones(n * K), "step_fresh": np.repeat(np.arange(1, n + 1), K),
            "load_time": np.array([0.5, 0.05, 0.07, 0.06, 0.01]), "load_censored": np.array([0, 0, 0, 0, 1], bool),
            "wait_time": np.zeros(n + 1), "cap": np.full(n + 1, K)}


def test_a_run_round_trips_and_nan_is_written_as_null(tmp_path):
    path = rules.save_run(tmp_path, _record(2, 0, 0, 1), _arrays([2.0, 1.0, 0.5, 0.4, 0.3]))
    assert json.loads(path.read_text())["echoing_summary"]["throughput"] is None
    rec, arr = rules.load_run(path)
    assert rec["label"] == "K=2" and rec["steps"] == 8
    assert set(rules.RUN_ARRAYS) <= set(arr) and np.array_equal(arr["val_loss"], [2.0, 1.0, 0.5, 0.4, 0.3])
    assert not list(tmp_path.glob(".*")), "temporary files left behind"


def test_save_run_refuses_a_record_missing_a_key(tmp_path):
    rec = _record(2, 0, 0, 0)
    del rec["loadavg_end"]
    with pytest.raises(ValueError, match="loadavg_end"):
        rules.save_run(tmp_path, rec, _arrays([2.0, 1.0]))
    arrays = _arrays([2.0, 1.0])
    del arrays["echo"]
    with pytest.raises(ValueError, match="echo"):
        rules.save_run(tmp_path, _record(2, 0, 0, 0), arrays)


def test_load_run_refuses_another_format(tmp_path):
    path = rules.save_run(tmp_path, _record(1, 0, 0, 0), _arrays([2.0, 1.0]))
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": "something/0"}))
    with pytest.raises(ValueError, match="format"):
        rules.load_run(path)


def test_summary_medians_treat_a_missed_target_as_not_reached(tmp_path):
    curves = {0: [2.0, 0.9, 0.4, 0.3, 0.2], 1: [2.0, 1.5, 1.2, 0.4, 0.3], 2: [2.0, 1.5, 1.2, 1.1, 0.9]}
    for block, seed in enumerate(curves):
        rules.save_run(tmp_path, _record(2, seed, block, 0), _arrays(curves[seed]))
        rules.save_run(tmp_path, _record("greedy", seed, block, 1), _arrays([2.0, 1.5, 1.4, 1.2, 0.4 + seed], K=5))
    runs = rules.load_runs(tmp_path)
    assert [(r["block"], r["position"]) for r, _ in runs] == [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    profiles = {b: {"loader_mean": 0.04, "step_mean": 0.002} for b in range(3)}
    rows = rules.per_run_rows(runs, 0.5, profiles)
    table = rules.summary_rows(rows)
    k2, greedy = table
    assert (k2["label"], k2["reached"], k2["T"], k2["steps"]) == ("K=2", 2, 3.0, 6.0)  # T = 2, 3 and not reached
    assert (greedy["reached"], greedy["T"], greedy["seconds"]) == (1, None, None)
    assert k2["mean_K"] == 2.0 and greedy["mean_K"] == 5.0
    assert k2["load_in_run"] == pytest.approx(0.06) and k2["load_profiled"] == 0.04  # the censored 0.01 left out
    assert k2["load_censored"] == 0.25
    text = rules.format_summary(table, 0.5, 4)
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(lines) == 4 and len({ln.count("|") for ln in lines}) == 1
    assert "not reached" in lines[-1]
    runs_text = rules.format_runs(rows).splitlines()
    assert len(runs_text) == 8 and len({ln.count("|") for ln in runs_text}) == 1
