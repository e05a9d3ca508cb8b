"""Greedy echoing under a cap per fresh batch (`simulate(..., caps=)`), the pipeline half of
policy "auto": the Numba loop equals the SimPy twin on random caps, caps at max_echo are
today's greedy bitwise, caps decided as the loop goes equal caps given at once."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from echosim.pipeline import Deterministic, Exponential, Gamma, Pipeline, simulate, simulate_with_times
from echosim.pipeline.schedule import simulate_deciding
from tests.pipeline.test_schedule import ARRAYS, _check_invariants, _same_schedule
from tests.reference.simpy_pipeline import simulate_simpy


def _same_as_twin(p, load, steps, caps):
    a = simulate_with_times(p, load, steps, caps=caps)
    b = simulate_simpy(p, load, steps, caps=caps)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), b[name], err_msg=name)
    for name in ("busy_time", "switch_time", "buffer_area", "blocked_area"):
        assert getattr(a, name) == pytest.approx(b[name], rel=1e-12, abs=1e-9), name
    return a


@given(policy=st.sampled_from(["greedy", "auto"]), W=st.integers(1, 3), C=st.integers(1, 3),
       delivery=st.sampled_from(["ordered", "unordered"]), blocking=st.sampled_from(["before", "after"]),
       h=st.sampled_from([0.0, 0.5]), max_echo=st.integers(1, 6), T=st.integers(1, 30),
       seed=st.integers(0, 2**32 - 1), integer=st.booleans())
@settings(max_examples=60, deadline=None)
def test_capped_loop_matches_the_twin_on_random_caps(policy, W, C, delivery, blocking, h, max_echo, T, seed,
                                                     integer):
    p = Pipeline(Deterministic(1.0), workers=W, prefetch=C, policy=policy, delivery=delivery, blocking=blocking,
                 switch_overhead=h, max_echo=max_echo)
    rng = np.random.default_rng(seed)
    load = rng.integers(1, 12, T).astype(float) if integer else rng.exponential(4.0, T)
    steps = rng.integers(1, 3, T * 8).astype(float) if integer else rng.gamma(4.0, 0.25, T * 8)
    caps = rng.integers(1, max_echo + 1, T)
    s = _same_as_twin(p, load, steps, caps)
    assert np.all(s.steps_per_batch <= caps)
    _check_invariants(p, s, None)


def test_caps_bind_where_the_loader_is_slow():
    """A loader 6x slower than a step: greedy takes ~6 steps a batch, a cap of 2 takes 2."""
    p = Pipeline(Deterministic(6.0), prefetch=1, policy="greedy", max_echo=16)
    caps = np.array([2] * 10 + [16] * 10)
    s = simulate(p, 20, 0, caps=caps)
    assert s.steps_per_batch[:10].tolist() == [2] * 10
    assert s.steps_per_batch[11:19].min() >= 5


@pytest.mark.parametrize("delivery, workers", [("ordered", 1), ("unordered", 3)])
def test_caps_at_max_echo_are_greedy_bitwise(delivery, workers):
    p = Pipeline(Exponential(6.0), workers=workers, prefetch=3, step_time=Gamma(1.0, 0.3), policy="greedy",
                 max_echo=8, delivery=delivery)
    assert _same_schedule(simulate(p, 3000, 11), simulate(p, 3000, 11, caps=np.full(3000, 8)))


def test_same_seed_same_caps_same_schedule_and_auto_is_greedy_under_caps():
    g = Pipeline(Exponential(5.0), workers=2, step_time=Gamma(1.0, 0.5), policy="greedy", max_echo=8)
    a = Pipeline(Exponential(5.0), workers=2, step_time=Gamma(1.0, 0.5), policy="auto", max_echo=8)
    caps = np.random.default_rng(3).integers(1, 9, 500)
    s = simulate(g, 500, 4, caps=caps)
    assert _same_schedule(s, simulate(g, 500, 4, caps=caps.copy()))
    assert _same_schedule(s, simulate(a, 500, 4, caps=caps))
    assert not _same_schedule(s, simulate(g, 500, 4, caps=np.maximum(caps - 1, 1)))


@pytest.mark.parametrize("ahead", [1, 5, 64])
def test_caps_decided_as_it_goes_equal_caps_given(ahead, monkeypatch):
    """The loop pauses before each take whose cap is unknown; resumed, it is the loop run
    with every cap given, bitwise, whatever the chunks of steps and outputs."""
    from echosim.pipeline import stream

    monkeypatch.setattr(stream, "STEP_CHUNK", 257)
    monkeypatch.setattr(stream, "_CHUNK_MIN", 13)
    p = Pipeline(Exponential(6.0), workers=2, prefetch=2, step_time=Exponential(1.0), policy="auto", max_echo=8)
    T = 700
    caps = np.random.default_rng(1).integers(1, 9, T)
    asked = []

    def decide(n, tau, K, take):
        asked.append((n, tau, K.copy()))
        np.testing.assert_array_equal(take, ref.take_time[:n])
        return caps[n:n + ahead]

    ref = simulate(p, T, 9, caps=caps)
    s = simulate_deciding(p, T, 9, decide)
    assert _same_schedule(s, ref)
    assert [n for n, _, _ in asked] == list(range(0, T, ahead))
    for n, tau, K in asked:  # what decide saw: the take time of batch n, the final K_t before it
        assert tau == ref.take_time[n]
        np.testing.assert_array_equal(K, ref.steps_per_batch[:n])


@pytest.mark.parametrize("caps, match", [
    (np.full(9, 2), "10 caps"),
    (np.full((10, 1), 2), "1-D"),
    (np.full(10, 2.0), "integer"),
    (np.full(10, True), "integer"),
    (np.array([0] + [2] * 9), "1..max_echo=4"),
    (np.array([5] + [2] * 9), "1..max_echo=4"),
])
def test_bad_caps_name_caps(caps, match):
    p = Pipeline(2.0, policy="greedy", max_echo=4)
    for call in (lambda: simulate(p, 10, 0, caps=caps), lambda: simulate_with_times(p, np.ones(10), 1.0, caps=caps)):
        with pytest.raises(ValueError, match=match) as err:
            call()
        assert "caps" in str(err.value)


def test_caps_apply_to_greedy_and_auto_only_and_auto_needs_them():
    with pytest.raises(ValueError, match="caps: .*'greedy' and 'auto'.*'fixed'"):
        simulate(Pipeline(2.0, policy="fixed", echo=2), 10, 0, caps=np.full(10, 2))
    with pytest.raises(ValueError, match="policy 'auto'.*losses.*echo=pipeline"):
        simulate(Pipeline(2.0, policy="auto"), 10, 0)
    with pytest.raises(ValueError, match="policy 'auto'"):
        simulate_with_times(Pipeline(2.0, policy="auto"), np.ones(3), 1.0)


@pytest.mark.parametrize("kwargs, field", [
    (dict(policy="auto", window=1), "Pipeline.window"),
    (dict(policy="auto", window=2.5), "Pipeline.window"),
    (dict(policy="auto", window=10_001), "Pipeline.window"),
    (dict(policy="auto", alpha=-0.1), "Pipeline.alpha"),
    (dict(policy="auto", alpha=math.nan), "Pipeline.alpha"),
    (dict(policy="auto", min_effect=1.5), "Pipeline.min_effect"),
    (dict(policy="auto", start=0), "Pipeline.start"),
    (dict(policy="auto", max_echo=8, start=16), "Pipeline.start must be at most max_echo"),
    (dict(policy="greedy", window=4), "Pipeline.window applies only to policy 'auto'"),
    (dict(policy="sync", alpha=0.1), "Pipeline.alpha applies only to policy 'auto'"),
])
def test_bad_auto_options_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Pipeline(2.0, **kwargs)


def test_auto_options_default_to_the_controllers():
    from echosim.control.auto import AUTO_DEFAULTS

    p = Pipeline(2.0, policy="auto")
    assert {k: getattr(p, k) for k in AUTO_DEFAULTS} == AUTO_DEFAULTS
    assert Pipeline(2.0, policy="greedy").window is None


@pytest.mark.parametrize("answer", [np.array([9]), np.array([], dtype=np.int64), np.array([1.0]), np.full(40, 2)])
def test_caps_decided_out_of_range_name_decide(answer):
    p = Pipeline(Exponential(3.0), policy="auto", max_echo=8)
    with pytest.raises(ValueError, match="^decide: expected 1..30 integer caps in 1..8"):
        simulate_deciding(p, 30, 0, lambda n, tau, K, take: answer)
    with pytest.raises(ValueError, match="decide"):
        simulate_deciding(p, 30, 0, "greedy")
    with pytest.raises(ValueError, match="pipeline.policy"):
        simulate_deciding(Pipeline(3.0, policy="sync"), 30, 0, lambda *a: np.ones(1, dtype=np.int64))
