"""Policy "auto" driven by scripted streams and a fake clock (tests/control/streams.py):
it moves only on evidence, holds the error rate it claims over a whole job, and reads
each signal a loop can give."""

import math

import numpy as np
import pytest

from echosim.control import AutoEcho, Driver
from tests.control.streams import drive, hurts, pays, plateau_then_pays

SEEDS = 60


def wrong_rate(moves_wrong, seeds=SEEDS, alpha=0.1):
    """The bound a binomial count of wrong jobs must meet: alpha plus three standard errors."""
    return alpha + 3 * math.sqrt(alpha * (1 - alpha) / seeds)


def stepped(ctrl, direction):
    """Did the cap in force ever move down (or up)?"""
    moves = [d for d in ctrl.decisions if d["action"] in ("switch", "equal") and d["cap"] != d["previous"]]
    return any((d["cap"] < d["previous"]) == (direction == "down") for d in moves)


@pytest.mark.parametrize("noise, kw", [(0.005, {}), (0.02, {}), (0.05, {"paired_noise": 0.002}),
                                       (0.01, {"ar": 0.9}), (0.005, {"heavy": True})],
                         ids=["loss", "loss-noisy", "paired", "loss-autocorrelated", "loss-heavy-tailed"])
def test_where_echoing_pays_throughout_it_never_steps_down_in_at_least_90_percent_of_jobs(noise, kw):
    downs = sum(stepped(drive(pays(), 600, seed=s, noise=noise, **kw)[1], "down") for s in range(SEEDS))
    assert downs / SEEDS <= wrong_rate(downs)


@pytest.mark.parametrize("noise, kw", [(0.005, {}), (0.02, {"paired_noise": 0.001}), (0.005, {"ar": 0.9}),
                                       (0.005, {"heavy": True})],
                         ids=["loss", "paired", "loss-autocorrelated", "loss-heavy-tailed"])
def test_where_echoing_hurts_it_stays_at_one_outside_its_tests(noise, kw):
    ups = 0
    for s in range(SEEDS):
        caps, a = drive(hurts(), 600, seed=s, noise=noise, **kw)
        ups += stepped(a, "up")
        assert a.incumbent == 1 or stepped(a, "up")
    assert ups / SEEDS <= wrong_rate(ups)


def test_it_climbs_where_the_evidence_is_clear():
    """Not vacuous: with a low-noise loss, or paired progress, it reaches the top in most jobs."""
    low = [drive(pays(), 1000, seed=s, noise=0.002)[1].incumbent for s in range(20)]
    paired = [drive(pays(), 1000, seed=s, noise=0.05, paired_noise=0.002)[1].incumbent for s in range(20)]
    assert np.mean(np.array(low) == 8) >= 0.8 and np.mean(np.array(paired) >= 4) >= 0.8


def test_a_probe_is_the_strongest_signal():
    """The loss alone at this noise cannot tell 1 from 2; a probe loss at the run boundaries can."""
    alone = [drive(pays(), 800, seed=s, noise=0.05)[1].incumbent for s in range(10)]
    probe = [drive(pays(), 800, seed=s, noise=0.05, probe=True)[1] for s in range(10)]
    assert np.mean(alone) < 2 and all(a.incumbent == 8 for a in probe)
    assert all(d.get("kind") in (None, "probe") for a in probe for d in a.decisions)


def test_caps_that_change_nothing_are_equal_and_the_smaller_is_kept():
    """The loader allows one step whatever the cap (pace 1): every cap is as fast; auto stays at 1."""
    for s in range(10):
        caps, a = drive(pays(), 600, seed=s, noise=0.005, pace=1)
        assert a.incumbent == 1


def test_a_cap_the_loader_leaves_no_room_for_is_equal_to_the_one_below():
    caps, a = drive(pays(), 1000, seed=0, noise=0.002, pace=2)
    assert a.incumbent == 2 and caps.max() <= 4
    assert any("no room" in d.get("why", "") for d in a.decisions)


def test_a_plateau_first_does_not_stop_it_climbing_later_with_a_clear_signal():
    finals = [drive(plateau_then_pays(until=200), 1200, seed=s, noise=0.01, relative=True)[1].incumbent
              for s in range(10)]
    assert np.median(finals) >= 4


def test_the_cap_holds_for_the_rest_of_a_run_whatever_is_observed():
    a = AutoEcho(max_echo=8, window=5)
    drv = Driver(a)
    rng = np.random.default_rng(0)
    promised = {}
    for t in range(400):
        c = drv.begin(t, float(t))
        if t in promised:
            assert c == promised[t]
        else:
            promised.update({t + i: c for i in range(drv.holds())})
        drv.first_loss(t, 1.0 - 0.001 * t * c + 0.01 * rng.standard_normal())
        drv.end(t, c)


def test_without_a_signal_it_stays_where_it_started_and_says_why():
    a = AutoEcho(max_echo=16, window=4, start=2)
    drv = Driver(a)
    for t in range(300):
        drv.begin(t, float(t))
        drv.end(t, 2)
    assert a.incumbent == 2
    assert any(d["action"] == "unresolved" and "no signal" in d["why"] for d in a.decisions)


def test_it_starts_small_never_at_the_top():
    assert AutoEcho(max_echo=64).cap(0) in (1, 2)
    assert AutoEcho(max_echo=64, start=8).cap(0) == 8  # a planner's recommendation


def test_a_diverging_loss_is_k_1_from_then_on_and_never_an_overflow():
    a = AutoEcho(max_echo=8, window=4)
    drv = Driver(a)
    for t in range(40):
        drv.begin(t, float(t))
        drv.first_loss(t, 1e200 * (t + 1))  # squares of these would overflow
        drv.end(t, 1)
    assert drv.begin(40, 40.0) == 1 and [d["action"] for d in a.decisions].count("diverged") == 1


def test_huge_but_finite_rates_do_not_overflow():
    """Losses of 1e149 over clock steps of 1e-9 s: rates near 1e158, whose squares are not finite."""
    a = AutoEcho(max_echo=4, window=2)
    drv = Driver(a)
    for t in range(200):
        c = drv.begin(t, t * 1e-9)
        drv.first_loss(t, 1e149 * (1 + (t % 3)))
        drv.end(t, c)
    assert a.describe()["cap"] in (1, 2, 4)


@pytest.mark.parametrize("kw, match", [({"window": 1}, "^auto.window"), ({"alpha": 0.0}, "^auto.alpha"),
                                       ({"alpha": math.nan}, "^auto.alpha"), ({"min_effect": 2}, "^auto.min_effect"),
                                       ({"start": 16}, "^auto.start"), ({"start": True}, "^auto.start"),
                                       ({"max_echo": 0}, "^max_echo")])
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        AutoEcho(**{"max_echo": 8, **kw})


def test_it_is_deterministic():
    a = drive(pays(), 500, seed=3, noise=0.01)
    b = drive(pays(), 500, seed=3, noise=0.01)
    assert (a[0] == b[0]).all() and a[1].decisions == b[1].decisions
