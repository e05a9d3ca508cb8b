"""Service-time processes: exact moments vs samples, scaling, names, dicts, files.

Statistical checks use z*sqrt(var/n) with z = 5 and the exact variance of the
estimator (the 4th central moment for the sample variance), so a false alarm has
probability of order 1e-6 per example.
"""

import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

import echosim.pipeline as arrivals
from echosim.pipeline.service_times import Deterministic, Exponential, Gamma, LogNormal, Pareto, ServiceTime, Stall
from echosim.pipeline.traces import Trace
from echosim.pipeline.service_times import as_service_time, service_time_from_dict

N = 50_000
Z = 5.0

seeds = st.integers(0, 2**32 - 1)
means = st.floats(0.01, 1000.0)


def mu4(d: ServiceTime) -> float:
    """Exact 4th central moment (finite cases only)."""
    if isinstance(d, Deterministic):
        return 0.0
    if isinstance(d, Exponential):
        return 9.0 * d.mean**4
    if isinstance(d, Gamma):
        return d.variance**2 * (3.0 + 6.0 * d.cv**2)
    if isinstance(d, LogNormal):
        w = 1.0 + d.cv**2
        return d.variance**2 * (w**4 + 2 * w**3 + 3 * w**2 - 3.0)
    if isinstance(d, Pareto):
        a = d.shape
        assert a > 4
        exk = 6 * (a**3 + a**2 - 6 * a - 2) / (a * (a - 3) * (a - 4))
        return d.variance**2 * (3.0 + exk)
    if isinstance(d, Stall):
        p, L = d.p, d.length
        var_j = p * (1 - p) * L**2
        mu4_j = L**4 * p * (1 - p) * (1 - 3 * p + 3 * p**2)
        return mu4(d.base) + 6 * d.base.variance * var_j + mu4_j
    if isinstance(d, Trace):
        return float(np.mean((d.times - d.mean) ** 4))
    raise AssertionError(d)


def draw(d: ServiceTime, seed: int, n: int = N) -> np.ndarray:
    x = d.sample(np.random.default_rng(seed), n)
    assert isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == (n,)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    return x


def check_mean(d: ServiceTime, x: np.ndarray) -> None:
    n = x.size
    tol = Z * math.sqrt(d.variance / n) + 1e-12 * d.mean
    assert abs(x.mean() - d.mean) <= tol, (d, x.mean(), d.mean, tol)


def check_variance(d: ServiceTime, x: np.ndarray) -> None:
    # s2 = n/(n-1) * (m2 - (xbar - mu)**2) with m2 = mean((x - mu)**2), so
    # |s2 - var| <= |m2 - var| + (xbar - mu)**2 + O(var/n). The first term has sd
    # sqrt((mu4 - var**2)/n); the second is below Z**2 var/n with the same odds as the
    # mean check. Summing both stays safe when mu4 = var**2 (a symmetric two-point
    # law), where the first-order term vanishes and s2 is not normal.
    n = x.size
    s2 = x.var(ddof=1)
    v = d.variance
    tol = Z * math.sqrt(max(mu4(d) - v**2, 0.0) / n) + (Z**2 + 2) * v / n
    tol += 1e-9 * v + 1e-12 * d.mean**2  # rounding
    assert abs(s2 - v) <= tol, (d, s2, v, tol)


def check_moments(d: ServiceTime, seed: int) -> None:
    x = draw(d, seed)
    check_mean(d, x)
    check_variance(d, x)


# ---------------------------------------------------------------------------
# moments, family by family


@given(value=means, seed=seeds)
def test_deterministic_is_constant(value, seed):
    d = Deterministic(value)
    x = draw(d, seed, 100)
    assert np.all(x == d.value)
    assert d.mean == d.value and d.variance == 0.0


@given(mean=means, seed=seeds)
def test_exponential_moments(mean, seed):
    d = Exponential(mean)
    assert d.variance == pytest.approx(mean**2, rel=1e-12)
    check_moments(d, seed)


@given(mean=means, cv=st.one_of(st.just(0.0), st.floats(0.05, 2.0)), seed=seeds)
def test_gamma_moments(mean, cv, seed):
    check_moments(Gamma(mean, cv), seed)


@given(mean=means, cv=st.one_of(st.just(0.0), st.floats(0.05, 1.0)), seed=seeds)
def test_lognormal_moments(mean, cv, seed):
    check_moments(LogNormal(mean, cv), seed)


@given(mean=means, cv=st.floats(1.0, 3.0), seed=seeds)
def test_lognormal_mean_heavy_cv(mean, cv, seed):
    # The sample variance of a cv > 1 log-normal is too skewed for a normal
    # tolerance at this n; its mean is fine.
    d = LogNormal(mean, cv)
    check_mean(d, draw(d, seed))


@given(mean=means, shape=st.floats(3.5, 9.0), seed=seeds)
def test_pareto_mean(mean, shape, seed):
    # Finite variance (shape > 2). Below ~3.5 a single huge draw exceeds the 5-sigma
    # tolerance with probability ~1e-4 per example, so we stay above it.
    d = Pareto(mean, shape)
    check_mean(d, draw(d, seed))


@given(mean=means, shape=st.floats(9.0, 30.0), seed=seeds)
def test_pareto_variance(mean, shape, seed):
    # Finite 4th (and 8th) moment, so the sample variance is close to normal.
    check_moments(Pareto(mean, shape), seed)


@pytest.mark.parametrize("shape", [1.01, 1.5, 2.0])
def test_pareto_infinite_variance(shape):
    d = Pareto(5.0, shape)
    assert d.variance == math.inf
    assert d.x_min == pytest.approx(5.0 * (shape - 1) / shape)
    x = draw(d, 0, 1000)
    assert x.min() >= d.x_min


@given(
    base=st.one_of(
        st.builds(Exponential, means),
        st.builds(Gamma, means, st.floats(0.0, 1.5)),
        st.builds(Deterministic, means),
    ),
    p=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)),
    length=st.floats(0.01, 1000.0),
    seed=seeds,
)
def test_stall_moments(base, p, length, seed):
    d = Stall(base, p, length)
    assert d.mean == pytest.approx(base.mean + p * length, rel=1e-12)
    assert d.variance == pytest.approx(base.variance + p * (1 - p) * length**2, rel=1e-12)
    check_moments(d, seed)


@given(
    times=st.lists(st.floats(0.001, 100.0), min_size=1, max_size=50),
    seed=seeds,
)
def test_trace_resample_moments_and_support(times, seed):
    d = Trace(times, mode="resample")
    assert d.mean == pytest.approx(np.mean(times), rel=1e-12)
    assert d.variance == pytest.approx(np.var(times), rel=1e-9, abs=1e-12 * d.mean**2)
    x = draw(d, seed)
    assert set(np.unique(x)) <= set(np.asarray(times, dtype=float))
    check_mean(d, x)
    check_variance(d, x)


@given(times=st.lists(st.floats(0.001, 100.0), min_size=1, max_size=20), n=st.integers(0, 70))
def test_trace_cycle_replays_in_order(times, n):
    d = Trace(times)
    x = d.sample(np.random.default_rng(0), n)
    expected = [float(times[i % len(times)]) for i in range(n)]
    assert x.tolist() == expected
    # rng unused: any generator gives the same replay, and start= continues it
    assert d.sample(np.random.default_rng(1), n).tolist() == expected
    y = d.sample(np.random.default_rng(0), n, start=3)
    assert y.tolist() == [float(times[(3 + i) % len(times)]) for i in range(n)]


# ---------------------------------------------------------------------------
# the parametrisation agrees with scipy.stats (checks quantiles, so it also covers
# the infinite-variance Pareto)


def scipy_twin(d):
    if isinstance(d, Exponential):
        return stats.expon(scale=d.mean)
    if isinstance(d, Gamma):
        return stats.gamma(a=1 / d.cv**2, scale=d.mean * d.cv**2)
    if isinstance(d, LogNormal):
        w = 1 + d.cv**2
        return stats.lognorm(s=math.sqrt(math.log(w)), scale=d.mean / math.sqrt(w))
    if isinstance(d, Pareto):
        return stats.pareto(b=d.shape, scale=d.mean * (d.shape - 1) / d.shape)
    raise AssertionError(d)


@given(
    d=st.one_of(
        st.builds(Exponential, means),
        st.builds(Gamma, means, st.floats(0.05, 3.0)),
        st.builds(LogNormal, means, st.floats(0.05, 3.0)),
        st.builds(Pareto, means, st.floats(1.01, 10.0)),
    ),
    seed=seeds,
)
def test_quantiles_match_scipy(d, seed):
    twin = scipy_twin(d)
    assert twin.mean() == pytest.approx(d.mean, rel=1e-9)
    if math.isfinite(d.variance):
        assert twin.var() == pytest.approx(d.variance, rel=1e-9)
    x = draw(d, seed)
    for q in (0.1, 0.5, 0.9):
        frac = np.mean(x <= twin.ppf(q))
        assert abs(frac - q) <= Z * math.sqrt(q * (1 - q) / x.size)


def test_n_zero_gives_empty_array():
    rng = np.random.default_rng(0)
    for d in EXAMPLES:
        x = d.sample(rng, 0)
        assert x.shape == (0,) and x.dtype == np.float64


def test_large_cv_gamma_stays_strictly_positive():
    x = Gamma(1.0, 10.0).sample(np.random.default_rng(0), 20_000)  # many underflow to 0
    assert np.all(x > 0)


def test_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, echosim.pipeline.service_times; "
        "heavy = [m for m in ('matplotlib', 'pandas', 'scipy.stats') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_global_random_state():
    state = np.random.get_state()[1].copy()
    a = Gamma(2.0, 0.7).sample(np.random.default_rng(5), 10)
    b = Gamma(2.0, 0.7).sample(np.random.default_rng(5), 10)
    assert np.array_equal(a, b)
    assert np.array_equal(np.random.get_state()[1], state)


# ---------------------------------------------------------------------------
# scaled, repr, dicts, equality, pickling

EXAMPLES = [
    Deterministic(1.0),
    Exponential(8.0),
    Gamma(8.0, 0.5),
    Gamma(3.0, 0.0),
    LogNormal(8.0, 0.3),
    Pareto(8.0, 1.5),
    Pareto(8.0, 3.0),
    Stall(Exponential(8.0), 0.1, 50.0),
    Stall(Stall(Gamma(2.0, 0.2), 0.5, 1.0), 0.01, 100.0),
    Trace([7.5, 8.0, 9.25]),
    Trace(np.linspace(1.0, 2.0, 100), mode="resample"),
]

parametric = st.one_of(
    st.builds(Deterministic, means),
    st.builds(Exponential, means),
    st.builds(Gamma, means, st.floats(0.0, 5.0)),
    st.builds(LogNormal, means, st.floats(0.0, 5.0)),
    st.builds(Pareto, means, st.floats(1.001, 50.0)),
)
any_parametric = st.one_of(
    parametric, st.builds(Stall, parametric, st.floats(0.0, 1.0), st.floats(0.01, 100.0))
)


@given(
    d=st.one_of(any_parametric, st.sampled_from(EXAMPLES)), c=st.floats(1e-3, 1e3), seed=seeds
)
def test_scaled_scales_moments_and_samples(d, c, seed):
    s = d.scaled(c)
    assert type(s) is type(d)
    assert s.mean == pytest.approx(c * d.mean, rel=1e-12)
    if math.isinf(d.variance):
        assert math.isinf(s.variance)
    else:
        assert s.variance == pytest.approx(c * c * d.variance, rel=1e-9, abs=1e-300)
    # same random numbers, every time multiplied by c
    x = d.sample(np.random.default_rng(seed), 50)
    y = s.sample(np.random.default_rng(seed), 50)
    np.testing.assert_allclose(y, c * x, rtol=1e-9)


@pytest.mark.parametrize("c", [0, -1.0, math.inf, math.nan, "2", True])
def test_scaled_rejects_bad_factor(c):
    with pytest.raises(ValueError, match="c"):
        Exponential(1.0).scaled(c)


@given(d=any_parametric)
def test_repr_round_trips(d):
    r = repr(d)
    assert r.startswith(type(d).__name__ + "(")
    assert eval(r, vars(arrivals)) == d


def test_repr_examples():
    assert repr(Exponential(mean=8)) == "Exponential(mean=8.0)"
    assert repr(Gamma(8, 0.5)) == "Gamma(mean=8.0, cv=0.5)"
    assert repr(Stall(2, 0.1, 5)) == "Stall(base=Deterministic(value=2.0), p=0.1, length=5.0)"
    assert repr(Trace([1, 2.5])) == "Trace(times=(1.0, 2.5), mode='cycle')"


def test_long_trace_repr_is_short_and_distinguishes_traces():
    a = Trace(np.linspace(1.0, 3.0, 1000))
    b = Trace(np.linspace(1.0, 3.0, 1000)[::-1])  # same n and mean, other order
    assert len(repr(a)) < 80
    assert repr(a).startswith("Trace(n=1000, mean=2, mode='cycle', digest=")
    assert repr(a) != repr(b) and a != b
    short = Trace([3.0, 1.0], "resample")
    assert eval(repr(short), vars(arrivals)) == short


@given(d=st.one_of(any_parametric, st.sampled_from(EXAMPLES)))
def test_to_dict_round_trips(d):
    dd = d.to_dict()
    assert dd["kind"] == type(d).kind
    assert service_time_from_dict(dd) == d
    assert ServiceTime.from_dict(dd) == d
    assert type(d).from_dict({k: v for k, v in dd.items() if k != "kind"}) == d
    # only plain TOML/JSON types
    def plain(v):
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return isinstance(v, (str, float, int))

    assert plain(dd)


def test_from_dict_toml_style():
    assert service_time_from_dict({"kind": "gamma", "mean": 8, "cv": 0.5}) == Gamma(8.0, 0.5)
    assert service_time_from_dict({"kind": "Exponential", "mean": 2}) == Exponential(2.0)
    base = {"kind": "exponential", "mean": 8}
    s = service_time_from_dict({"kind": "stall", "base": base, "p": 0.1, "length": 50})
    assert s == Stall(Exponential(8.0), 0.1, 50.0)
    s = service_time_from_dict({"kind": "stall", "base": 3, "p": 0, "length": 1})
    assert s.base == Deterministic(3.0)
    t = service_time_from_dict({"kind": "trace", "times": [1, 2], "mode": "resample", "scale": 2})
    assert t == Trace([2.0, 4.0], "resample")


@pytest.mark.parametrize(
    "d, words",
    [
        ({"kind": "weibull", "mean": 1}, ["weibull", "gamma", "exponential"]),
        ({"mean": 1}, ["kind"]),
        ({"kind": "gamma", "mean": 8, "cv": 0.5, "shape": 2}, ["shape", "cv", "mean"]),
        ({"kind": "gamma", "mean": 8}, ["cv"]),
        ({"kind": "trace"}, ["path", "times"]),
        ({"kind": "trace", "times": [1.0], "path": "x.npy"}, ["path", "times"]),
        ({"kind": "trace", "times": [1.0], "column": "time"}, ["column"]),
        ({"kind": 3}, ["kind"]),
        ("gamma", ["mapping"]),
    ],
)
def test_from_dict_errors_name_the_problem(d, words):
    with pytest.raises(ValueError) as info:
        service_time_from_dict(d)
    for w in words:
        assert w in str(info.value)


def test_from_dict_on_subclass_checks_kind():
    with pytest.raises(ValueError, match="Gamma"):
        Gamma.from_dict({"kind": "exponential", "mean": 1.0})


def test_equality_hash_pickle():
    for d in EXAMPLES:
        again = pickle.loads(pickle.dumps(d))
        assert again == d and hash(again) == hash(d) and repr(again) == repr(d)
    assert Exponential(2) == Exponential(2.0) and hash(Exponential(2)) == hash(Exponential(2.0))
    assert Exponential(2.0) != Gamma(2.0, 1.0)
    assert len({Trace([1.0, 2.0]), Trace([1.0, 2.0]), Trace([1.0, 2.0], "resample")}) == 2
    with pytest.raises(AttributeError):
        Exponential(2.0).mean = 3.0  # frozen


def test_trace_times_are_a_read_only_copy():
    src = np.array([1.0, 2.0])
    t = Trace(src)
    src[0] = 100.0
    assert t.times[0] == 1.0
    with pytest.raises(ValueError):
        t.times[0] = 5.0
    x = t.sample(np.random.default_rng(0), 3)
    x[0] = 7.0  # samples are the caller's to modify
    assert t.times[0] == 1.0


def test_as_service_time():
    assert as_service_time(1.0) == Deterministic(1.0)
    assert as_service_time(2) == Deterministic(2.0)
    assert as_service_time(np.float32(0.5)) == Deterministic(0.5)
    g = Gamma(1.0, 0.1)
    assert as_service_time(g) is g
    assert as_service_time({"kind": "exponential", "mean": 3}) == Exponential(3.0)
    for bad in (0.0, -1.0, math.inf, "1.0", True, None):
        with pytest.raises(ValueError):
            as_service_time(bad)


# ---------------------------------------------------------------------------
# validation: every bad input is a ValueError naming the field


@pytest.mark.parametrize(
    "make, field",
    [
        (lambda: Deterministic(0.0), "Deterministic.value"),
        (lambda: Deterministic(-1.0), "Deterministic.value"),
        (lambda: Deterministic(math.inf), "Deterministic.value"),
        (lambda: Deterministic("1"), "Deterministic.value"),
        (lambda: Exponential(0.0), "Exponential.mean"),
        (lambda: Exponential(math.nan), "Exponential.mean"),
        (lambda: Exponential(True), "Exponential.mean"),
        (lambda: Gamma(-1.0, 0.5), "Gamma.mean"),
        (lambda: Gamma(1.0, -0.1), "Gamma.cv"),
        (lambda: Gamma(1.0, math.inf), "Gamma.cv"),
        (lambda: LogNormal(0.0, 0.5), "LogNormal.mean"),
        (lambda: LogNormal(1.0, -1e-9), "LogNormal.cv"),
        (lambda: Pareto(math.inf, 3.0), "Pareto.mean"),
        (lambda: Pareto(1.0, 1.0), "Pareto.shape"),
        (lambda: Pareto(1.0, 0.5), "Pareto.shape"),
        (lambda: Pareto(1.0, math.inf), "Pareto.shape"),
        (lambda: Stall(Exponential(1.0), -0.1, 1.0), "Stall.p"),
        (lambda: Stall(Exponential(1.0), 1.5, 1.0), "Stall.p"),
        (lambda: Stall(Exponential(1.0), math.nan, 1.0), "Stall.p"),
        (lambda: Stall(Exponential(1.0), 0.5, 0.0), "Stall.length"),
        (lambda: Stall(Exponential(1.0), 0.5, -2.0), "Stall.length"),
        (lambda: Stall("fast", 0.5, 1.0), "Stall.base"),
        (lambda: Stall(-1.0, 0.5, 1.0), "Stall.base"),
        (lambda: Trace([]), "Trace.times"),
        (lambda: Trace(["a", "b"]), "Trace.times"),
        (lambda: Trace([1.0, None]), "Trace.times"),
        (lambda: Trace([1.0, 0.0]), "Trace.times"),
        (lambda: Trace([1.0, -2.0]), "Trace.times"),
        (lambda: Trace([1.0, math.nan]), "Trace.times"),
        (lambda: Trace([[1.0, 2.0]]), "Trace.times"),
        (lambda: Trace([True, False]), "Trace.times"),
        (lambda: Trace([1.0], mode="loop"), "Trace.mode"),
        (lambda: Trace.from_file("/nonexistent/trace.npy"), "Trace.path"),
        (lambda: Trace.from_file("/nonexistent/trace.npy", mode="loop"), "Trace.mode"),
        (lambda: Trace.from_file("/nonexistent/trace.npy", scale=0), "Trace.scale"),
    ],
)
def test_validation_names_the_field(make, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        make()


@pytest.mark.parametrize("rng", [0, None, np.random.RandomState(0)])
def test_sample_requires_a_generator(rng):
    with pytest.raises(ValueError, match="rng"):
        Exponential(1.0).sample(rng, 3)


@pytest.mark.parametrize("n", [-1, 2.5, "3", True])
def test_sample_rejects_bad_n(n):
    with pytest.raises(ValueError, match="n must"):
        Exponential(1.0).sample(np.random.default_rng(0), n)


def test_trace_sample_rejects_bad_start():
    with pytest.raises(ValueError, match="start"):
        Trace([1.0]).sample(np.random.default_rng(0), 3, start=-1)


# ---------------------------------------------------------------------------
# trace files


def test_trace_from_npy(tmp_path):
    times = np.array([0.5, 1.5, 2.0])
    np.save(tmp_path / "a.npy", times)
    np.save(tmp_path / "b.npy", times[:, None])
    rec = np.zeros(3, dtype=[("batch", "i8"), ("seconds", "f8")])
    rec["batch"], rec["seconds"] = [0, 1, 2], times
    np.save(tmp_path / "c.npy", rec)
    for name in ("a.npy", "b.npy", "c.npy"):
        t = Trace.from_file(tmp_path / name)
        assert np.array_equal(t.times, times) and t.mode == "cycle"
    t = Trace.from_file(str(tmp_path / "a.npy"), "resample", scale=2.0)
    assert np.array_equal(t.times, 2 * times) and t.mode == "resample"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1.5\n2.5\n3\n", [1.5, 2.5, 3.0]),
        ("time\n1.5\n2.5\n", [1.5, 2.5]),
        ("whatever\n1.5\n\n2.5\n", [1.5, 2.5]),
        ("# measured on node 3\nbatch,seconds\n0,1.5\n1,2.5\n", [1.5, 2.5]),
        ('"step","Time","size"\n1,0.25,32\n2,0.75,32\n', [0.25, 0.75]),
    ],
)
def test_trace_from_csv(tmp_path, text, expected):
    p = tmp_path / "t.csv"
    p.write_text(text)
    assert Trace.from_file(p).times.tolist() == expected


def test_trace_from_csv_column_and_errors(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("load,decode\n1.0,2.0\n3.0,4.0\n")
    assert Trace.from_file(p, column="decode").times.tolist() == [2.0, 4.0]
    with pytest.raises(ValueError, match="time.*seconds"):
        Trace.from_file(p)
    p.write_text("1.0,2.0\n3.0,4.0\n")
    with pytest.raises(ValueError, match="header"):
        Trace.from_file(p)
    p.write_text("time\n1.0\nfast\n")
    with pytest.raises(ValueError, match="'fast'"):
        Trace.from_file(p)
    p.write_text("time\n1.0\n-3\n")
    with pytest.raises(ValueError, match="Trace.*times"):
        Trace.from_file(p)
    p.write_text("time\n")
    with pytest.raises(ValueError, match=r"Trace.*\.times.*at least one"):
        Trace.from_file(p)
    q = tmp_path / "t.txt"
    q.write_text("1.0\n")
    with pytest.raises(ValueError, match=r"\.npy, \.csv"):
        Trace.from_file(q)


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
def test_trace_file_round_trip_and_dict(tmp_path, suffix):
    t = Trace(Gamma(8.0, 0.5).sample(np.random.default_rng(3), 1000), mode="resample")
    path = tmp_path / ("trace" + suffix)
    t.to_file(path)
    back = Trace.from_file(path, "resample")
    assert back == t  # exact: csv writes repr(float)
    d = back.to_dict()
    assert d == {"kind": "trace", "path": str(path), "mode": "resample"}
    assert service_time_from_dict(d) == t
    d2 = back.scaled(2.0).to_dict()
    assert d2["scale"] == 2.0 and service_time_from_dict(d2) == t.scaled(2.0)


def test_a_long_trace_shows_itself_in_a_notebook():
    from echosim.pipeline.traces import Trace

    page = Trace(np.linspace(1.0, 3.0, 1000))._repr_html_()
    assert "<table>" in page and "<td>1000</td>" in page and "<td>2</td>" in page and "cycle" in page
