"""The one-line verdict: the steady state's waits read off records built by hand (known
answers), epoch-boundary stalls apart, what the plan predicts with its band, and the
command line's verdict under the table."""

import math

import numpy as np
import pytest

import echosim
from echosim.loop.records import Records
from echosim.loop.verdict import NEEDS, input_bound, prediction
from echosim.planner.verdict import verdict


def made(policy="sync", waits=(0.5, 0.004, 0.0, 0.004, 0.2, 0.004), epoch=(0, 0, 0, 0, 1, 1), K=1,
         step=0.001, load=0.005, B=256):
    """Records of a run with the given waits per fresh batch, K steps each of `step` seconds."""
    T = len(waits)
    N = T * K
    return Records(policy=policy, echo=K if policy != "greedy" else None, batch_size=B,
                   load_time=np.full(T, load), load_censored=np.zeros(T, bool), wait_time=np.asarray(waits, float),
                   steps_per_batch=np.full(T, K, np.int64), cap=np.full(T, K, np.int64),
                   epoch=np.asarray(epoch, np.int64), step_batch=np.repeat(np.arange(T), K),
                   step_start=np.arange(N) * step, step_time=np.full(N, step), loss=np.full(N, np.nan))


def test_the_steady_state_leaves_out_start_up_and_epoch_boundaries():
    m = input_bound(made())
    # steady: batches 1, 2, 3, 5 (0 is start-up, 4 starts epoch 1); three of them waited 4 ms
    assert m["batches"] == 4 and m["steps"] == 4 and m["waited"] == 3
    assert m["waited_fraction"] == pytest.approx(0.75) and m["wait_per_step_s"] == pytest.approx(0.003)
    assert m["wait_fraction"] == pytest.approx(0.012 / 0.016)
    assert m["epoch_stalls"] == 1 and m["epoch_stall_s"] == pytest.approx(0.2) and m["startup_s"] == 0.5
    line = str(verdict(made()))
    assert line.startswith("input-bound 75% of steps under sync (exposed wait 3 ms per step of 1 ms, 75% of the time)")
    assert NEEDS in line and line.endswith("apart: 1 epoch-boundary stall of 200 ms on average")


def test_a_wait_below_the_threshold_is_the_hand_over_not_the_loader():
    m = input_bound(made("fixed", waits=(0.1, 20e-6, 30e-6, 0.002), epoch=(0, 0, 0, 0), K=2))
    assert m["waited"] == 1 and m["steps"] == 6 and m["epoch_stalls"] == 0


def test_pooled_over_a_pilot_reads_its_sync_runs():
    runs = [made(), made("fixed", waits=(0.5, 0.0, 0.0, 0.0, 0.0, 0.0), K=4), made()]
    v = verdict(runs)
    assert v.measured["policy"] == "sync" and v.measured["steps"] == 8 and v.measured["waited"] == 6
    only_fixed = verdict(runs[1:2]).measured
    assert only_fixed["waited_fraction"] == 0 and "fixed at mean K 4" in str(verdict(runs[1:2]))


def test_an_empty_run_says_so():
    it = echosim.echoing([], 1)
    assert list(it) == []
    assert str(it.verdict()).startswith("no steady-state step measured yet")


def test_the_prediction_is_the_plans_recommendation_with_its_band():
    runs = [made(waits=(0.5,) + (0.004,) * 39, epoch=(0,) * 40, load=0.005, step=0.001)]
    steps = {64: 5200, 1024: 900}
    p = echosim.plan(records=runs, batch_size=256, steps_to_target=steps, seeds=2)
    v = verdict(runs, plan=p)
    pr = prediction(p)
    rec = p.recommended
    assert pr["saving"] == pytest.approx(1 - rec["wall_clock_to_target"] / rec["baseline_wall_clock"])
    assert pr["saving_low"] <= pr["saving"] <= pr["saving_high"]
    assert v.prediction == pr and "from your steps to target" in str(v)
    if not pr["candidate"].startswith("sync"):
        assert f"{pr['candidate']} is predicted to save {pr['saving']:.0%}" in str(v)
    assert runs[0].verdict(p).prediction == pr
    again = echosim.verdict(runs[0], steps_to_target=steps, seeds=2)  # the same plan, made by the verdict
    assert again.prediction["candidate"] == pr["candidate"]
    assert math.isfinite(again.prediction["saving"])


def test_the_command_line_prints_the_verdict_under_the_table(tmp_path, capsys):
    from echosim.cli import main

    f = made(waits=(0.5,) + (0.004,) * 39, epoch=(0,) * 40).save(tmp_path / "sync.npz")
    assert main(["plan", "--records", f, "--batch-size", "256", "--steps-to-target", "64=5200,1024=900",
                 "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("verdict: input-bound 100% of steps under sync (exposed wait 4 ms per step of 1 ms")
    assert "from your steps to target" in last and "10-90%: from " in last


def test_the_command_line_takes_several_records_files_after_one_flag(tmp_path, capsys):
    from echosim.cli import main

    files = [made(waits=(0.5,) + (0.004,) * 19, epoch=(0,) * 20).save(tmp_path / f"pilot-{i}.npz") for i in range(2)]
    assert main(["plan", "--records", *files, "--batch-size", "256", "--steps-to-target", "64=5200,1024=900",
                 "--seeds", "2"]) == 0
    assert "sync (mean K 1)" in capsys.readouterr().out
