"""Loader profiling (fake clock, real busy work) and maximum-likelihood fits."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from echosim.pipeline.service_times import Deterministic, Exponential, Gamma, LogNormal, Pareto
from echosim.pipeline.traces import Trace
from echosim.pipeline.traces import FAMILIES, Fit, fit_service_times
from echosim.pipeline.profiling import profile

Z = 5.0
N_FIT = 5000


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def delayed(clock, delays):
    """Yield one item per delay, advancing the fake clock by it inside next()."""
    for d in delays:
        clock.t += d
        yield d


class SlowToStart:
    """An iterable whose iter() costs time (like spawning loader workers)."""

    def __init__(self, clock, delays):
        self.clock, self.delays = clock, delays

    def __iter__(self):
        self.clock.t += 1e6
        return delayed(self.clock, self.delays)


# ---------------------------------------------------------------------------
# profile


@given(delays=st.lists(st.floats(1e-6, 10.0), min_size=1, max_size=30))
def test_profile_recovers_fake_delays(delays):
    clock = FakeClock()
    trace = profile(SlowToStart(clock, delays), len(delays), clock=clock)
    assert isinstance(trace, Trace) and trace.mode == "resample"  # as the planner reads trace files
    # exact up to the rounding of t1 - t0 on a clock near 1e6
    np.testing.assert_allclose(trace.times, delays, rtol=1e-9, atol=1e-9)


def test_profile_times_only_next_and_honours_warmup():
    clock = FakeClock()
    delays = [0.5, 0.25, 2.0, 1.0, 0.125, 4.0]
    it = delayed(clock, delays)
    trace = profile(it, 3, clock=clock, warmup=2, mode="cycle")
    assert trace.times.tolist() == [2.0, 1.0, 0.125]  # binary-exact delays
    assert trace.mode == "cycle"
    assert next(it) == 4.0  # exactly warmup + n items were consumed


def test_profile_short_iterable_warns_and_returns_what_it_got():
    clock = FakeClock()
    with pytest.warns(RuntimeWarning, match="2 of n=5"):
        trace = profile(delayed(clock, [0.5, 1.5]), 5, clock=clock)
    assert trace.times.tolist() == [0.5, 1.5]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n=0), "n must"),
        (dict(n=-3), "n must"),
        (dict(n=2.0), "n must"),
        (dict(n=True), "n must"),
        (dict(n=2, warmup=-1), "warmup"),
        (dict(n=2, clock=3.0), "clock"),
        (dict(n=2, mode="loop"), "mode"),
    ],
)
def test_profile_rejects_bad_arguments(kwargs, match):
    consumed = []

    def gen():
        consumed.append(1)
        yield 1

    with pytest.raises(ValueError, match=match):
        profile(gen(), **kwargs)
    assert consumed == []  # raised before any work


def test_profile_empty_and_exhausted_warmup():
    with pytest.raises(ValueError, match="no batch"):
        profile([], 3)
    with pytest.raises(ValueError, match="warm-up"):
        profile([1, 2], 3, warmup=5)


def test_profile_rejects_non_positive_durations():
    clock = FakeClock()
    with pytest.raises(ValueError, match="clock"):
        profile(delayed(clock, [1.0, 0.0, 1.0]), 3, clock=clock)


def test_profile_real_busy_work_ordering():
    # Item k does 1 or 200 units of pure-Python work; no sleeps, and no absolute
    # timing: only that 200x more work is measured as taking longer.
    def work(units):
        s = 0
        for i in range(2000 * units):
            s += i
        return s

    def loader():
        for units in (1, 200, 1, 200):
            yield work(units)

    trace = profile(loader(), 4)
    t = trace.times
    assert np.all(t > 0)
    assert min(t[1], t[3]) > max(t[0], t[2])


# ---------------------------------------------------------------------------
# fit_service_times


def fit_one(d, seed, family):
    x = d.sample(np.random.default_rng(seed), N_FIT)
    fits = fit_service_times(x, candidates=(family,))
    assert len(fits) == 1 and isinstance(fits[0], Fit)
    return fits[0], x


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mean", [0.01, 8.0])
def test_fit_exponential(seed, mean):
    f, x = fit_one(Exponential(mean), seed, "exponential")
    assert isinstance(f.dist, Exponential)
    assert abs(f.dist.mean - mean) <= Z * mean / math.sqrt(N_FIT)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mean, cv", [(8.0, 0.3), (2.0, 1.0), (50.0, 2.0)])
def test_fit_gamma(seed, mean, cv):
    f, x = fit_one(Gamma(mean, cv), seed, "gamma")
    assert isinstance(f.dist, Gamma)
    a = 1 / cv**2
    # asymptotic MLE standard errors: mean-hat is the sample mean; shape from the
    # Fisher information of (alpha, theta)
    se_a = math.sqrt(a / (N_FIT * (a * special.polygamma(1, a) - 1)))
    se_cv = 0.5 * a**-1.5 * se_a
    assert abs(f.dist.mean - mean) <= Z * mean * cv / math.sqrt(N_FIT)
    assert abs(f.dist.cv - cv) <= Z * se_cv


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mean, cv", [(8.0, 0.3), (1.0, 1.5)])
def test_fit_lognormal(seed, mean, cv):
    true = LogNormal(mean, cv)
    f, x = fit_one(true, seed, "lognormal")
    assert isinstance(f.dist, LogNormal)
    s = true.sigma
    assert abs(f.dist.mu - true.mu) <= Z * s / math.sqrt(N_FIT)
    assert abs(f.dist.sigma - s) <= Z * s / math.sqrt(2 * N_FIT)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("mean, shape", [(8.0, 3.0), (1.0, 1.5)])
def test_fit_pareto(seed, mean, shape):
    true = Pareto(mean, shape)
    f, x = fit_one(true, seed, "pareto")
    assert isinstance(f.dist, Pareto)
    # the minimum overshoots x_min by a factor (1 + t) with P = (1+t)^(-n*shape)
    assert f.dist.x_min <= x.min() and f.dist.x_min == pytest.approx(x.min(), rel=1e-12)
    assert math.isfinite(f.log_likelihood)
    assert true.x_min <= f.dist.x_min <= true.x_min * (1 + 20 / (N_FIT * shape))
    assert abs(f.dist.shape - shape) <= Z * shape / math.sqrt(N_FIT)


@pytest.mark.filterwarnings("ignore:fit_service_times")
def test_fit_deterministic():
    x = np.full(100, 2.5)
    with pytest.warns(RuntimeWarning, match="constant"):
        fits = fit_service_times(x)
    assert fits[0].dist == Deterministic(2.5)
    assert fits[0].ks_statistic == 0.0
    assert fits[0].log_likelihood == math.inf and fits[0].aic == -math.inf
    assert [type(f.dist).__name__ for f in fits] == ["Deterministic", "Exponential"]
    # on varying data the point mass has no density: -inf log-likelihood, ranked last
    x = Gamma(3.0, 0.5).sample(np.random.default_rng(0), 1000)
    fits = fit_service_times(x)
    det = [f for f in fits if isinstance(f.dist, Deterministic)][0]
    assert det.dist.value == pytest.approx(x.mean(), rel=1e-12)
    assert det.log_likelihood == -math.inf and det.aic == math.inf
    assert fits[-1] is det


@pytest.mark.filterwarnings("ignore:fit_service_times")
def test_fit_scores_are_consistent():
    x = Gamma(8.0, 0.5).sample(np.random.default_rng(4), N_FIT)
    fits = fit_service_times(Trace(x))
    assert [f.ks_statistic for f in fits] == sorted(f.ks_statistic for f in fits)
    for f in fits:
        assert 0.0 <= f.ks_statistic <= 1.0
        k = 1 if isinstance(f.dist, (Exponential, Deterministic)) else 2
        if math.isfinite(f.log_likelihood):
            assert f.aic == pytest.approx(2 * k - 2 * f.log_likelihood)
    by_family = {type(f.dist).__name__: f for f in fits}
    # the exponential is the gamma with cv = 1: a worse likelihood on cv = 0.5 data
    assert by_family["Gamma"].log_likelihood > by_family["Exponential"].log_likelihood


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit_ranks_true_family_first_when_distinguishable(seed):
    rng = np.random.default_rng(seed)
    pair = ("exponential", "lognormal")
    x = LogNormal(8.0, 0.3).sample(rng, N_FIT)
    fits = fit_service_times(x, pair)
    assert isinstance(fits[0].dist, LogNormal) and fits[0].aic < fits[1].aic
    x = Exponential(8.0).sample(rng, N_FIT)
    fits = fit_service_times(x, pair)
    assert isinstance(fits[0].dist, Exponential) and fits[0].aic < fits[1].aic
    # a Pareto's hard minimum and power tail stand out among all families
    x = Pareto(8.0, 3.0).sample(rng, N_FIT)
    assert isinstance(fit_service_times(x)[0].dist, Pareto)


@pytest.mark.filterwarnings("ignore:fit_service_times")
def test_trace_fit_delegates():
    t = Trace(Exponential(2.0).sample(np.random.default_rng(0), 500))
    assert t.fit() == fit_service_times(t)
    assert [type(f.dist) for f in t.fit(["gamma"])] == [Gamma]


@pytest.mark.parametrize(
    "data, kwargs, match",
    [
        ([1.0, 2.0], dict(candidates=("weibull",)), "weibull"),
        ([1.0, 2.0], dict(candidates=()), "candidates"),
        ([1.0], {}, "at least 2"),
        ([], {}, "trace_or_array"),
        ([1.0, -2.0], {}, "trace_or_array"),
        (["a", "b"], {}, "trace_or_array"),
    ],
)
def test_fit_rejects_bad_input(data, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_service_times(data, **kwargs)


def test_fit_skips_families_that_do_not_exist_for_the_data():
    # Pareto MLE shape <= 1 on wide, small-sample data: skipped with a warning
    x = np.array([1.0, 1.0001, 50.0, 3000.0])
    with pytest.warns(RuntimeWarning, match="pareto"):
        fits = fit_service_times(x)
    assert "Pareto" not in {type(f.dist).__name__ for f in fits}
    assert len(fits) == len(FAMILIES) - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="could be fitted"):
            fit_service_times(x, candidates="pareto")


def test_profile_of_something_not_iterable_names_the_argument():
    with pytest.raises(ValueError, match="^iterable must be an iterable of batches .* got int 42$"):
        profile(42, 5)
