"""The PyTorch job's plan check (benchmarks/torch_job/plan_check.py), without torch: the
planner's time per fresh batch from a pilot's records on constructed runs whose answer is
known, the pilot cut from a run's opening, the measured side and the error summary."""

import ast
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from echosim.loop.records import Records

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "torch_job" / "plan_check.py"
_spec = importlib.util.spec_from_file_location("torch_job_plan_check", PATH)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

B = 128


def records(policy, echo, load, steps_per_batch, step):
    """A run's Records: load time per fresh batch, K_t, one step time for every step."""
    load = np.asarray(load, dtype=float)
    T = load.size
    spb = np.resize(np.asarray(steps_per_batch, dtype=np.int64), T)
    N = int(spb.sum())
    return Records(policy, echo, B, load_time=load, load_censored=np.zeros(T, bool), wait_time=np.zeros(T),
                   steps_per_batch=spb, cap=spb.copy(), epoch=np.zeros(T, np.int64),
                   step_batch=np.repeat(np.arange(T), spb), step_start=np.zeros(N), step_time=np.full(N, step),
                   loss=np.full(N, np.nan))


def test_plan_check_imports_no_torch():
    tree = ast.parse(PATH.read_text(encoding="utf-8"))
    names = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    names |= {node.module.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert names - set(sys.stdlib_module_names) == {"numpy", "echosim", "rules"}


@pytest.mark.parametrize("label,policy,echo,step,expected", [
    ("K=1", "sync", 1, 0.01, 0.1),        # the loader sets the pace
    ("K=4", "fixed", 4, 0.01, 0.1),       # 4 steps of 10 ms fit inside a 100 ms load
    ("K=8", "fixed", 8, 0.02, 0.16),      # 8 steps of 20 ms do not: the loop sets the pace
])
def test_the_planned_time_per_fresh_batch_is_the_pipeline_s(label, policy, echo, step, expected):
    rec = records(policy, echo, np.full(41, 0.1), echo, step)
    timing = check.timing_from_records([rec], B)
    got = check.predicted_interval(timing, label, B, n=400, seeds=2)
    assert got == pytest.approx(expected, rel=0.01)


def test_greedy_is_planned_at_the_loader_s_pace():
    rec = records("greedy", None, np.full(41, 0.1), [9, 10, 11], 0.01)
    got = check.predicted_interval(check.timing_from_records([rec], B), "greedy", B, n=400, seeds=2)
    assert got == pytest.approx(0.1, rel=0.02)


def test_the_profile_s_timing_is_the_loader_and_the_step_timed_apart():
    prof = {"loader_times": [0.05] * 40, "step_times": [0.02] * 40}
    timing = check.timing_from_profile(prof, B)
    assert check.predicted_interval(timing, "K=1", B, n=400, seeds=2) == pytest.approx(0.05, rel=0.01)
    assert check.predicted_interval(timing, "K=4", B, n=400, seeds=2) == pytest.approx(0.08, rel=0.01)


def test_predicted_interval_refuses_a_policy_it_does_not_plan():
    rec = records("auto", None, np.full(5, 0.1), 2, 0.01)
    with pytest.raises(ValueError, match="^label: expected one of K=1"):
        check.predicted_interval(check.timing_from_records([rec], B), "auto", B)


def test_measured_reads_T_seconds_and_the_pace_after_the_pilot():
    tt = np.concatenate([[0.0], 0.1 * np.arange(1, 11), 1.0 + 0.3 * np.arange(1, 11)])  # 20 fresh batches
    vl = np.concatenate([np.linspace(2, 0.5, 8), np.full(13, 0.1)])
    m = check.measured({"val_loss": vl, "train_time": tt, "steps_cum": np.arange(21)}, 0.2, pilot=10)
    assert m["T"] == 8 and m["seconds"] == pytest.approx(0.8)
    assert m["interval_after_pilot"] == pytest.approx(0.3)
    assert math.isnan(check.measured({"val_loss": vl, "train_time": tt, "steps_cum": np.arange(21)}, 0.2,
                                     pilot=20)["interval_after_pilot"])


def test_relative_error():
    assert check.relative_error(1.1, 1.0) == pytest.approx(0.1)
    assert check.relative_error(0.5, 1.0) == pytest.approx(-0.5)
    for p, a in ((None, 1.0), (1.0, None), (math.nan, 1.0), (1.0, 0.0), (math.inf, 1.0)):
        assert math.isnan(check.relative_error(p, a))


def run(label, seed, records_, T, per_batch, n=60, block=0):
    tt = per_batch * np.arange(n + 1.0)
    vl = np.where(np.arange(n + 1) >= T, 0.1, 1.0)
    record = {"label": label, "seed": seed, "block": block}
    return record, {"val_loss": vl, "train_time": tt, "steps_cum": np.arange(n + 1)}, records_


def test_check_runs_plans_from_the_pilot_only_and_multiplies_by_the_measured_T():
    # the run's loader is 100 ms per batch during the pilot (40 batches) and 200 ms after: the
    # plan from the pilot says 100 ms, so it predicts T x 0.1 s whatever the rest of the run did
    load = np.concatenate([np.full(40, 0.1), np.full(20, 0.2)])
    rs = [run("K=1", 0, records("sync", 1, load, 1, 0.01), T=30, per_batch=0.1),
          run("K=2", 0, records("fixed", 2, load, 2, 0.01), T=50, per_batch=0.125),
          run("auto", 0, records("auto", None, load, 2, 0.01), T=30, per_batch=0.1)]  # not planned: skipped
    prof = {0: {"loader_times": [0.05] * 40, "step_times": [0.01] * 40}}
    rows = check.check_runs(rs, prof, 0.5, B, pilot=40, n=400, seeds=2)
    assert [r["label"] for r in rows] == ["K=1", "K=2"]
    k1, k2 = rows
    assert k1["T"] == 30 and k1["planned_s"] == pytest.approx(3.0, rel=0.01)
    assert k1["error_records"] == pytest.approx(0.0, abs=0.01)
    assert k1["profiled_s"] == pytest.approx(1.5, rel=0.01) and k1["error_profile"] == pytest.approx(-0.5, abs=0.01)
    assert k2["planned_s"] == pytest.approx(5.0, rel=0.01)
    assert k2["error_records"] == pytest.approx(5.0 / 6.25 - 1, abs=0.01)
    assert k2["error_after_pilot"] == pytest.approx(0.1 / 0.125 - 1, abs=0.01)


def test_a_run_that_missed_the_target_has_no_error():
    rec = records("sync", 1, np.full(60, 0.1), 1, 0.01)
    record, arrays, r = run("K=1", 0, rec, T=30, per_batch=0.1)
    arrays["val_loss"][-1] = 1.0
    (row,) = check.check_runs([(record, arrays, r)], {}, 0.5, B, n=200, seeds=1)
    assert row["T"] is None and math.isnan(row["error_records"]) and math.isnan(row["error_profile"])
    assert math.isnan(check.error_summary([row])[0]["error_records_median"])  # nothing to summarise


def test_error_summary_per_policy_and_overall():
    rows = [{"label": lab, **{k: e for k in check.ERRORS}}
            for lab, e in (("K=1", 0.1), ("K=1", -0.3), ("K=1", 0.2), ("greedy", -0.05))]
    s = {r["label"]: r for r in check.error_summary(rows)}
    assert list(s) == ["K=1", "greedy", "all"]
    assert s["K=1"]["runs"] == 3 and s["K=1"]["error_records_median"] == pytest.approx(0.2)
    assert s["K=1"]["error_records_max"] == pytest.approx(0.3)
    assert s["all"]["error_profile_median"] == pytest.approx(0.15) and s["all"]["error_profile_max"] == 0.3
    text = check.format_tables([], check.error_summary(rows), 40)
    assert "| K=1 | 3 | 20% | 30% |" in text and "| all | 4 |" in text


def test_the_cli_reads_a_run_directory(tmp_path, capsys):
    import rules  # benchmarks/torch_job/rules.py, on the path since plan_check was loaded

    rec = records("sync", 1, np.full(61, 0.1), 1, 0.01)
    rec.save(tmp_path / "K1-seed0.records.npz")
    record = {k: None for k in rules.RUN_KEYS}
    record.update(format=rules.FORMAT, name="K1-seed0", policy=1, label="K=1", seed=0, block=0, position=0,
                  loadavg_start=[1.0], loadavg_end=[1.0], fresh_batches=60)
    n = 60
    arrays = {k: np.zeros(n + 1) for k in rules.RUN_ARRAYS}
    arrays.update(val_loss=np.where(np.arange(n + 1) >= 20, 0.1, 1.0), train_time=0.1 * np.arange(n + 1.0),
                  steps_cum=np.arange(n + 1))
    rules.save_run(tmp_path, record, arrays)
    (tmp_path / "job.json").write_text(json.dumps({"config": {"batch_size": B, "max_echo": 64}, "target": 0.5}))
    assert check.main([str(tmp_path), "--json", str(tmp_path / "check.json")]) == 0
    out = capsys.readouterr().out
    assert "| K=1 | 0 | 20 | 2.00 |" in out
    got = json.loads((tmp_path / "check.json").read_text())
    assert got["rows"][0]["planned_s"] == pytest.approx(2.0, rel=0.01)
    with pytest.raises(SystemExit) as exc:
        check.main([str(tmp_path / "nowhere")])
    assert exc.value.code == 2
