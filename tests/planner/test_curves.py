"""Whole loss curves as input: T at many targets at once, from arrays, records and CSV, into
the model and the plan; bad curves name the argument (API) or print one line, exit 2 (CLI)."""

import math

import numpy as np
import pytest

import echosim
from echosim.cli import main
from echosim.planner.curves import batches_to_reach, load_curves, steps_at_targets, steps_from_curves


def curve(S, E, B, n=400, noise=0.0, seed=0):
    """A loss whose excess falls as 1/(progress), reaching 1 + 1/t at t = S + E/B-ish scale."""
    t = np.arange(1, n + 1)
    rng = np.random.default_rng(seed)
    return 1.0 + (S + E / B) / (t * 10.0) + noise * rng.normal(size=n)


def test_reaches_and_stays():
    assert batches_to_reach([5, 4, 1, 3, 1, 1], 2.0, window=1) == 5.0  # 1 at batch 3, but back above at 4
    assert batches_to_reach([5, 4, 3], 2.0, window=1) == math.inf
    assert batches_to_reach([1, 1], 2.0, window=10) == 1.0
    assert batches_to_reach([5, np.nan, 1, 1], 2.0, window=1) == 3.0


def test_many_targets_at_once_and_the_model():
    cs = {64: curve(40, 2e4, 64), 1024: curve(40, 2e4, 1024)}
    at = steps_at_targets(cs, [1.2, 1.1], window=1)
    assert at[1.1][64][0] > at[1.2][64][0] and set(at[1.1]) == {64, 1024}
    fit = echosim.planner.fit_response(steps_from_curves(cs, 1.2, window=1))
    assert fit.predict(1, 64) == pytest.approx(at[1.2][64][0], rel=1e-6)


def test_records_and_csv(tmp_path):
    it = echosim.echoing(range(60), "sync", batch_size=64)
    for i, _ in enumerate(it):
        it.report(1.0 + 5.0 / (i + 1))
    r = it.records()
    assert load_curves(r)[(64, 1)][0].shape == (60,)
    path = tmp_path / "c.csv"
    lines = ["batch_size,echo,run,loss"] + [f"256,{K},{run},{1 + 3.0 / (K * (t + 1))}" for K in (1, 4)
                                           for run in ("a", "b") for t in range(50)]
    path.write_text("\n".join(lines) + "\n")
    got = steps_from_curves(str(path), 1.2, window=1)
    assert got == {256: [15.0, 15.0], (256, 4): [16.0, 16.0]}  # T = 15 and 4 fresh batches (16 steps)
    steps = steps_from_curves([r, str(path)], 1.2, window=1)
    assert set(steps) == {64, 256, (256, 4)}


def test_plan_from_curves(tmp_path):
    cs = {64: curve(40, 2e4, 64), 1024: curve(40, 2e4, 1024)}
    p = echosim.plan("80ms", "10ms", batch_size=256, curves=cs, target_loss=1.2, seeds=1)
    assert p.inputs["steps_to_target"] and p.recommended["policy"] in ("sync", "fixed", "greedy")


@pytest.mark.parametrize("kw, match", [
    ({"curves": {64: [2.0, 1.0]}}, "^target_loss: give curves and target_loss together"),
    ({"target_loss": 1.0}, "^curves: give curves and target_loss together"),
    ({"curves": {64: [5.0, 4.0], 1024: [1.0]}, "target_loss": 1.5}, "^curves: at B = 64 no run reaches"),
    ({"curves": {(64, 10 ** 20): [1.0]}, "target_loss": 1.5}, "^curves: the echo factor K in key .* <= 4096"),
    ({"curves": {0: [1.0]}, "target_loss": 1.5}, "^curves: the batch size B in key 0 must be an integer >= 1"),
    ({"curves": 3.5, "target_loss": 1.5}, "^curves: expected Records"),
    ({"curves": {64: [1.0]}, "target_loss": math.nan}, "^target_loss .* must be finite"),
])
def test_bad_curves(kw, match):
    with pytest.raises(ValueError, match=match):
        echosim.plan("80ms", "10ms", batch_size=256, **kw)


def test_cli_curves(tmp_path, capsys):
    path = tmp_path / "c.csv"
    lines = ["batch_size,loss"] + [f"{B},{1 + (40 + 2e4 / B) / (10 * (t + 1))}" for B in (64, 1024) for t in range(400)]
    path.write_text("\n".join(lines) + "\n")
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256", "--curves", str(path),
                 "--target-loss", "1.2", "--seeds", "1"]) == 0
    assert "recommended" in capsys.readouterr().out
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256", "--curves",
                 str(tmp_path / "missing.csv"), "--target-loss", "1.2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "curves: cannot read" in err[0]
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256", "--curves",
                 str(path)]) == 2
    assert "--target-loss" in capsys.readouterr().err
