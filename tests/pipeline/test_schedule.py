"""Tests of the pipeline simulator: closed forms, queueing theory, invariants, and
exact agreement of the Numba event loop with a naive SimPy model."""

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.pipeline import stream
from echosim.pipeline.service_times import Deterministic, Exponential, Gamma, Stall
from echosim.pipeline.traces import Trace
from echosim.pipeline.model import POLICIES, Pipeline
from echosim.pipeline.schedule import Schedule, simulate, simulate_until, simulate_with_times
from tests.reference.simpy_pipeline import simulate_simpy

POLICY_KW = {
    "sync": {},
    "fixed": {"echo": 2.5},
    "greedy": {"max_echo": 4},
    "example": {"echo": 2.5, "shuffle_buffer": 5},
}
ALONE = tuple(name for name, row in POLICIES.items() if not row.coupled)
"""The policies a pipeline is simulated with alone ("auto" needs the run's losses, or caps)."""
ALL_MODES = [
    (policy, delivery, blocking)
    for policy in ALONE
    for delivery in ("ordered", "unordered")
    for blocking in ("before", "after")
]


def _period(s: Schedule, window: int) -> float:
    """Long-run time per fresh batch from the last `window` takes."""
    T = s.n_batches
    return (s.take_time[T - 1] - s.take_time[T - 1 - window]) / window


# ---------------------------------------------------------------------------
# deterministic times: Choi et al.'s time(e) = max(t_up, e * t_down)


@pytest.mark.parametrize("blocking", ["before", "after"])
@pytest.mark.parametrize("prefetch", [1, 2, 5])
def test_fixed_echo_matches_choi_time_per_batch(blocking, prefetch):
    """W = 1, deterministic: each fresh batch takes max(t_up, e*t_down + h) in steady state."""
    T, window = 300, 120
    for t_up in (0.5, 1.0, 2.0, 3.5, 4.0, 8.0):
        for e in (1, 2, 3, 5):
            for t_down, h in ((1.0, 0.0), (0.5, 0.0), (1.0, 0.25)):
                p = Pipeline(Deterministic(t_up), workers=1, prefetch=prefetch, step_time=t_down,
                             policy="fixed", echo=e, blocking=blocking, switch_overhead=h)
                s = simulate(p, T, seed=0)
                assert np.all(s.steps_per_batch == e)
                expected = max(t_up, e * t_down + h)
                assert _period(s, window) == pytest.approx(expected, rel=1e-12)
                gaps = np.diff(s.take_time[-window:])
                np.testing.assert_allclose(gaps, expected, rtol=1e-12)  # per batch, not on average


@pytest.mark.parametrize("blocking", ["before", "after"])
@pytest.mark.parametrize("prefetch", [1, 2, 4])
def test_greedy_with_max_echo_below_R_is_fixed_echo(blocking, prefetch):
    """Greedy with max_echo = e <= R takes exactly e steps per batch, one per t_up."""
    T, window = 300, 120
    for t_up in (2.0, 3.5, 4.0, 8.0):
        for e in (1, 2, 3):
            if e > t_up:
                continue
            p = Pipeline(Deterministic(t_up), prefetch=prefetch, policy="greedy", max_echo=e,
                         blocking=blocking)
            s = simulate(p, T, seed=0)
            assert np.all(s.steps_per_batch[:-1] == e)
            assert s.steps_per_batch[-1] == 1  # the last batch gets one step
            assert _period(s, window) == pytest.approx(max(t_up, e * 1.0), rel=1e-12)


@pytest.mark.parametrize("t_up", [0.5, 1.0, 3.0, 3.5, 8.0, 9.25])
def test_greedy_fills_idle_time(t_up):
    """Greedy, unbounded: period t_up and mean K_t -> R = t_up/t_down, when the loader
    can run ahead; with one reserved slot ("before", C = 1) it cannot, and greedy
    rounds every batch up to ceil(R) steps."""
    T, window = 300, 120
    R = t_up / 1.0
    for blocking, prefetch in (("after", 1), ("after", 3), ("before", 2), ("before", 1)):
        p = Pipeline(Deterministic(t_up), prefetch=prefetch, policy="greedy", blocking=blocking)
        s = simulate(p, T, seed=0)
        K = s.steps_per_batch[T - 1 - window:T - 1]
        assert set(K.tolist()) <= {max(1, math.floor(R)), max(1, math.ceil(R))}
        if blocking == "before" and prefetch == 1:
            assert _period(s, window) == pytest.approx(max(1.0, math.ceil(R)), rel=1e-12)
            assert np.all(K == max(1, math.ceil(R)))
        else:
            assert _period(s, window) == pytest.approx(max(t_up, 1.0), rel=1e-12)
            assert abs(K.mean() - max(R, 1.0)) <= 1.0 / window


@pytest.mark.parametrize("delivery", ["ordered", "unordered"])
def test_worker_pool_period_per_blocking_rule(delivery):
    """W workers, deterministic: the long-run period is max(t_up/W_busy, e*t_down + h),
    with W_busy = W under "after" and min(W, C) under "before" (reserved slots)."""
    T, window = 400, 120
    for W in (2, 3, 4):
        for C in (1, 2, 5):
            for t_up, e, h in ((4.0, 1, 0.0), (8.0, 2, 0.0), (9.25, 1, 0.5), (2.0, 3, 0.0)):
                for blocking in ("before", "after"):
                    p = Pipeline(Deterministic(t_up), workers=W, prefetch=C, policy="fixed", echo=e,
                                 blocking=blocking, delivery=delivery, switch_overhead=h)
                    s = simulate(p, T, seed=0)
                    busy = W if blocking == "after" else min(W, C)
                    assert _period(s, window) == pytest.approx(max(t_up / busy, e + h), rel=1e-12)


# ---------------------------------------------------------------------------
# exponential times: the finite-capacity birth-death queue, solved exactly


def _birth_death_stationary(birth, death):
    """Stationary law of a birth-death CTMC from its generator (solved with numpy)."""
    n = len(birth)
    Q = np.zeros((n, n))
    for i in range(n):
        if i + 1 < n:
            Q[i, i + 1] = birth[i]
        if i > 0:
            Q[i, i - 1] = death[i]
        Q[i, i] = -Q[i].sum()
    A = np.vstack([Q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    pi, *_ = np.linalg.lstsq(A, b, rcond=None)
    return pi


def _sync_queue(W, C, blocking, mean_load, mean_step):
    """(throughput, mean buffer occupancy) of policy "sync" with exponential times.

    State n = batches taken-or-waiting: n = 0 the accelerator idles (buffer empty);
    n >= 1 it steps, q = min(n-1, C) batches wait in the buffer and b = n-1-q
    workers hold finished batches ("after" only). Births: busy workers finishing,
    rate mu = 1/mean_load each, with min(W, C - q) busy under "before" (a slot is
    reserved per batch in service) and W - b under "after". Deaths: steps, rate
    nu = 1/mean_step.
    """
    mu, nu = 1.0 / mean_load, 1.0 / mean_step
    n_max = C + 1 if blocking == "before" else C + W + 1
    birth, death, occ = [], [], []
    for n in range(n_max + 1):
        q = 0 if n == 0 else min(n - 1, C)
        b = 0 if n == 0 else n - 1 - q
        busy = min(W, C - q) if blocking == "before" else W - b
        birth.append(busy * mu)
        death.append(nu if n > 0 else 0.0)
        occ.append(q)
    pi = _birth_death_stationary(np.array(birth), np.array(death))
    return nu * (1.0 - pi[0]), float(pi @ np.array(occ))


@pytest.mark.parametrize("blocking", ["before", "after"])
@pytest.mark.parametrize("W, C, mean_load", [(1, 1, 1.0), (2, 1, 2.0), (2, 3, 2.5), (3, 2, 2.0)])
def test_sync_throughput_matches_birth_death_queue(blocking, W, C, mean_load):
    """Unordered delivery (a batch is usable at once), exponential loader and steps."""
    exact_rate, exact_occ = _sync_queue(W, C, blocking, mean_load, 1.0)
    p = Pipeline(Exponential(mean_load), workers=W, prefetch=C, step_time=Exponential(1.0),
                 delivery="unordered", blocking=blocking)
    T, warm, reps = 20_000, 1_000, 16
    rates, occs = [], []
    for r in range(reps):
        s = simulate(p, T, seed=1000 + r)
        # steady state only: drop the start (empty buffer) and the end (loader done)
        t0, t1 = s.take_time[warm - 1], s.take_time[T - warm - 1]
        rates.append((T - 2 * warm) / (t1 - t0))
        inside = np.clip(np.minimum(s.take_time, t1) - np.maximum(s.enter_time, t0), 0.0, None)
        occs.append(inside.sum() / (t1 - t0))
    z = 5.0
    for est, exact in ((rates, exact_rate), (occs, exact_occ)):
        est = np.asarray(est)
        se = est.std(ddof=1) / math.sqrt(reps)
        assert abs(est.mean() - exact) <= z * se, (est.mean(), exact, se)


def test_birth_death_rules_differ():
    """The two blocking rules are different queues (so the test above discriminates)."""
    before, _ = _sync_queue(2, 1, "before", 2.0, 1.0)
    after, _ = _sync_queue(2, 1, "after", 2.0, 1.0)
    assert after > before * 1.2


# ---------------------------------------------------------------------------
# Little's law, from the schedule's own integrals


@pytest.mark.parametrize("policy, delivery, blocking", ALL_MODES)
def test_littles_law_on_the_buffer(policy, delivery, blocking):
    p = Pipeline(Gamma(3.0, 0.8), workers=3, prefetch=2, step_time=Gamma(1.0, 0.5), policy=policy,
                 delivery=delivery, blocking=blocking, switch_overhead=0.1, **POLICY_KW[policy])
    s = simulate(p, 500, seed=7, batch_size=4)
    waits = s.take_time - s.enter_time
    assert np.all(waits >= 0)
    # the event loop's time integral of occupancy equals the sum of per-batch waits
    assert s.buffer_area == pytest.approx(waits.sum(), rel=1e-9, abs=1e-9)
    summ = s.summary()
    assert summ["mean_buffer_occupancy"] == pytest.approx(
        summ["throughput"] * summ["mean_buffer_wait"], rel=1e-9, abs=1e-12)
    assert summ["utilization"] + summ["switch_fraction"] + summ["idle_fraction"] == pytest.approx(1.0)
    assert 0.0 <= summ["loader_blocked_fraction"] <= 1.0


# ---------------------------------------------------------------------------
# invariants under every policy and delivery


def _check_invariants(p: Pipeline, s: Schedule, B=None):
    T, N = s.n_batches, s.n_steps
    assert s.ready_time.shape == (T,) and s.steps_per_batch.shape == (T,)
    assert s.step_end.shape == (N,) and s.step_batch.shape == (N,)
    assert s.steps_per_batch.dtype == np.int64 and s.step_batch.dtype == np.int64
    assert s.steps_per_batch.sum() == N
    # times never go backwards, steps never overlap, every step takes time
    assert np.all(np.diff(s.ready_time) >= 0)
    assert np.all(np.diff(s.take_time) >= 0)
    assert np.all(s.step_end > s.step_start)
    assert np.all(s.step_start[1:] >= s.step_end[:-1])
    assert np.all(np.diff(s.step_batch) >= 0)
    # a batch is taken after it is ready, and used only after it is taken
    assert np.all(s.take_time >= s.ready_time) and np.all(s.ready_time >= s.enter_time)
    assert np.all(s.step_start >= s.ready_time[s.step_batch])
    assert np.all(s.step_start >= s.take_time[s.step_batch])
    # buffer occupancy after all events at each event time stays within [0, C]
    times = np.unique(np.concatenate([s.enter_time, s.take_time]))
    occ = np.searchsorted(np.sort(s.enter_time), times, "right") - np.searchsorted(
        np.sort(s.take_time), times, "right")
    assert occ.min() >= 0 and occ.max() <= p.prefetch
    if p.policy != "example":
        assert s.step_examples is None
        assert np.all(s.steps_per_batch >= 1)  # every batch is used
        np.testing.assert_array_equal(s.step_batch, np.repeat(np.arange(T), s.steps_per_batch))
    if p.policy == "sync":
        assert np.all(s.steps_per_batch == 1)
    if p.policy == "greedy":
        assert s.steps_per_batch.max() <= p.max_echo
    if p.policy == "fixed":
        assert set(np.unique(s.steps_per_batch)) <= {math.floor(p.echo), math.ceil(p.echo)}
    if p.policy == "example":
        ex = s.step_examples
        assert ex.shape == (N, B)
        assert ex.min() >= 0 and ex.max() < T * B
        # each step's examples come from batches already taken
        assert np.all(s.take_time[ex.max(axis=1) // B] <= s.step_start)
        np.testing.assert_array_equal(s.step_batch, np.maximum.accumulate(ex.max(axis=1) // B))
        counts = np.bincount(ex.reshape(-1), minlength=T * B)
        assert counts.max() <= math.ceil(p.echo)
        assert counts.sum() == N * B


@st.composite
def small_pipelines(draw):
    policy = draw(st.sampled_from(ALONE))
    kw = {}
    if policy in ("fixed", "example"):
        kw["echo"] = draw(st.sampled_from([1.0, 1.5, 2.0, 3.0, 2.7]))
    if policy == "greedy":
        kw["max_echo"] = draw(st.integers(1, 6))
    if policy == "example":
        kw["shuffle_buffer"] = draw(st.sampled_from([None, 1, 2, 7]))
    return Pipeline(
        Deterministic(1.0),
        workers=draw(st.integers(1, 4)),
        prefetch=draw(st.integers(1, 4)),
        policy=policy,
        delivery=draw(st.sampled_from(["ordered", "unordered"])),
        blocking=draw(st.sampled_from(["before", "after"])),
        switch_overhead=draw(st.sampled_from([0.0, 0.0, 0.5])),
        **kw,
    )


def _draws(rng, p, T, B, integer):
    """Pre-drawn inputs; integer times make ties (and the tie rule) common."""
    if integer:
        load = rng.integers(1, 8, T).astype(float)
        steps = rng.integers(1, 3, T * 70).astype(float)
    else:
        load = rng.exponential(3.0, T)
        steps = rng.gamma(4.0, 0.25, T * 70)
    return load, steps, rng.random(T * (B or 1)), rng.random(T * (B or 1) * 8)


@given(p=small_pipelines(), T=st.integers(1, 40), seed=st.integers(0, 2**32 - 1),
       integer=st.booleans())
def test_invariants(p, T, seed, integer):
    B = 3 if p.policy == "example" else None
    rng = np.random.default_rng(seed)
    load, steps, echo_u, shuffle_u = _draws(rng, p, T, B, integer)
    s = simulate_with_times(p, load, steps, echo_draws=echo_u, shuffle_draws=shuffle_u, batch_size=B)
    _check_invariants(p, s, B)


@pytest.mark.parametrize("policy, delivery, blocking", ALL_MODES)
def test_invariants_with_random_processes(policy, delivery, blocking):
    p = Pipeline(Exponential(2.5), workers=3, prefetch=2, step_time=Gamma(1.0, 0.7), policy=policy,
                 delivery=delivery, blocking=blocking, switch_overhead=0.2, **POLICY_KW[policy])
    s = simulate(p, 300, seed=3, batch_size=4)
    _check_invariants(p, s, 4)


def test_fixed_rounding_has_mean_echo():
    T, e = 4000, 2.3
    s = simulate(Pipeline(Exponential(2.0), policy="fixed", echo=e), T, seed=11)
    frac = e - math.floor(e)
    assert abs(s.steps_per_batch.mean() - e) <= 5 * math.sqrt(frac * (1 - frac) / T)
    assert s.summary()["mean_echo"] == pytest.approx(s.steps_per_batch.mean())


def test_example_echo_counts_and_mixing():
    T, B, e = 400, 8, 2.4
    p = Pipeline(Exponential(2.0), policy="example", echo=e, shuffle_buffer=32)
    s = simulate(p, T, seed=5, batch_size=B)
    counts = np.bincount(s.step_examples.reshape(-1), minlength=T * B)
    frac = e - math.floor(e)
    n = T * B
    assert abs(counts.mean() - e) <= 5 * math.sqrt(frac * (1 - frac) / n) + B / n
    assert s.n_steps == pytest.approx(T * e, rel=0.05)
    # the shuffle mixes: some steps hold examples from more than one fresh batch
    batches_per_step = [len(np.unique(row // B)) for row in s.step_examples]
    assert max(batches_per_step) > 1


def test_example_without_echo_or_shuffle_is_sync():
    """e = 1 and S = 1: step j uses exactly fresh batch j, with sync's timing."""
    T, B = 200, 4
    kw = dict(workers=2, prefetch=2, step_time=Gamma(1.0, 0.5), switch_overhead=0.3)
    ex = simulate(Pipeline(Exponential(1.5), policy="example", echo=1, shuffle_buffer=1, **kw), T, 9,
                  batch_size=B)
    sy = simulate(Pipeline(Exponential(1.5), policy="sync", **kw), T, 9)
    np.testing.assert_array_equal(ex.step_examples, np.arange(T * B).reshape(T, B))
    for name in ("ready_time", "steps_per_batch", "step_start", "step_end", "step_batch", "take_time"):
        np.testing.assert_array_equal(getattr(ex, name), getattr(sy, name))


def test_example_integer_echo_without_shuffle_repeats_in_place():
    s = simulate(Pipeline(Deterministic(3.0), policy="example", echo=2, shuffle_buffer=1), 5, 0,
                 batch_size=2)
    np.testing.assert_array_equal(s.step_examples.reshape(-1), np.repeat(np.arange(10), 2))


def test_sync_equals_fixed_one_and_greedy_one():
    p = dict(arrival=Exponential(2.0), workers=2, prefetch=3, step_time=Exponential(1.0))
    a = simulate(Pipeline(**p), 500, 4)
    b = simulate(Pipeline(**p, policy="fixed", echo=1), 500, 4)
    c = simulate(Pipeline(**p, policy="greedy", max_echo=1), 500, 4)
    for other in (b, c):
        for name in ("ready_time", "steps_per_batch", "step_end", "step_batch"):
            np.testing.assert_array_equal(getattr(a, name), getattr(other, name))


def test_ordered_after_c1_is_strictly_in_order():
    """C = 1, "after", ordered: batches enter the buffer in production order."""
    p = Pipeline(Exponential(3.0), workers=4, prefetch=1, delivery="ordered", blocking="after")
    s = simulate(p, 300, 2)
    assert np.all(np.diff(s.enter_time) >= 0)
    assert s.summary()["loader_blocked_fraction"] > 0


# ---------------------------------------------------------------------------
# the Numba loop agrees exactly with the SimPy model


ARRAYS = ("ready_time", "steps_per_batch", "step_start", "step_end", "step_batch", "enter_time",
          "take_time")


def _assert_same(p, load, steps, echo_u, shuffle_u, B):
    a = simulate_with_times(p, load, steps, echo_draws=echo_u, shuffle_draws=shuffle_u, batch_size=B)
    b = simulate_simpy(p, load, steps, echo_draws=echo_u, shuffle_draws=shuffle_u, batch_size=B)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), b[name], err_msg=name)
    if p.policy == "example":
        np.testing.assert_array_equal(a.step_examples, b["step_examples"])
    else:
        assert b["step_examples"] is None and a.step_examples is None
    for name in ("busy_time", "switch_time", "buffer_area", "blocked_area"):
        assert getattr(a, name) == pytest.approx(b[name], rel=1e-12, abs=1e-9), name
    assert a.n_events == b["n_events"]
    return a


@pytest.mark.parametrize("policy, delivery, blocking", ALL_MODES)
@pytest.mark.parametrize("integer", [True, False])
def test_numba_matches_simpy(policy, delivery, blocking, integer):
    B = 3 if policy == "example" else None
    T = 25
    for W, C, h in ((1, 1, 0.0), (3, 2, 0.0), (2, 4, 0.5), (4, 1, 0.0)):
        p = Pipeline(Deterministic(1.0), workers=W, prefetch=C, policy=policy, delivery=delivery,
                     blocking=blocking, switch_overhead=h, **POLICY_KW[policy])
        rng = np.random.default_rng([W, C, int(integer)])
        a = _assert_same(p, *_draws(rng, p, T, B, integer), B)
    assert a.n_steps >= T or policy == "example"


@given(p=small_pipelines(), T=st.integers(1, 30), seed=st.integers(0, 2**32 - 1),
       integer=st.booleans())
def test_numba_matches_simpy_hypothesis(p, T, seed, integer):
    B = 3 if p.policy == "example" else None
    rng = np.random.default_rng(seed)
    _assert_same(p, *_draws(rng, p, T, B, integer), B)


def test_replay_with_constant_step_time():
    p = Pipeline(Deterministic(1.0), workers=2, prefetch=2, policy="greedy", max_echo=5)
    load = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    a = simulate_with_times(p, load, 1.0)
    b = simulate_simpy(p, load, 1.0)
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), b[name])


# ---------------------------------------------------------------------------
# seeds, chunks, compile


def _same_schedule(a: Schedule, b: Schedule) -> bool:
    names = ARRAYS + ("step_examples",)
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        if (x is None) != (y is None):
            return False
        if x is not None and (x.shape != y.shape or x.tobytes() != y.tobytes()):
            return False
    return a.summary() == b.summary()


@pytest.mark.parametrize("policy", ALONE)
def test_same_seed_same_schedule_bitwise(policy):
    p = Pipeline(Exponential(3.0), workers=2, step_time=Gamma(1.0, 0.3), policy=policy,
                 **POLICY_KW[policy])
    a = simulate(p, 300, seed=123, batch_size=4)
    b = simulate(p, 300, seed=123, batch_size=4)
    c = simulate(p, 300, seed=124, batch_size=4)
    assert _same_schedule(a, b)
    assert not _same_schedule(a, c)
    ss = np.random.SeedSequence(123)
    assert _same_schedule(a, simulate(p, 300, seed=ss, batch_size=4))


def test_greedy_chunks_and_growth_do_not_change_the_result(monkeypatch):
    """Step times drawn in many small chunks, outputs grown many times: same Schedule."""
    p = Pipeline(Exponential(6.0), workers=1, prefetch=3, step_time=Exponential(1.0), policy="greedy")
    ref = simulate(p, 2000, seed=8)
    monkeypatch.setattr(stream, "_CHUNK_MIN", 8)
    monkeypatch.setattr(stream, "_CHUNK_MAX", 50)
    monkeypatch.setattr(stream, "estimate_echo", lambda pipeline: 1.0)
    small = simulate(p, 2000, seed=8)
    assert ref.n_steps > 2000 + 1024  # the output had to grow
    assert _same_schedule(ref, small)


# ---------------------------------------------------------------------------
# long schedules: per-batch arrays kept, steps derived chunk by chunk

SMALL_CHUNK = 37  # steps: chunk boundaries fall inside batches


def _held_and_derived(p, T, seed, monkeypatch):
    """The same simulation with its steps held, and derived in chunks of SMALL_CHUNK."""
    held = simulate(p, T, seed=seed)
    monkeypatch.setattr(stream, "STEP_CHUNK", SMALL_CHUNK)
    derived = simulate(p, T, seed=seed)
    assert held.n_steps > 5 * SMALL_CHUNK
    assert isinstance(held._steps, stream.HeldSteps) and isinstance(derived._steps, stream.DerivedSteps)
    return held, derived


@pytest.mark.parametrize("policy, delivery, blocking", [m for m in ALL_MODES if m[0] != "example"])
def test_a_long_schedule_derives_bitwise_the_steps_it_did_not_keep(policy, delivery, blocking, monkeypatch):
    # greedy draws its step times in chunks of 8 to 50 (their sizes matter: Stall's draws depend on them)
    monkeypatch.setattr(stream, "_CHUNK_MIN", 8)
    monkeypatch.setattr(stream, "_CHUNK_MAX", 50)
    p = Pipeline(Exponential(3.0), workers=2, prefetch=2, step_time=Stall(Gamma(1.0, 0.4), 0.2, 1.5), policy=policy,
                 delivery=delivery, blocking=blocking, switch_overhead=0.3, **POLICY_KW[policy])
    held, derived = _held_and_derived(p, 200, 21, monkeypatch)
    assert _same_schedule(held, derived)


@pytest.mark.parametrize("p", [
    Pipeline(Gamma(5.0, 0.5), workers=1, prefetch=3, step_time=Gamma(1.0, 0.3), policy="greedy"),
    Pipeline(Gamma(4.0, 0.5), step_time=Stall(Gamma(1.0, 0.2), 0.1, 2.0), policy="fixed", echo=2.5),
    Pipeline(Exponential(2.0), step_time=Trace([0.5, 1.0, 2.0], mode="cycle"), policy="sync"),
], ids=["greedy", "fixed", "sync-cyclic"])
def test_times_and_cuts_of_a_long_schedule_are_read_without_keeping_its_steps(p, monkeypatch):
    held, derived = _held_and_derived(p, 300, 4, monkeypatch)
    n = np.arange(held.n_steps + 1)
    np.testing.assert_array_equal(derived.time_after(n), np.concatenate([[0.0], held.step_end]))
    np.testing.assert_array_equal(derived.time_after(n[::-7]), derived.time_after(n)[::-7])
    for k in (1, SMALL_CHUNK, 3 * SMALL_CHUNK + 5, held.n_steps - 1):
        cut, held_cut = derived.first_steps(k), held.first_steps(k)
        assert cut.summary() == held_cut.summary() and repr(cut) == repr(held_cut)
    assert derived.summary() == held.summary()
    assert derived._steps._arrays is None  # no per-step array was built
    assert _same_schedule(held.first_steps(100), derived.first_steps(100))
    assert _same_schedule(held, derived)


def test_a_long_time_budget_schedule_is_cut_where_the_held_one_is(monkeypatch):
    p = Pipeline(Exponential(6.0), workers=2, step_time=Gamma(1.0, 0.3), policy="greedy")
    held_full, held = simulate_until(p, 500.0, seed=9)
    monkeypatch.setattr(stream, "STEP_CHUNK", SMALL_CHUNK)
    full, part = simulate_until(p, 500.0, seed=9)
    assert isinstance(full._steps, stream.DerivedSteps) and part.n_steps > SMALL_CHUNK
    assert part.makespan <= 500.0 < full.makespan
    assert _same_schedule(held_full, full) and _same_schedule(held, part)


def test_time_after_needs_a_clock_and_starts_at_zero():
    s = simulate(Pipeline(Exponential(2.0), policy="greedy"), 20, seed=0)
    np.testing.assert_array_equal(s.time_after([0, 1, s.n_steps]), [0.0, s.step_end[0], s.makespan])
    with pytest.raises(ValueError, match="time_after"):
        Schedule(steps_per_batch=np.array([2, 3])).time_after([1])
    with pytest.raises(IndexError):
        s.time_after([s.n_steps + 1])


def test_cyclic_trace_step_times_replay_in_order():
    trace = Trace([0.5, 1.0, 2.0], mode="cycle")
    p = Pipeline(Exponential(4.0), step_time=trace, policy="greedy", max_echo=8)
    s = simulate(p, 200, seed=1)
    durations = s.step_end - s.step_start
    np.testing.assert_allclose(durations, np.resize(trace.times, s.n_steps), rtol=1e-12)


def test_kernel_does_not_recompile():
    from echosim.pipeline import kernel as des

    for policy in ALONE:
        simulate(Pipeline(Exponential(2.0), policy=policy, **POLICY_KW[policy]), 50, 0, batch_size=2)
    n = len(des.run_des.signatures)
    for policy in ALONE:
        simulate(Pipeline(Exponential(3.0), workers=3, policy=policy, delivery="unordered",
                          step_time=Exponential(1.0), **POLICY_KW[policy]), 60, 1, batch_size=3)
    simulate(Pipeline(Exponential(3.0), policy="auto", max_echo=4), 60, 1, caps=np.full(60, 3))
    simulate_with_times(Pipeline(Deterministic(1.0)), [1.0, 2.0], [1.0, 1.0])
    assert len(des.run_des.signatures) == n == 1
    assert len(des.shuffle_stream.signatures) == 1


def test_import_is_cheap():
    code = "import sys, echosim.pipeline; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("kwargs, field", [
    (dict(arrival=-1.0), "arrival"),
    (dict(arrival="slow"), "arrival"),
    (dict(workers=0), "workers"),
    (dict(workers=1.5), "workers"),
    (dict(workers=True), "workers"),
    (dict(prefetch=0), "prefetch"),
    (dict(step_time=0.0), "step_time"),
    (dict(step_time=-2.0), "step_time"),
    (dict(policy="sometimes"), "policy"),
    (dict(policy="fixed"), "echo"),
    (dict(policy="fixed", echo=0.5), "echo"),
    (dict(policy="example", echo=math.inf), "echo"),
    (dict(policy="sync", echo=2.0), "echo"),
    (dict(policy="greedy", max_echo=0), "max_echo"),
    (dict(delivery="random"), "delivery"),
    (dict(blocking="during"), "blocking"),
    (dict(switch_overhead=-0.1), "switch_overhead"),
    (dict(switch_overhead=math.nan), "switch_overhead"),
    (dict(policy="example", echo=2.0, shuffle_buffer=0), "shuffle_buffer"),
    (dict(policy="fixed", echo=2.0, shuffle_buffer=8), "shuffle_buffer"),
])
def test_bad_pipeline_names_the_field(kwargs, field):
    args = dict(arrival=2.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        Pipeline(**args)


@pytest.mark.parametrize("kwargs, field", [
    (dict(n_batches=0), "n_batches"),
    (dict(n_batches=2.5), "n_batches"),
    (dict(seed=-1), "seed"),
    (dict(seed=1.5), "seed"),
    (dict(seed=None), "seed"),
    (dict(batch_size=0), "batch_size"),
    (dict(pipeline="fast"), "pipeline"),
])
def test_bad_simulate_arguments_name_the_argument(kwargs, field):
    args = dict(pipeline=Pipeline(2.0), n_batches=10, seed=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        simulate(**args)


def test_example_needs_batch_size():
    with pytest.raises(ValueError, match="batch_size"):
        simulate(Pipeline(2.0, policy="example", echo=2), 10, 0)


@pytest.mark.parametrize("kwargs, field", [
    (dict(load_time=[]), "load_time"),
    (dict(load_time=[1.0, -1.0]), "load_time"),
    (dict(step_time=[0.0]), "step_time"),
    (dict(step_time=[1.0]), "step_time"),  # too few for 3 batches
])
def test_bad_replay_input_names_the_argument(kwargs, field):
    args = dict(pipeline=Pipeline(2.0), load_time=[1.0, 2.0, 3.0], step_time=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        simulate_with_times(**args)


def test_replay_needs_echo_draws_for_fractional_echo():
    with pytest.raises(ValueError, match="echo_draws"):
        simulate_with_times(Pipeline(2.0, policy="fixed", echo=1.5), [1.0, 2.0], 1.0)


def test_echo_schedule_is_k_per_batch_without_a_clock_and_validates_k_once():
    from echosim.pipeline import echo_schedule

    s = echo_schedule(np.array([1, 3, 2]))
    assert s.n_batches == 3 and s.n_steps == 6 and not s.timed and math.isnan(s.makespan)
    with pytest.raises(ValueError, match="summary"):
        s.summary()
    for bad, field in ((0, "echo"), (2.5, "integer"), (np.array([[1, 2]]), "1-D"), (np.array([1, 0]), "K_t")):
        with pytest.raises(ValueError, match=field):
            echo_schedule(bad, n_batches=None if np.ndim(bad) else 3)
    with pytest.raises(ValueError, match="n_batches"):
        echo_schedule(2)


def test_first_steps_keeps_the_steps_that_end_by_a_budget():
    p = Pipeline(Exponential(4.0), policy="greedy", max_echo=8)
    full = simulate(p, 200, seed=3)
    part = full.first_steps(50)
    assert part.n_steps == 50 and part.steps_per_batch.sum() == 50
    np.testing.assert_array_equal(part.step_end, full.step_end[:50])
    assert part.n_batches == full.step_batch[49] + 1


def test_a_schedule_shows_itself_in_a_notebook_with_units():
    from echosim.pipeline import Pipeline, simulate
    from echosim.pipeline.schedule import echo_schedule

    s = simulate(Pipeline(8.0, policy="greedy", max_echo=8), n_batches=50, seed=0)
    page = s._repr_html_()
    assert "<table>" in page and "time units" in page and "accelerator busy" in page
    assert "none (step counts only)" in echo_schedule(4, 10)._repr_html_()
