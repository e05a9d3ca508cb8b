"""The planner's timing from records: censored load times kept and corrected from a run where
the loader set the pace, not dropped (dropping them keeps only the slow loads)."""

import numpy as np

from echosim.loop.records import Records
from echosim.planner.recorded import _uncensor, recorded_timing


def rec(policy, echo, load, censored, step=0.01, B=64):
    T = len(load)
    return Records(policy=policy, echo=echo, batch_size=B, load_time=np.asarray(load, float),
                   load_censored=np.asarray(censored, bool), wait_time=np.zeros(T),
                   steps_per_batch=np.full(T, echo or 1), cap=np.full(T, echo or 1), epoch=np.zeros(T, np.int64),
                   step_batch=np.repeat(np.arange(T), echo or 1), step_start=np.zeros(T * (echo or 1)),
                   step_time=np.full(T * (echo or 1), step), loss=np.full(T * (echo or 1), np.nan))


def test_censored_times_come_from_the_sync_run_above_their_bound():
    rng = np.random.default_rng(0)
    true = rng.gamma(4.0, 0.025, 401)                        # the loader's times, mean 0.1 s
    sync = rec("sync", 1, true[:201], np.zeros(201))
    # under K = 4 the loop sets the pace: 3 in 4 loads found the buffer full and were prefetched
    # (lower bounds of a few ms); the exact ones are the loads the loop waited for: the slow ones
    k4_load = true[200:]
    cens = np.zeros(201, bool)
    cens[1:] = k4_load[1:] < np.quantile(k4_load[1:], 0.75)   # the worst case: the fastest 3 in 4 censored
    bounds = np.where(cens, 0.003, k4_load)
    k4 = rec("fixed", 4, bounds, cens)
    groups = {g[1]: g for g in recorded_timing([sync, k4], [64])[64]}
    dropped = k4_load[1:][~cens[1:]].mean()                   # what leaving them out gave
    assert dropped > 1.3 * true.mean()
    got = groups["fixed"][2]
    assert got.n == 200                                       # every load time kept
    # most of the bias gone (not all: which loads were censored is not known, so the bounds are
    # filled from the loader's whole distribution above them, not from its fast part)
    assert abs(got.mean - true.mean()) < min(0.2 * true.mean(), 0.4 * (dropped - true.mean()))


def test_without_a_reference_the_exact_times_stand():
    k4 = rec("fixed", 4, [0.1, 0.2, 0.003, 0.3], [False, False, True, False])
    (g,) = recorded_timing([k4], [64])[64]
    assert g[2].n == 2 and np.isclose(g[2].mean, 0.25)       # the first batch is start-up


def test_uncensor_keeps_a_bound_above_every_reference_time():
    out = _uncensor(np.array([]), np.array([0.5, 0.01]), np.array([0.1, 0.2]))
    assert out.tolist() == [0.5, 0.2] or out.tolist() == [0.5, 0.1]
    assert (out >= np.array([0.5, 0.01])).all()


def test_a_k_never_recorded_gets_its_step_time_from_a_model_in_k():
    """The step slows while the loader works: s(K) = s0 + s1 * u(K), u the loader's busy
    fraction. Records made by that rule at K = 1, 2, 4 (loader 0.1 s); K = 8 and 16 predicted
    by it, against the same rule solved directly, not copied from K = 4."""
    from echosim.planner.recorded import step_time_at

    L, s0, s1 = 0.1, 0.01, 0.02

    def s_of(K):  # the rule, solved by bisection (independent of the fixed point in the code)
        lo, hi = 1e-4, 1.0
        for _ in range(200):
            mid = (lo + hi) / 2
            f = mid - (s0 + s1 * min(1.0, L / max(L, K * mid)))
            lo, hi = (mid, hi) if f < 0 else (lo, mid)
        return lo

    recs = [rec("sync", 1, np.full(41, L), np.zeros(41), step=s_of(1))]
    recs += [rec("fixed", K, np.full(41, L), np.zeros(41), step=s_of(K)) for K in (2, 4)]
    groups = recorded_timing(recs, [64])[64]
    for K in (8, 16):
        got = step_time_at(groups, K).mean
        assert np.isclose(got, s_of(K), rtol=1e-3), (K, got, s_of(K))
        assert not np.isclose(got, s_of(4), rtol=0.05)  # not K = 4's, copied
    # with one policy recorded there is nothing to fit: the nearest, as it is
    (g,) = recorded_timing(recs[:1], [64])[64]
    assert step_time_at([g], 8).mean == g[3].mean


def segments(policy, echo, means, rng, n=11, cv=0.1):
    """One record per segment, each with its own loader mean (the host's load drifts)."""
    return [rec(policy, echo, m * (1 + cv * rng.standard_normal(n)).clip(0.2), np.zeros(n)) for m in means]


def test_loader_times_are_pooled_where_policies_do_not_differ_beyond_the_drift():
    rng = np.random.default_rng(1)
    # the same loader under both policies, the host's load drifting from segment to segment
    recs = segments("sync", 1, [0.29, 0.20, 0.35, 0.22], rng) + segments("fixed", 2, [0.41, 0.25, 0.30, 0.38], rng)
    groups = {g[1]: g for g in recorded_timing(recs, [64])[64]}
    assert groups["sync"][2].mean == groups["fixed"][2].mean  # one loader, measured by both
    # a loader really slowed by the policy (every segment, far beyond the drift) keeps its own
    recs = segments("sync", 1, [0.20, 0.21, 0.19, 0.20], rng) + segments("fixed", 2, [0.40, 0.41, 0.39, 0.42], rng)
    groups = {g[1]: g for g in recorded_timing(recs, [64])[64]}
    assert groups["fixed"][2].mean > 1.8 * groups["sync"][2].mean
