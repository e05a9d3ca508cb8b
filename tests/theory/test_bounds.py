"""Properties of the closed-form bounds in ``theory.bounds`` and the counts of ``theory.sample_complexity``.

Checks shape the bounds must have whatever the constants: positivity, monotonicity in
T, B and K, the K=1 and K=inf limits, that the tuned step sizes minimise the fixed-step
bounds, that ``batches_to_accuracy`` inverts the tuned bound, and that bad input fails
with a ValueError naming the argument.
"""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import theory

const = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
problems = st.fixed_dictionaries({"beta": const, "rho": const, "D": const})
batch = st.integers(1, 10_000)
horizon = st.integers(1, 10_000)
echo = st.integers(1, 256)
factor = st.floats(1.01, 10.0)
lr_frac = st.floats(1e-4, 1.0)

RTOL = 1e-12


def tuned_bounds(c, B, T, K):
    """Every tuned (lr-free) bound that should shrink with T, B and not grow with K."""
    return {
        "echoed_gd": theory.echoed_gd_bound(**c, B=B, T=T, K=K),
        "echoed_prox": theory.echoed_prox_bound(**c, B=B, T=T, K=K),
        "echoed_agd": theory.echoed_agd_bound(**c, B=B, T=T, K=K),
        "variable_echo": theory.variable_echo_bound(**c, B=B, K_t=np.full(T, K)),
    }


# ------------------------------------------------------------------- basic shape


@given(problems, batch, horizon, echo, lr_frac)
def test_every_bound_is_positive_and_finite(c, B, T, K, frac):
    lr = frac / c["beta"]
    lam, inner_lr = theory.echoed_prox_param(**c, B=B, T=T, K=K)
    values = list(tuned_bounds(c, B, T, K).values()) + [
        theory.minibatch_sgd_bound(**c, B=B, T=T),
        theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr),
        theory.echoed_agd_bound(**c, B=B, T=T, K=K, lr=lr),
        theory.variable_echo_bound(**c, B=B, K_t=np.full(T, K), lr=lr),
        theory.echoed_prox_bound(**c, B=B, T=T, K=K, lam=lam, inner_lr=inner_lr),
        theory.stability_gd(lr=lr, rho=c["rho"], K=K, B=B),
    ]
    for v in values:
        assert isinstance(v, float)
        assert np.isfinite(v) and v > 0


@given(problems, batch, horizon, echo, factor, lr_frac)
def test_bounds_decrease_in_T(c, B, T, K, f, frac):
    T2 = T * f
    small, large = tuned_bounds(c, B, T, K), tuned_bounds(c, B, int(np.ceil(T2)), K)
    # "<=": with extreme constants one term can fall below float rounding of the
    # other; strict decrease at moderate constants is checked in test_strictly_*
    for name in small:
        assert large[name] <= small[name], name
    lr = frac / c["beta"]
    assert theory.echoed_gd_bound(**c, B=B, T=T2, K=K, lr=lr) <= theory.echoed_gd_bound(
        **c, B=B, T=T, K=K, lr=lr
    )
    lam = 2 * c["rho"] / c["D"]
    assert theory.echoed_prox_bound(**c, B=B, T=T2, K=K, lam=lam) <= theory.echoed_prox_bound(
        **c, B=B, T=T, K=K, lam=lam
    )


@given(problems, batch, horizon, echo, factor, lr_frac)
def test_bounds_decrease_in_B(c, B, T, K, f, frac):
    B2 = B * f
    small, large = tuned_bounds(c, B, T, K), tuned_bounds(c, B2, T, K)
    for name in small:
        assert large[name] <= small[name], name
    lr = frac / c["beta"]
    for fn in (theory.echoed_gd_bound, theory.echoed_agd_bound):
        assert fn(**c, B=B2, T=T, K=K, lr=lr) <= fn(**c, B=B, T=T, K=K, lr=lr)


@pytest.mark.parametrize("K", [1, 3, 16])
def test_strictly_decreasing_in_T_and_B_at_moderate_constants(K):
    c = dict(beta=2.0, rho=0.5, D=3.0)
    for B, T in [(8, 10), (64, 100), (512, 7)]:
        base = tuned_bounds(c, B, T, K)
        more_T, more_B = tuned_bounds(c, B, T + 1, K), tuned_bounds(c, B + 1, T, K)
        for name in base:
            assert more_T[name] < base[name] and more_B[name] < base[name], name


@given(problems, batch, horizon, echo, st.integers(1, 64))
def test_tuned_bounds_non_increasing_in_K(c, B, T, K, dK):
    before, after = tuned_bounds(c, B, T, K), tuned_bounds(c, B, T, K + dK)
    for name in before:
        assert after[name] <= before[name] * (1 + RTOL), name


# ------------------------------------------------------------------------ limits


@given(problems, batch, horizon)
def test_echoed_gd_at_K1_is_minibatch_sgd(c, B, T):
    sgd = theory.minibatch_sgd_bound(**c, B=B, T=T)
    closed_form = c["beta"] * c["D"] ** 2 / (2 * T) + 2 * c["rho"] * c["D"] / np.sqrt(B * T)
    assert sgd == pytest.approx(closed_form, rel=RTOL)
    assert theory.echoed_gd_bound(**c, B=B, T=T, K=1) == pytest.approx(sgd, rel=RTOL)


# K = 1e18 makes the curvature term at most 2.5e-8 of the floor over the strategies above.
@given(problems, batch, horizon)
def test_prox_bound_tends_to_statistical_rate(c, B, T):
    floor = 2 * c["rho"] * c["D"] / np.sqrt(B * T)
    assert theory.echoed_prox_bound(**c, B=B, T=T, K=1e18) == pytest.approx(floor, rel=1e-5)
    lam, _ = theory.echoed_prox_param(**c, B=B, T=T, K=1)
    derived = theory.echoed_prox_bound(**c, B=B, T=T, K=1e18, lam=lam)
    assert derived == pytest.approx(floor, rel=1e-5)


@given(problems, batch, horizon, echo, st.floats(1e-3, 1e3), st.floats(1e-3, 1.0))
def test_prox_derived_bound_sits_between_floor_and_reported(c, B, T, K, lam, step_frac):
    floor = 2 * c["rho"] * c["D"] / np.sqrt(B * T)
    # any (lam, inner_lr): never below the statistical floor (AM-GM)
    inner_lr = step_frac / (c["beta"] + lam)
    assert theory.echoed_prox_bound(**c, B=B, T=T, K=K, lam=lam, inner_lr=inner_lr) >= floor * (
        1 - RTOL
    )
    # default parameters: derived <= 2 rho D/sqrt(BT) + beta D^2/(2KT) <= reported
    lam0, inner0 = theory.echoed_prox_param(**c, B=B, T=T, K=K)
    derived = theory.echoed_prox_bound(**c, B=B, T=T, K=K, lam=lam0, inner_lr=inner0)
    middle = floor + c["beta"] * c["D"] ** 2 / (2 * K * T)
    assert derived <= middle * (1 + RTOL)
    assert middle <= theory.echoed_prox_bound(**c, B=B, T=T, K=K) * (1 + RTOL)


@given(problems, batch, horizon, echo)
def test_prox_param_ignores_K(c, B, T, K):
    assert theory.echoed_prox_param(**c, B=B, T=T, K=K) == theory.echoed_prox_param(
        **c, B=B, T=T, K=1
    )


# ------------------------------------------------------------ tuned step sizes


def _check_lr_minimises(bound_of_lr, lr_star, lr_max):
    """lr_star beats a fine log grid around it (clipped to lr <= lr_max)."""
    grid = lr_star * np.geomspace(1e-2, 1e2, 2001)
    grid = grid[grid <= lr_max]
    values = bound_of_lr(grid)  # the bounds are vectorised over lr
    at_star = bound_of_lr(lr_star)
    assert at_star <= values.min() * (1 + 1e-9)
    best = grid[values.argmin()]
    step = 1e4 ** (1 / 2000)  # grid ratio
    assert best / lr_star == pytest.approx(1.0, rel=step - 1 + 1e-9)


@given(problems, batch, horizon, echo)
def test_echoed_gd_lr_minimises_fixed_lr_bound(c, B, T, K):
    lr_star = theory.echoed_gd_lr(**c, B=B, T=T, K=K)
    assert 0 < lr_star <= 1 / c["beta"]
    _check_lr_minimises(
        lambda lr: theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr), lr_star, 1 / c["beta"]
    )
    # the tuned bound upper-bounds the fixed-lr bound at the tuned lr
    fixed = theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr_star)
    assert fixed <= theory.echoed_gd_bound(**c, B=B, T=T, K=K) * (1 + RTOL)


@given(problems, batch, horizon, echo)
def test_echoed_agd_lr_minimises_fixed_lr_bound(c, B, T, K):
    lr_star = theory.echoed_agd_lr(**c, B=B, T=T, K=K)
    assert 0 < lr_star <= 1 / c["beta"]
    _check_lr_minimises(
        lambda lr: theory.echoed_agd_bound(**c, B=B, T=T, K=K, lr=lr), lr_star, 1 / c["beta"]
    )
    fixed = theory.echoed_agd_bound(**c, B=B, T=T, K=K, lr=lr_star)
    assert fixed <= theory.echoed_agd_bound(**c, B=B, T=T, K=K) * (1 + RTOL)


@given(problems, batch, st.lists(st.integers(0, 64), min_size=1, max_size=50))
def test_variable_echo_lr_minimises_fixed_lr_bound(c, B, K_t):
    K_t = np.array(K_t)
    if K_t.sum() == 0:
        K_t[0] = 1
    lr_star = theory.variable_echo_lr(**c, B=B, K_t=K_t)
    _check_lr_minimises(
        lambda lr: theory.variable_echo_bound(**c, B=B, K_t=K_t, lr=lr), lr_star, 1 / c["beta"]
    )
    fixed = theory.variable_echo_bound(**c, B=B, K_t=K_t, lr=lr_star)
    assert fixed <= theory.variable_echo_bound(**c, B=B, K_t=K_t) * (1 + RTOL)


# ------------------------------------------------------------------ variable K_t


@given(problems, batch, st.integers(1, 2000), echo, lr_frac)
def test_variable_echo_with_constant_K_is_echoed_gd(c, B, T, K, frac):
    K_t = np.full(T, K)
    assert theory.variable_echo_bound(**c, B=B, K_t=K_t) == pytest.approx(
        theory.echoed_gd_bound(**c, B=B, T=T, K=K), rel=1e-10
    )
    lr = frac / c["beta"]
    assert theory.variable_echo_bound(**c, B=B, K_t=K_t, lr=lr) == pytest.approx(
        theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr), rel=1e-10
    )
    assert theory.variable_echo_lr(**c, B=B, K_t=K_t) == pytest.approx(
        theory.echoed_gd_lr(**c, B=B, T=T, K=K), rel=1e-10
    )


def test_variable_echo_accepts_zero_and_non_integer_counts_from_one():
    # K_t(K_t+1) <= 2 K_t^2 holds for K_t = 0 and K_t >= 1: these are accepted
    c = dict(beta=1.0, rho=1.0, D=1.0, B=64)
    with_zero = theory.variable_echo_bound(**c, K_t=[0, 4, 4])
    assert with_zero == pytest.approx(theory.variable_echo_bound(**c, K_t=[4, 4]), rel=RTOL)
    assert theory.variable_echo_bound(**c, K_t=[1.0, 2.5]) > 0


def test_variable_echo_uneven_schedule_costs_noise():
    # same total steps S1, more uneven -> larger S2 -> larger noise term
    c = dict(beta=1.0, rho=1.0, D=1.0, B=64)
    even = theory.variable_echo_bound(**c, K_t=[4, 4, 4, 4])
    uneven = theory.variable_echo_bound(**c, K_t=[1, 7, 1, 7])
    assert uneven > even


# ----------------------------------------------------------- derived quantities


@given(problems, batch, echo, st.floats(1e-4, 1e2))
def test_batches_to_accuracy_inverts_tuned_bound(c, B, K, frac):
    eps = frac * (c["rho"] * c["D"] / np.sqrt(B) + c["beta"] * c["D"] ** 2)
    T_eps = theory.batches_to_accuracy(eps=eps, **c, B=B, K=K)
    assert theory.echoed_gd_bound(**c, B=B, T=T_eps, K=K) == pytest.approx(eps, rel=1e-10)


@given(problems, batch, echo, st.floats(1e-4, 1e2))
def test_batches_to_accuracy_within_factor_four_of_split_requirements(c, B, K, frac):
    eps = frac * (c["rho"] * c["D"] / np.sqrt(B) + c["beta"] * c["D"] ** 2)
    T_eps = theory.batches_to_accuracy(eps=eps, **c, B=B, K=K)
    need = max(c["beta"] * c["D"] ** 2 / (K * eps), 16 * c["rho"] ** 2 * c["D"] ** 2 / (B * eps**2))
    assert need / 4 * (1 - RTOL) <= T_eps <= need * (1 + RTOL)


@given(problems, batch, st.floats(1e-4, 1e2))
def test_saturation_echo_balances_the_two_requirements(c, B, eps):
    K_sat = theory.saturation_echo(eps=eps, beta=c["beta"], rho=c["rho"], B=B)
    curvature = c["beta"] * c["D"] ** 2 / (K_sat * eps)
    noise = 16 * c["rho"] ** 2 * c["D"] ** 2 / (B * eps**2)
    assert curvature == pytest.approx(noise, rel=1e-10)


def test_stability_is_the_noise_term_of_fixed_lr_gd():
    c = dict(beta=2.0, rho=3.0, D=0.5, B=32, T=10, K=5)
    lr = 0.2
    bias = c["D"] ** 2 / (2 * lr * c["K"] * c["T"])
    stab = theory.stability_gd(lr=lr, rho=c["rho"], K=c["K"], B=c["B"])
    assert theory.echoed_gd_bound(**c, lr=lr) == pytest.approx(bias + stab, rel=RTOL)


def test_agd_noise_term_constant_for_long_horizons():
    # (KT)^-2 * 2^(7/4) sqrt(Sigma/B) -> 2^(7/4)/sqrt(3) sqrt(1+1/K) / sqrt(BT)
    B, T = 16, 1e6
    for K in (1, 4, 64):
        noise = theory.echoed_agd_bound(beta=1e-300, rho=1.0, D=1.0, B=B, T=T, K=K)
        limit = 2**1.75 / np.sqrt(3) * np.sqrt(1 + 1 / K) / np.sqrt(B * T)
        assert noise == pytest.approx(limit, rel=1e-4)


def test_agd_beats_gd_when_curvature_dominates():
    c = dict(beta=1.0, rho=1e-3, D=1.0, B=64, T=100, K=8)
    assert theory.echoed_agd_bound(**c) < theory.echoed_gd_bound(**c)


# ------------------------------------------------------------------ broadcasting


def test_broadcasting_shapes_and_values():
    c = dict(beta=1.0, rho=2.0, D=0.5)
    B = np.array([[16.0], [64.0], [256.0]])
    T = np.array([10.0, 100.0, 1000.0, 1e4])
    for fn in (theory.echoed_gd_bound, theory.echoed_prox_bound, theory.echoed_agd_bound,
               theory.echoed_gd_lr, theory.echoed_agd_lr):
        out = fn(**c, B=B, T=T, K=4)
        assert isinstance(out, np.ndarray) and out.shape == (3, 4)
        assert out[1, 2] == pytest.approx(fn(**c, B=64, T=1000, K=4), rel=RTOL)
    out = theory.minibatch_sgd_bound(**c, B=B, T=T)
    assert out.shape == (3, 4)
    lam, inner_lr = theory.echoed_prox_param(**c, B=B, T=10, K=[1, 2, 4, 8])
    assert lam.shape == inner_lr.shape == (3, 4)
    K = np.array([1, 2, 8])
    assert theory.batches_to_accuracy(eps=[[0.1], [0.01]], **c, B=64, K=K).shape == (2, 3)
    assert theory.saturation_echo(eps=0.1, beta=1.0, rho=[1.0, 2.0], B=64).shape == (2,)
    assert theory.stability_gd(lr=[0.1, 0.2], rho=1.0, K=4, B=64).shape == (2,)


def test_variable_echo_broadcasts_over_leading_axes():
    K_t = np.array([[1, 2, 3, 4, 5], [4, 4, 4, 4, 4]])
    out = theory.variable_echo_bound(beta=[1.0, 2.0], rho=1.0, D=1.0, B=64, K_t=K_t)
    assert out.shape == (2,)
    assert out[1] == pytest.approx(
        theory.echoed_gd_bound(beta=2.0, rho=1.0, D=1.0, B=64, T=5, K=4), rel=RTOL
    )
    assert isinstance(theory.variable_echo_bound(beta=1.0, rho=1.0, D=1.0, B=64, K_t=[3]), float)
    assert theory.variable_echo_lr(beta=1.0, rho=1.0, D=1.0, B=[[16], [64]], K_t=K_t).shape == (2, 2)


def test_problem_constants_dict_splats():
    constants = {"beta": 4.0, "rho": 1.5, "D": 2.0}
    assert theory.echoed_gd_bound(**constants, B=64, T=500, K=4) > 0


def test_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError):
        theory.echoed_gd_bound(beta=1.0, rho=1.0, D=1.0, B=[1, 2], T=[1, 2, 3], K=1)


# -------------------------------------------------------------------- validation

GOOD = dict(beta=1.0, rho=1.0, D=1.0, B=64, T=100, K=4)


def _bad(**changes):
    return {**GOOD, **changes}


INVALID = [
    (theory.echoed_gd_bound, _bad(beta=-1.0), "beta must be positive"),
    (theory.echoed_gd_bound, _bad(rho=0.0), "rho must be positive"),
    (theory.echoed_gd_bound, _bad(D=float("nan")), "D must be positive and finite"),
    (theory.echoed_gd_bound, _bad(B=np.inf), "B must be positive and finite"),
    (theory.echoed_gd_bound, _bad(T=0), "T must be positive"),
    (theory.echoed_gd_bound, _bad(K=0.5), "K must be >= 1"),
    (theory.echoed_gd_bound, _bad(K=[1, 0]), "K must be >= 1"),
    (theory.echoed_gd_bound, _bad(beta="abc"), "beta must be a real number"),
    (theory.echoed_gd_bound, _bad(lr=1.5), r"lr must be in \(0, 1/beta\]"),
    (theory.echoed_gd_bound, _bad(lr=-0.1), "lr must be positive"),
    (theory.echoed_gd_lr, _bad(K=0), "K must be >= 1"),
    (theory.minibatch_sgd_bound, {k: GOOD[k] for k in "beta rho D B".split()} | {"T": -3},
     "T must be positive"),
    (theory.echoed_agd_bound, _bad(lr=2.0), r"lr must be in \(0, 1/beta\]"),
    (theory.echoed_agd_bound, _bad(K=0), "K must be >= 1"),
    (theory.echoed_agd_lr, _bad(rho=-1), "rho must be positive"),
    (theory.echoed_prox_bound, _bad(lam=0.0), "lam must be positive"),
    (theory.echoed_prox_bound, _bad(lam=1.0, inner_lr=0.6), r"inner_lr must be in \(0, 1/\(beta\+lam\)\]"),
    (theory.echoed_prox_param, _bad(T=np.nan), "T must be positive and finite"),
    (theory.stability_gd, dict(lr=0.0, rho=1.0, K=1, B=1), "lr must be positive"),
    (theory.stability_gd, dict(lr=0.1, rho=1.0, K=0, B=1), "K must be >= 1"),
    (theory.stability_gd, dict(lr=3.0, rho=1.0, K=1, B=1, beta=1.0), "2/beta"),  # its precondition, when checkable
    (theory.batches_to_accuracy, dict(eps=0.0, beta=1, rho=1, D=1, B=1, K=1), "eps must be positive"),
    (theory.batches_to_accuracy, dict(eps=-1, beta=1, rho=1, D=1, B=1, K=1), "eps must be positive"),
    (theory.saturation_echo, dict(eps=0.1, beta=1, rho=1, B=0), "B must be positive"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[1, -1]), "K_t must be >= 0"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[0, 0]), "K_t must have a positive sum"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[]), "K_t must be an array"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=3), "K_t must be an array"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[1, np.inf]), "K_t must be finite"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[4, 0.5]),
     r"K_t must be 0 or >= 1 .*got 0\.5"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=[[1, 1], [1e-9, 2]]),
     "K_t must be 0 or >= 1"),
    (theory.variable_echo_lr, dict(beta=1, rho=1, D=1, B=1, K_t=[0.99]), "K_t must be 0 or >= 1"),
    (theory.variable_echo_bound, dict(beta=[1, 2, 3], rho=1, D=1, B=1, K_t=np.ones((2, 5))),
     r"do not broadcast.*beta of shape \(3,\).*K_t of shape \(2,\)"),
    (theory.variable_echo_bound, dict(beta=1, rho=1, D=1, B=1, K_t=np.ones((2, 5)), lr=[0.1] * 3),
     r"do not broadcast.*K_t of shape \(2,\).*lr of shape \(3,\)"),
    (theory.variable_echo_lr, dict(beta=1, rho=1, D=1, B=[1, 2, 4], K_t=np.ones((2, 5))),
     r"do not broadcast.*B of shape \(3,\).*K_t of shape \(2,\)"),
    (theory.variable_echo_bound, dict(beta=2, rho=1, D=1, B=1, K_t=[1], lr=1.0), r"lr must be in \(0, 1/beta\]"),
    (theory.variable_echo_lr, dict(beta=0, rho=1, D=1, B=1, K_t=[1]), "beta must be positive"),
]


@pytest.mark.parametrize("fn, kwargs, message", INVALID)
def test_invalid_input_raises_value_error_naming_argument(fn, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fn(**kwargs)


def test_error_message_reports_the_value():
    with pytest.raises(ValueError, match=r"beta must be positive and finite, got -1\.0"):
        theory.echoed_gd_bound(**_bad(beta=-1.0))
    with pytest.raises(ValueError, match=r"got 1\.5 with 1/beta = 1\.0"):
        theory.echoed_gd_bound(**_bad(lr=1.5))


# ----------------------------------------------------------------------- imports


def test_import_pulls_in_no_plotting_and_no_echosim():
    code = (
        "import sys, theory\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'echosim')]\n"
        "assert not bad, bad\n"
        "assert sorted(theory.__all__) == sorted(set(theory.__all__))\n"
        "assert all(callable(getattr(theory, n)) for n in theory.__all__)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -------------------------------------------------------------- strongly convex

lam_frac = st.floats(1e-4, 1.0)


@given(problems, batch, horizon, echo, st.integers(1, 64), lam_frac)
def test_strongly_convex_bound_positive_and_non_increasing_in_K(c, B, T, K, dK, frac):
    lam = frac * c["beta"]
    before = theory.echoed_gd_strongly_convex_bound(**c, B=B, T=T, K=K, lam=lam)
    after = theory.echoed_gd_strongly_convex_bound(**c, B=B, T=T, K=K + dK, lam=lam)
    assert isinstance(before, float) and np.isfinite(before) and before > 0
    assert after <= before * (1 + RTOL)


@given(problems, batch, horizon, echo, lam_frac)
def test_strongly_convex_fixed_bound_at_the_tuned_lr_is_below_the_tuned_bound(c, B, T, K, frac):
    lam = frac * c["beta"]
    lr = theory.echoed_gd_strongly_convex_lr(**c, B=B, T=T, K=K, lam=lam)
    assert 0 < lr <= 1 / c["beta"]
    fixed = theory.echoed_gd_strongly_convex_bound(**c, B=B, T=T, K=K, lam=lam, lr=lr)
    assert fixed <= theory.echoed_gd_strongly_convex_bound(**c, B=B, T=T, K=K, lam=lam) * (1 + 1e-9)


@given(problems, batch, horizon, echo, lr_frac)
def test_strongly_convex_fixed_bound_tends_to_the_convex_one_as_lam_vanishes(c, B, T, K, frac):
    lr = frac / c["beta"]
    lam = 1e-13 * c["beta"]  # eta * lam * K * T <= 2.6e-7 over the strategies
    got = theory.echoed_gd_strongly_convex_bound(**c, B=B, T=T, K=K, lam=lam, lr=lr)
    assert got == pytest.approx(theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr), rel=1e-4)
    # and strong convexity never makes the fixed-step bound worse
    assert got <= theory.echoed_gd_bound(**c, B=B, T=T, K=K, lr=lr) * (1 + RTOL)


def test_strongly_convex_limits_and_regimes():
    c = dict(beta=1.0, rho=1.0, D=1.0, B=64, T=100, lam=0.1)
    # K -> infinity leaves the statistical term 2 rho^2 (1 + L) / (lam B T)
    L = np.log1p(0.1**2 * 64 * 100 / 4)
    stat = 2 * (1 + L) / (0.1 * 64 * 100)
    assert theory.echoed_gd_strongly_convex_bound(**c, K=1e6) == pytest.approx(stat, rel=1e-12)
    # curvature-dominated (tiny rho): echoing divides the exponent's time by K
    tiny = dict(c, rho=1e-9, T=10)
    ratio = (theory.echoed_gd_strongly_convex_bound(**tiny, K=1)
             / theory.echoed_gd_strongly_convex_bound(**tiny, K=2))
    assert ratio == pytest.approx(np.expm1(2.0) / np.expm1(1.0), rel=1e-6)
    # lr * lam = 1 (lam = beta, lr = 1/beta): one step reaches the batch minimiser, q = 0
    assert theory.echoed_gd_strongly_convex_bound(**dict(c, lam=1.0), K=4, lr=1.0) == pytest.approx(
        2 / 64
    )
    # the tuned step falls like 1/K once below 1/beta
    lrs = [theory.echoed_gd_strongly_convex_lr(**c, K=K) for K in (4, 8)]
    assert lrs[0] == pytest.approx(2 * lrs[1], rel=RTOL)


def test_strongly_convex_broadcasts_and_validates():
    out = theory.echoed_gd_strongly_convex_bound(beta=1.0, rho=1.0, D=1.0, B=[[16], [64]], T=10,
                                                 K=[1, 2, 4], lam=0.1)
    assert out.shape == (2, 3)
    assert theory.echoed_gd_strongly_convex_lr(beta=1.0, rho=1.0, D=1.0, B=64, T=10, K=1,
                                               lam=[0.1, 0.2]).shape == (2,)
    good = dict(beta=1.0, rho=1.0, D=1.0, B=64, T=10, K=2, lam=0.1)
    for fn, bad, message in [
        (theory.echoed_gd_strongly_convex_bound, dict(lam=0.0), "lam must be positive"),
        (theory.echoed_gd_strongly_convex_bound, dict(lam=2.0), r"lam must be in \(0, beta\].*got 2\.0"),
        (theory.echoed_gd_strongly_convex_bound, dict(lr=1.5), r"lr must be in \(0, 1/beta\]"),
        (theory.echoed_gd_strongly_convex_bound, dict(K=0.5), "K must be >= 1"),
        (theory.echoed_gd_strongly_convex_lr, dict(lam=[0.5, 3.0]), r"lam must be in \(0, beta\]"),
        (theory.echoed_gd_strongly_convex_lr, dict(rho=-1.0), "rho must be positive"),
    ]:
        with pytest.raises(ValueError, match=message):
            fn(**{**good, **bad})


@pytest.mark.parametrize("call, names", [
    (lambda: theory.echoed_gd_bound(beta=1, rho=1, D=1, B=np.ones(2), T=np.ones(3), K=1), ["B of shape (2,)", "T of shape (3,)"]),
    (lambda: theory.variable_echo_bound(1, 1, 1, np.ones(3), np.ones((2, 3))), ["B of shape (3,)", "K_t of shape (2,)"]),
    (lambda: theory.variable_echo_bound(1, 1, 1, 4, np.ones((2, 3)), lr=np.full(3, 0.1)), ["K_t", "lr of shape (3,)"]),
    (lambda: theory.echo_speedup([1, 2], [1, 2, 3]), ["R of shape (2,)", "e of shape (3,)"]),
])
def test_a_broadcasting_mismatch_names_the_arguments_and_their_shapes(call, names):
    with pytest.raises(ValueError) as err:
        call()
    assert "do not broadcast" in str(err.value) and all(n in str(err.value) for n in names)


def test_a_2d_K_t_holds_one_series_per_row():
    rows = theory.variable_echo_bound(1.0, 1.0, 1.0, 64, np.array([[4] * 100, [1, 7] * 50]))
    np.testing.assert_allclose(rows, [theory.variable_echo_bound(1.0, 1.0, 1.0, 64, [4] * 100),
                                      theory.variable_echo_bound(1.0, 1.0, 1.0, 64, [1, 7] * 50)], rtol=1e-15)
