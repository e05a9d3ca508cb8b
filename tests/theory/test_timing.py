"""Properties of the pipeline timing model in ``theory.timing``."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theory

pos = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
echo_factor = st.floats(1.0, 64.0)
RTOL = 1e-12


@given(pos, pos, echo_factor)
def test_pipeline_time_is_the_slower_stage(t_up, t_down, e):
    got = theory.pipeline_time(t_up=t_up, t_down=t_down, e=e)
    assert isinstance(got, float)
    assert got == max(t_up, e * t_down)
    # echoing up to R = t_up / t_down is free
    R = t_up / t_down
    if e <= R:
        assert got == t_up
    assert theory.pipeline_time(t_up=t_up, t_down=t_down, e=e + 1) >= got


@given(pos, pos, echo_factor, st.floats(0.1, 64.0))
def test_echo_speedup_is_the_ratio_of_times(t_up, t_down, e, fresh_ratio):
    R = t_up / t_down
    baseline = theory.pipeline_time(t_up=t_up, t_down=t_down, e=1)
    echoed = theory.pipeline_time(t_up=t_up, t_down=t_down, e=e)
    expected = fresh_ratio * baseline / echoed
    assert theory.echo_speedup(R=R, e=e, fresh_ratio=fresh_ratio) == pytest.approx(
        expected, rel=1e-10
    )


@given(st.floats(1.0, 1e3), echo_factor, st.floats(0.1, 64.0))
def test_echo_speedup_laggard_form(R, e, fresh_ratio):
    got = theory.echo_speedup(R=R, e=e, fresh_ratio=fresh_ratio)
    assert got == pytest.approx(fresh_ratio * min(1.0, R / e), rel=RTOL)
    # ideal echoing (each echoed step as good as a fresh one) gives min(e, R)
    assert theory.echo_speedup(R=R, e=e, fresh_ratio=e) == pytest.approx(min(e, R), rel=RTOL)


@given(st.floats(1e-3, 0.999), echo_factor)
def test_echo_speedup_without_laggard_loader_only_costs(R, e):
    assert theory.echo_speedup(R=R, e=e) == pytest.approx(1 / e, rel=RTOL)


def test_echo_speedup_default_and_paper_numbers():
    assert theory.echo_speedup(R=6.0, e=5) == 1.0  # free steps, no benefit assumed
    assert theory.echo_speedup(R=6.0, e=5, fresh_ratio=3.25) == pytest.approx(3.25)


const = st.fixed_dictionaries({"beta": pos, "rho": pos, "D": pos})


@given(const, st.integers(1, 4096), st.integers(1, 64), st.floats(1e-3, 1.0), pos, pos)
def test_time_to_accuracy_combines_bound_and_throughput(c, B, K, frac, t_up, t_down):
    eps = frac * (c["rho"] * c["D"] + c["beta"] * c["D"] ** 2)
    T_eps = theory.batches_to_accuracy(eps=eps, **c, B=B, K=K)
    per_batch = theory.pipeline_time(t_up=t_up, t_down=t_down, e=K)
    by_model = theory.time_to_accuracy(eps=eps, **c, B=B, K=K, t_up=t_up, t_down=t_down)
    assert by_model == pytest.approx(T_eps * per_batch, rel=RTOL)
    by_rate = theory.time_to_accuracy(eps=eps, **c, B=B, K=K, throughput=1 / per_batch)
    assert by_rate == pytest.approx(by_model, rel=1e-10)


@given(const, st.integers(1, 4096), st.integers(2, 32), st.floats(1.0, 64.0))
def test_theory_speedup_matches_echo_speedup(c, B, e, R):
    eps = 0.1 * (c["rho"] * c["D"] + c["beta"] * c["D"] ** 2)
    kw = dict(eps=eps, **c, B=B, t_up=R, t_down=1.0)
    ratio = theory.time_to_accuracy(**kw, K=1) / theory.time_to_accuracy(**kw, K=e)
    fresh_ratio = theory.batches_to_accuracy(eps=eps, **c, B=B, K=1) / theory.batches_to_accuracy(
        eps=eps, **c, B=B, K=e
    )
    assert fresh_ratio >= 1.0
    assert ratio == pytest.approx(theory.echo_speedup(R=R, e=e, fresh_ratio=fresh_ratio), rel=1e-10)


def test_curvature_regime_gives_near_linear_wall_clock_speedup():
    # K << K_sat: T_eps ~ 1/K, so with R >= K the wall-clock speedup approaches K
    c = dict(beta=1.0, rho=1e-3, D=1.0, B=1024)
    eps = 1e-3
    assert theory.saturation_echo(eps=eps, beta=1.0, rho=1e-3, B=1024) > 1000
    kw = dict(eps=eps, **c, t_up=8.0, t_down=1.0)
    speedup = theory.time_to_accuracy(**kw, K=1) / theory.time_to_accuracy(**kw, K=8)
    assert 7.0 < speedup <= 8.0


def test_timing_broadcasts():
    out = theory.pipeline_time(t_up=[[2.0], [8.0]], t_down=1.0, e=[1, 4, 16])
    np.testing.assert_array_equal(out, [[2, 4, 16], [8, 8, 16]])
    assert theory.echo_speedup(R=[1.0, 4.0], e=[[2], [8]]).shape == (2, 2)
    got = theory.time_to_accuracy(eps=[0.1, 0.01], beta=1, rho=1, D=1, B=64, K=4, throughput=2.0)
    assert got.shape == (2,)


INVALID = [
    (theory.pipeline_time, dict(t_up=0.0, t_down=1.0, e=1), "t_up must be positive"),
    (theory.pipeline_time, dict(t_up=1.0, t_down=-1.0, e=1), "t_down must be positive"),
    (theory.pipeline_time, dict(t_up=1.0, t_down=1.0, e=0.5), "e must be >= 1"),
    (theory.pipeline_time, dict(t_up=np.inf, t_down=1.0, e=1), "t_up must be positive and finite"),
    (theory.echo_speedup, dict(R=0.0, e=2), "R must be positive"),
    (theory.echo_speedup, dict(R=2.0, e=0), "e must be >= 1"),
    (theory.echo_speedup, dict(R=2.0, e=2, fresh_ratio=-1), "fresh_ratio must be positive"),
    (theory.time_to_accuracy, dict(eps=0.1, beta=1, rho=1, D=1, B=1, K=1), "either both t_up"),
    (theory.time_to_accuracy, dict(eps=0.1, beta=1, rho=1, D=1, B=1, K=1, t_up=1.0),
     "either both t_up"),
    (theory.time_to_accuracy, dict(eps=0.1, beta=1, rho=1, D=1, B=1, K=1, t_up=1.0, t_down=1.0,
                                   throughput=1.0), "throughput must not be combined"),
    (theory.time_to_accuracy, dict(eps=0.1, beta=1, rho=1, D=1, B=1, K=1, throughput=0.0),
     "throughput must be positive"),
    (theory.time_to_accuracy, dict(eps=0.0, beta=1, rho=1, D=1, B=1, K=1, throughput=1.0),
     "eps must be positive"),
    (theory.time_to_accuracy, dict(eps=0.1, beta=1, rho=1, D=1, B=1, K=0.5, t_up=1, t_down=1),
     "K must be >= 1"),
]


@pytest.mark.parametrize("fn, kwargs, message", INVALID)
def test_invalid_timing_input_raises_value_error_naming_argument(fn, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fn(**kwargs)


# ----------------------------------------------------- wall-clock-optimal echo


def _brute_force_optimal_K(c, R, K_max):
    """argmin over K = 1..K_max of time_to_accuracy (t_up = R, t_down = 1); ties: smaller K."""
    K = np.arange(1, K_max + 1)
    times = theory.time_to_accuracy(**c, K=K, t_up=R, t_down=1.0)
    return K[np.argmin(times)], times.min()


@given(const, st.integers(1, 4096), st.floats(1e-3, 1e2), st.floats(0.05, 40.0))
def test_time_optimal_echo_matches_brute_force(c, B, frac, R):
    eps = frac * (c["rho"] * c["D"] / np.sqrt(B) + c["beta"] * c["D"] ** 2)
    c = dict(c, eps=eps, B=B)
    K_star = theory.time_optimal_echo(**c, R=R)
    K_brute, best = _brute_force_optimal_K(c, R, K_max=int(np.ceil(R)) + 64)
    got = theory.time_to_accuracy(**c, K=K_star, t_up=R, t_down=1.0)
    assert got <= best * (1 + RTOL)
    # the same K, unless floor(R) and ceil(R) tie to rounding
    brute_time = theory.time_to_accuracy(**c, K=K_brute, t_up=R, t_down=1.0)
    assert K_star == K_brute or abs(got - brute_time) <= RTOL * best
    assert K_star in (max(1.0, np.floor(R)), max(1.0, np.ceil(R)))


@given(const, st.integers(1, 4096), st.floats(1e-3, 1e2), st.floats(1.0, 40.0))
def test_time_optimal_echo_real_K_is_R_and_beats_a_fine_grid(c, B, frac, R):
    eps = frac * (c["rho"] * c["D"] / np.sqrt(B) + c["beta"] * c["D"] ** 2)
    c = dict(c, eps=eps, B=B)
    assert theory.time_optimal_echo(**c, R=R, integer=False) == R
    grid = np.linspace(1.0, 2 * R + 8, 4001)
    times = theory.time_to_accuracy(**c, K=grid, t_up=R, t_down=1.0)
    at_R = theory.time_to_accuracy(**c, K=R, t_up=R, t_down=1.0)
    assert at_R <= times.min() * (1 + RTOL)


@given(const, st.integers(1, 4096), st.floats(1e-3, 1e2), st.integers(1, 64), st.integers(1, 64))
def test_K_times_T_eps_is_non_decreasing_and_T_eps_non_increasing(c, B, frac, K, dK):
    # the two monotonicities the optimality proof rests on (docs, wall-clock-optimal K)
    eps = frac * (c["rho"] * c["D"] / np.sqrt(B) + c["beta"] * c["D"] ** 2)
    T1 = theory.batches_to_accuracy(eps=eps, **c, B=B, K=K)
    T2 = theory.batches_to_accuracy(eps=eps, **c, B=B, K=K + dK)
    assert T2 <= T1 * (1 + RTOL)
    assert (K + dK) * T2 >= K * T1 * (1 - RTOL)


def test_time_optimal_echo_integer_R_and_slow_accelerator():
    c = dict(eps=0.01, beta=1.0, rho=1.0, D=1.0, B=64)
    for R in (1.0, 2.0, 7.0, 32.0):
        assert theory.time_optimal_echo(**c, R=R) == R
    # R < 1: the accelerator is the bottleneck; echoing only costs time
    assert theory.time_optimal_echo(**c, R=0.3) == 1.0
    assert theory.time_optimal_echo(**c, R=0.3, integer=False) == 1.0


def test_time_optimal_echo_rounding_depends_on_the_regime():
    # curvature-bound (large eps): extra steps help, round up; noise-bound: round down
    c = dict(beta=1.0, rho=1.0, D=1.0, B=64)
    K = theory.time_optimal_echo(eps=[[0.1], [0.001]], **c, R=[1.5, 2.5, 7.2])
    np.testing.assert_array_equal(K, [[2.0, 2.0, 7.0], [1.0, 2.0, 7.0]])


@pytest.mark.parametrize("kwargs, message", [
    (dict(R=0.0), "R must be positive"),
    (dict(R=np.nan), "R must be positive and finite"),
    (dict(R=4.0, eps=-1.0), "eps must be positive"),
    (dict(R=4.0, B=0), "B must be positive"),
    (dict(R=4.0, eps=-1.0, integer=False), "eps must be positive"),
])
def test_time_optimal_echo_rejects_bad_input(kwargs, message):
    args = {**dict(eps=0.01, beta=1.0, rho=1.0, D=1.0, B=64), **kwargs}
    with pytest.raises(ValueError, match=message):
        theory.time_optimal_echo(**args)


def test_rate_speedup_ceiling_is_choi_min_k_r_behind_a_deterministic_loader():
    from theory import echo_speedup, rate_speedup_ceiling

    for R in (0.5, 1.0, 3.0, 6.0):
        for K in (1, 2, 4, 8):
            rates = 1 / max(R, K), 1 / max(R, 1)
            assert float(rate_speedup_ceiling(K, *rates)) == pytest.approx(float(echo_speedup(R, K, fresh_ratio=K)))
    with pytest.raises(ValueError, match="rate_echo"):
        rate_speedup_ceiling(2, 0.0, 1.0)
