"""Candidates as value objects: enumerated, evaluated to outcomes, compared with sync; the
ceiling from theory."""

import dataclasses
import math

import pytest

from echosim.planner.candidates import Candidate, Outcome, Planned, candidates, compare, default_echoes


def outcome(wall, throughput, mean_echo=1.0, seeds=()):
    return Outcome(mean_echo=mean_echo, batches_to_target=10.0, steps_to_target=10.0 * mean_echo,
                   wall_clock_to_target=wall, wall_clock_low=wall, wall_clock_high=wall,
                   wall_clock_seeds=seeds, throughput=throughput)


def test_enumerated_and_frozen():
    cs = candidates([64, 256], [1], ["sync", "fixed", "greedy"], None, 16, lambda B, W: 3.0)
    assert [c.name for c in cs if c.batch_size == 64] == ["sync (no echo)", "fixed K=2", "fixed K=4", "fixed K=8",
                                                          "greedy"]
    assert default_echoes(3.0) == [2, 4, 8]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cs[0].echo = 2


def test_compare_uses_the_theory_ceiling_and_clips_above_it():
    from theory import rate_speedup_ceiling

    sync = Candidate("sync", 1, 64, 1, 6.0)
    k4 = Candidate("fixed", 4, 64, 1, 6.0)
    k8 = Candidate("fixed", 8, 64, 1, 6.0)
    rows, notes = compare([sync, k4, k8], [outcome(60.0, 1 / 6), outcome(20.0, 1 / 6, 4), outcome(5.0, 1 / 8, 8)],
                          prices=(3.6, None))
    assert all(isinstance(r, Planned) for r in rows)
    assert rows[1]["speedup_ceiling"] == pytest.approx(float(rate_speedup_ceiling(4, 1 / 6, 1 / 6))) == 4.0
    assert rows[1]["speedup"] == pytest.approx(3.0) and rows[1]["cost"] == pytest.approx(0.02)
    assert rows[2]["speedup"] == pytest.approx(6.0) and "above its ceiling" in notes[0]  # 12x clipped at min(K, R)
    assert rows[0].get("missing", "x") == "x" and "speedup" in rows[0]


def test_outcome_from_fields_keeps_the_rest_as_extra():
    o = Outcome.from_fields({"mean_echo": 2.0, "batches_to_target": 3.0, "steps_to_target": 6.0,
                             "wall_clock_to_target": 1.0, "wall_clock_low": 0.5, "wall_clock_high": 2.0,
                             "wall_clock_seeds": [1.0, math.inf], "lr": 0.1})
    assert o.extra == {"lr": 0.1} and o.wall_clock_seeds == (1.0, math.inf)
