"""Policy "auto": the cap it chooses from scripted first-step losses and a fake clock.

A script is a function (batch t, cap in force) -> loss; each fresh batch takes one time
unit, and K_t = the cap (the loader is slow enough that greedy would echo to it)."""

import numpy as np
import pytest

from echosim.pipeline.auto import AutoEcho


def drive(auto, loss_of, n, *, pace=None, report=True):
    """Run `n` fresh batches; returns the caps used. `pace` bounds K_t like a loader would."""
    caps = []
    for t in range(n):
        c = auto.cap(t, float(t))
        k = c if pace is None else min(c, pace)
        if report:
            auto.observe(t, loss_of(t, c), float(t))
        auto.batch_done(k)
        caps.append(c)
    return np.array(caps)


def noisy(f, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return lambda t, c: f(t, c) + sd * rng.standard_normal()


def test_without_reports_it_is_greedy():
    a = AutoEcho(max_echo=16, window=4)
    caps = drive(a, None, 40, report=False)
    assert (caps == 16).all() and a.decisions == []


def test_steady_progress_keeps_the_cap_and_probes_rarely():
    a = AutoEcho(max_echo=8, window=4)
    caps = drive(a, noisy(lambda t, c: 2.0 - 0.02 * t), 64, pace=8)
    # a scheduled probe (by half of the echo taken) at most every few blocks, never a step down
    assert not any(d["action"] == "step down" for d in a.decisions)
    assert np.mean(caps == 8) > 0.7 and caps[-1] == 8


def test_a_plateau_steps_down_to_one():
    """The loss stops falling at cap 8 (a plateau that K = 1 would settle below): step down."""
    a = AutoEcho(max_echo=8, window=4)
    caps = drive(a, noisy(lambda t, c: 1.0 if c > 1 else 1.0 - 0.01 * t, sd=0.02), 24, pace=8)
    downs = [d for d in a.decisions if d["action"] == "step down"]
    assert downs and downs[0]["cap"] == 1 and downs[0]["why"] == "stall"
    assert downs[0]["batch"] == 8  # after two base blocks of four: the stall test spans both
    assert (caps[8:] == 1).mean() > 0.7  # later probes up (a false stall would be undone) lose
    assert all(d["cap"] == 1 for d in a.decisions if d["action"] == "keep")


def test_a_plateau_at_one_is_left_alone():
    a = AutoEcho(max_echo=1, window=4)
    caps = drive(a, noisy(lambda t, c: 1.0, sd=0.02), 40)
    assert (caps == 1).all() and not any(d["action"] in ("step down", "switch") for d in a.decisions)


def _probe_case(probe_slope):
    """Base cap 8 falls by 0.01 per batch; the probe's cap falls by `probe_slope`."""
    a = AutoEcho(max_echo=8, window=4)
    loss = {"v": 2.0}

    def f(t, c):
        loss["v"] -= 0.01 if c == 8 else probe_slope
        return loss["v"]

    drive(a, f, 40, pace=8)
    return a


def test_a_probe_that_makes_faster_progress_moves_the_cap():
    a = _probe_case(0.05)  # the half cap (4) falls five times faster here
    probe = next(d for d in a.decisions if d["action"] == "probe")
    assert probe["cap"] == 4 and probe["batch"] == 16  # the first probe: after four base blocks
    switch = next(d for d in a.decisions if d["action"] == "switch")
    assert switch["cap"] == 4 and switch["z"] < -1 and switch["previous"] == 8


def test_a_slower_probe_keeps_the_cap_and_backs_off():
    a = _probe_case(0.001)
    keeps = [d for d in a.decisions if d["action"] == "keep"]
    assert keeps and keeps[0]["cap"] == 8 and keeps[0]["why"] == "the probe was slower"
    probes = [d["batch"] for d in a.decisions if d["action"] == "probe"]
    assert len(probes) == 1  # the next one waits twice as long


def test_it_is_deterministic_given_its_inputs():
    runs = []
    for _ in range(2):
        a = AutoEcho(max_echo=16, window=5)
        drive(a, noisy(lambda t, c: 1.0 / (1 + 0.05 * t * c), seed=3), 120, pace=12)
        runs.append(a.decisions)
    assert runs[0] == runs[1]


def test_divergence_falls_back_to_one():
    a = AutoEcho(max_echo=8, window=4)
    drive(a, noisy(lambda t, c: 1.0 - 0.01 * t), 6)
    a.diverged()
    assert a.cap(6, 6.0) == 1 and a.decisions[-1]["action"] == "diverged"
    assert drive(a, noisy(lambda t, c: 1.0), 20).max() == 1


@pytest.mark.parametrize("kw, match", [({"window": 1}, "^auto.window"), ({"window": 2.5}, "^auto.window"),
                                       ({"z": -1.0}, "^auto.z"), ({"z": float("nan")}, "^auto.z"),
                                       ({"max_echo": 0}, "^max_echo")])
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        AutoEcho(**kw)
