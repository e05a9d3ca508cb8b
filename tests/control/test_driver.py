"""The driver's one call order, its lag, and divergence."""

import math

import pytest

from echosim.control import Driver, Fixed, Greedy, Observation, make_controller
from echosim.control.base import HOLDS_FOREVER


class Recorder:
    """A controller that records what it is told."""

    exact = False

    def __init__(self, cap=3):
        self.seen, self.asked, self.dead, self.decisions, self._cap = [], [], 0, [], cap

    def cap(self, t):
        self.asked.append((t, [o.batch for o in self.seen]))
        return self._cap

    def observe(self, obs):
        self.seen.append(obs)

    def holds(self):
        return 5

    def diverged(self):
        self.dead += 1

    def describe(self):
        return {}


def loop(drv, n, losses, lagged=None, probes=None):
    for t in range(n):
        drv.begin(t, 10.0 * t)
        drv.first_loss(t, losses[t])
        if lagged is not None:
            drv.lagged_loss(t, lagged[t])
        if probes is not None:
            drv.probe(t, probes[t])
        drv.end(t, 2)


def test_the_observation_of_batch_t_arrives_when_batch_t_plus_2_begins():
    rec = Recorder()
    loop(Driver(rec), 5, [5.0, 4.0, 3.0, 2.0, 1.0])
    assert rec.asked == [(0, []), (1, []), (2, [0]), (3, [0, 1]), (4, [0, 1, 2])]


def test_an_observation_carries_duration_progress_and_probe():
    rec = Recorder()
    loop(Driver(rec), 4, [5.0, 4.0, 3.0, 2.0], lagged=[9.0, 4.5, 3.25, 2.0], probes=[7.0, 6.0, 5.0, 4.0])
    o = rec.seen[1]
    assert o == Observation(batch=1, start=10.0, duration=10.0, steps=2, cap=3, first_loss=4.0,
                            next_first_loss=3.0, paired_progress=0.25, probe=6.0, next_probe=5.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e200])
def test_a_diverging_loss_caps_at_one_and_is_said_once(bad):
    rec = Recorder()
    drv = Driver(rec)
    drv.begin(0, 0.0)
    drv.first_loss(0, bad)
    drv.first_loss(0, bad)
    drv.end(0, 1)
    assert rec.dead == 1 and drv.begin(1, 1.0) == 1 and drv.holds() >= 1 << 40


def test_begin_out_of_order_is_an_error():
    drv = Driver(Recorder())
    drv.begin(0, 0.0)
    with pytest.raises(ValueError, match="^begin: fresh batches begin in order"):
        drv.begin(2, 1.0)


def test_the_registry_builds_every_policy():
    assert make_controller("sync").cap(0) == 1 and make_controller("sync").exact
    assert make_controller("fixed", K=4).cap(7) == 4
    g = make_controller("greedy", max_echo=16)
    assert isinstance(g, Greedy) and g.cap(0) == 16 and not g.exact and g.holds() == HOLDS_FOREVER
    assert make_controller("auto", max_echo=8, options={"start": 2}).cap(0) == 2
    assert isinstance(make_controller("fixed", K=2), Fixed)
    with pytest.raises(ValueError, match="^policy"):
        make_controller("fast")
    with pytest.raises(ValueError, match="^options"):
        make_controller("greedy", options={"window": 4})
    with pytest.raises(ValueError, match="^K"):
        make_controller("fixed", K=0)
