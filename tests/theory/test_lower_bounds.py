"""The minimax lower bound, the speedup ceilings, and a simulation on the hard instance.

The lower bound's proof (docs/background/bounds.md, "Minimax lower bound") uses a
one-dimensional two-point Huber construction; these tests check each step of it
numerically, check it against every upper bound, and run tuned echoed GD on the
construction itself: the best tuned run does not beat the bound.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import binom

import theory

const = st.floats(1e-3, 1e3, allow_nan=False, allow_infinity=False)
problems = st.fixed_dictionaries({"beta": const, "rho": const, "D": const})
RTOL = 1e-12


def constant(beta, rho, D):
    rho_eff = min(rho, beta * D / 2)
    return rho_eff * (D - rho_eff / beta) / 5


# -------------------------------------------------------------- closed form


@given(problems, st.integers(1, 10_000), st.integers(1, 10_000))
def test_lower_bound_closed_form_and_no_K(c, B, T):
    got = theory.minimax_lower_bound(**c, B=B, T=T)
    assert isinstance(got, float) and got > 0
    assert got == pytest.approx(constant(**c) / np.sqrt(B * T), rel=RTOL)
    # only n = BT matters: trading batch size for batches changes nothing
    assert theory.minimax_lower_bound(**c, B=B * T, T=1) == pytest.approx(got, rel=1e-10)


@given(problems, st.integers(1, 10_000), st.integers(1, 10_000), st.integers(1, 256))
def test_lower_bound_sits_below_every_upper_bound(c, B, T, K):
    low = theory.minimax_lower_bound(**c, B=B, T=T)
    for upper in (theory.echoed_gd_bound, theory.echoed_prox_bound, theory.echoed_agd_bound):
        assert low <= upper(**c, B=B, T=T, K=K)
    # and below Theorem 7's statistical term by at least the constant gap 2 / (1/5)
    assert low <= 2 * c["rho"] * c["D"] / np.sqrt(B * T) / 10 * (1 + RTOL)


def test_lower_bound_constant_regimes():
    # rho <= beta D / 2: rho D (1 - rho/(beta D)) / 5, which tends to rho D / 5 as beta grows
    assert theory.minimax_lower_bound(beta=1.0, rho=1.0, D=4.0, B=1, T=1) == pytest.approx(0.6)
    assert theory.minimax_lower_bound(beta=1e12, rho=1.0, D=4.0, B=1, T=1) == pytest.approx(0.8)
    # rho > beta D / 2: the smooth class caps the usable Lipschitz constant at beta D / 2
    assert theory.minimax_lower_bound(beta=0.25, rho=1.0, D=4.0, B=1, T=1) == pytest.approx(
        theory.minimax_lower_bound(beta=0.25, rho=0.5, D=4.0, B=1, T=1)
    )


def test_lower_bound_broadcasts_and_validates():
    out = theory.minimax_lower_bound(beta=1.0, rho=[[0.5], [1.0]], D=4.0, B=8, T=[10, 100, 1000])
    assert out.shape == (2, 3)
    assert out[1, 0] == pytest.approx(theory.minimax_lower_bound(beta=1, rho=1, D=4, B=8, T=10))
    for bad, message in [(dict(beta=0.0), "beta must be positive"), (dict(T=-1), "T must be positive"),
                         (dict(D=np.inf), "D must be positive and finite"), (dict(B="x"), "B must be a real")]:
        with pytest.raises(ValueError, match=message):
            theory.minimax_lower_bound(**{**dict(beta=1.0, rho=1.0, D=1.0, B=8, T=10), **bad})


# ----------------------------------------------------- the proof, step by step


def huber(u, h):
    a = np.abs(u)
    return np.where(a <= h, u * u / (2 * h), a - h / 2)


def construction(beta, rho, D, n):
    """The two-point instance of the proof: rho_eff, h, p and the risk F_+ (F_-(w) = F_+(-w))."""
    rho_eff = min(rho, beta * D / 2)
    h = rho_eff / beta
    p = (1 + 2 / (5 * np.sqrt(n))) / 2

    def risk(w):
        return rho_eff * (p * huber(w - D, h) + (1 - p) * huber(w + D, h))

    return rho_eff, h, p, risk


@pytest.mark.parametrize("beta, rho, D", [(1.0, 1.0, 4.0), (0.25, 1.0, 4.0), (10.0, 0.3, 1.0)])
@pytest.mark.parametrize("n", [1, 7, 100, 10_000])
def test_each_step_of_the_two_point_proof(beta, rho, D, n):
    rho_eff, h, p, F_plus = construction(beta, rho, D, n)
    delta = 2 * p - 1
    w = np.linspace(-3 * D, 3 * D, 200_001)
    # the loss class: slopes of rho_eff * huber(., h) are within rho_eff <= rho and
    # change at rate rho_eff / h = beta
    assert rho_eff <= rho and rho_eff / h == pytest.approx(beta)
    # the minimiser of F_+ is D - h(1-p)/p, within D of w0 = 0
    w_plus = D - h * (1 - p) / p
    assert 0 < w_plus <= D
    assert F_plus(w_plus) <= F_plus(w).min() + 1e-12
    # separation: (F_+ - F_+*) + (F_- - F_-*) >= 2 rho_eff delta (D - h/(2p)) everywhere
    total = F_plus(w) + F_plus(-w) - 2 * F_plus(w_plus)
    separation = 2 * rho_eff * delta * (D - h / (2 * p))
    assert total.min() == pytest.approx(separation, rel=1e-6)
    # Le Cam with the exact total variation of the two binomial counts
    k = np.arange(n + 1)
    tv = 0.5 * np.abs(binom.pmf(k, n, p) - binom.pmf(k, n, 1 - p)).sum()
    assert tv <= np.sqrt(n * delta**2 / (1 - delta**2)) + 1e-12  # Pinsker step
    le_cam = separation / 2 * (1 - tv)
    assert theory.minimax_lower_bound(beta=beta, rho=rho, D=D, B=n, T=1) <= le_cam


# ------------------------------------------------------------------ ceilings


@given(st.floats(1e-3, 1e3), st.floats(1e-3, 1e3), st.integers(1, 100_000), st.floats(1e-4, 1e2))
def test_echo_speedup_ceiling_is_the_K_to_infinity_limit(beta, rho, B, eps):
    ceiling = theory.echo_speedup_ceiling(eps=eps, beta=beta, rho=rho, B=B)
    T1 = theory.batches_to_accuracy(eps=eps, beta=beta, rho=rho, D=1.0, B=B, K=1)
    T_inf = (2 * rho / np.sqrt(B) / eps) ** 2
    assert ceiling == pytest.approx(T1 / T_inf, rel=1e-9)
    T_huge = theory.batches_to_accuracy(eps=eps, beta=beta, rho=rho, D=1.0, B=B, K=1e15)
    assert ceiling >= T1 / T_huge * (1 - 1e-9)
    assert ceiling >= 1


@given(st.floats(1e-2, 1e2), st.floats(1e-2, 1e2), st.integers(1, 10_000), st.floats(1e-3, 10.0),
       st.floats(0.1, 40.0))
def test_echo_speedup_ceiling_with_R_is_the_best_predicted_speedup(beta, rho, B, eps, R):
    c = dict(eps=eps, beta=beta, rho=rho, D=1.0, B=B)
    got = theory.echo_speedup_ceiling(eps=eps, beta=beta, rho=rho, B=B, R=R)
    K = np.arange(1, int(np.ceil(R)) + 64)
    times = theory.time_to_accuracy(**c, K=K, t_up=R, t_down=1.0)
    baseline = theory.time_to_accuracy(**c, K=1, t_up=R, t_down=1.0)
    assert got == pytest.approx(baseline / times.min(), rel=1e-9)
    assert got <= max(1.0, R) * (1 + RTOL)
    assert got <= theory.echo_speedup_ceiling(eps=eps, beta=beta, rho=rho, B=B) * (1 + RTOL)


@given(problems, st.integers(1, 100_000), st.floats(1e-4, 1e2))
def test_minimax_ceiling_is_above_the_bound_model_ceiling_and_100(c, B, frac):
    eps = frac * c["rho"] * c["D"]
    minimax = theory.minimax_speedup_ceiling(eps=eps, **c, B=B)
    # T_LB <= lim_K T_eps(K): the lower bound is below every upper bound
    assert minimax >= theory.echo_speedup_ceiling(eps=eps, beta=c["beta"], rho=c["rho"], B=B)
    assert minimax >= 100 * (1 - 1e-9)  # (2 rho D / c)^2 with c <= rho D / 5
    T_lb = constant(**c) ** 2 / (B * eps**2)
    assert theory.minimax_lower_bound(**c, B=B, T=T_lb) == pytest.approx(eps, rel=1e-9)


def test_ceilings_validate():
    with pytest.raises(ValueError, match="eps must be positive"):
        theory.echo_speedup_ceiling(eps=0, beta=1, rho=1, B=8)
    with pytest.raises(ValueError, match="R must be positive"):
        theory.echo_speedup_ceiling(eps=0.1, beta=1, rho=1, B=8, R=-2)
    with pytest.raises(ValueError, match="D must be positive"):
        theory.minimax_speedup_ceiling(eps=0.1, beta=1, rho=1, D=0, B=8)
    assert theory.echo_speedup_ceiling(eps=[0.1, 0.01], beta=1, rho=1, B=8, R=[[2.0], [4.0]]).shape == (2, 2)
    assert theory.minimax_speedup_ceiling(eps=[0.1, 0.01], beta=1, rho=1, D=4, B=8).shape == (2,)


# ------------------------------------------------ simulation on the hard instance

LRS = np.geomspace(1e-3, 1e2, 41)  # the risk is flat beyond ~2/beta: the optimum is interior
SEEDS = 1000


def echoed_gd_on_construction(beta, rho, D, B, T, K, seed):
    """Echoed GD (full batch gradient, K steps per batch) on instance '+' for every lr in LRS.

    The instance '-' is the mirror image and GD from 0 is equivariant under w -> -w,
    so its risks are the same: the worst case over the pair is instance '+'.
    Returns the excess risk of the last and of the uniformly averaged iterate,
    shape (len(LRS), SEEDS) each.
    """
    rho_eff, h, p, F_plus = construction(beta, rho, D, B * T)
    rng = np.random.default_rng(seed)
    frac_plus = rng.binomial(B, p, size=(T, SEEDS)) / B  # a batch is its count of z = +1
    w = np.zeros((len(LRS), SEEDS))
    total = np.zeros_like(w)
    lr = LRS[:, None]
    for t in range(T):
        m = frac_plus[t]
        for _ in range(K):
            g = rho_eff * (m * np.clip((w - D) / h, -1, 1) + (1 - m) * np.clip((w + D) / h, -1, 1))
            w = w - lr * g
            total += w
    F_star = F_plus(D - h * (1 - p) / p)
    return F_plus(w) - F_star, F_plus(total / (T * K)) - F_star, F_plus(0.0) - F_star


@pytest.mark.parametrize("K", [1, 4, 16])
def test_best_tuned_echoed_gd_does_not_beat_the_lower_bound(K):
    c = dict(beta=1.0, rho=1.0, D=4.0, B=8, T=50)
    low = theory.minimax_lower_bound(**c)
    last, avg, start = echoed_gd_on_construction(**c, K=K, seed=K)
    best = []
    for risks in (last, avg):
        mean = risks.mean(axis=1)
        se = risks.std(axis=1, ddof=1) / np.sqrt(SEEDS)
        i = mean.argmin()
        assert 0 < i < len(LRS) - 1, "the tuned lr must be interior to its grid"
        best.append((mean[i], se[i]))
    mean, se = min(best)
    assert mean - 3 * se >= low, (mean, se, low)
    # the simulation learns something (below the risk at w0) and the bound is below it too
    assert low < mean < start
