"""Exact logistic population risk: moments vs scipy.quad, risk vs 2-D integration and Monte Carlo.

The references here never use the lead's reduction: M and N are integrated from their
definitions, F from the y-averaged loss over the joint law of (x . w, x . w*).
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate
from scipy.special import expit, gammaln

from echosim.training.logistic_risk import (
    g_softplus,
    quadrature_rule,
    softplus_remainder,
    softplus_table,
    tau_sums,
    gaussian_risk,
    sigmoid_moment,
    softplus_moment,
    sphere_risk,
)

LOG2 = math.log(2.0)
DESIGNS = [("gaussian", None), ("sphere", 2), ("sphere", 3), ("sphere", 5), ("sphere", 50)]
S_GRID = np.r_[0.0, np.logspace(-6, 3, 19), 4.84, 46.5, 60.0, 93.0]  # + regime seams
QUAD = dict(epsabs=1e-14, epsrel=1e-13, limit=400)


def softplus(t):
    return np.logaddexp(0.0, t)


# ---- references from the definitions (scipy.quad) ------------------------------------


def _breaks(s, z_end):
    """Breakpoints where the integrand changes on the 1/s scale."""
    if s == 0:
        return []
    return [k / s for k in (0.5, 2.0, 8.0, 20.0, 45.0) if k / s < 0.9 * z_end]


def _quad_even(f_even, s, design, dim):
    """E[f(s Z)] = int_0 f_even(s z) p(z) dz with f_even(t) = f(t) + f(-t), Z symmetric."""
    if design == "gaussian":
        pdf = lambda z: f_even(s * z) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
        return integrate.quad(pdf, 0.0, 12.0, points=_breaks(s, 12.0) or None, **QUAD)[0]
    alpha = 0.5 * (dim - 3)
    # the (1 - z)^alpha endpoint singularity (d = 2, 4) goes to QAWS on the last piece
    norm = 2 * integrate.quad(lambda z: (1 + z) ** alpha, 0, 1, weight="alg", wvar=(0, alpha), **QUAD)[0]
    edges = [0.0, *_breaks(s, 1.0)]
    total = integrate.quad(lambda z: f_even(s * z) * (1 + z) ** alpha, edges[-1], 1.0,
                           weight="alg", wvar=(0, alpha), **QUAD)[0]
    for lo, hi in zip(edges[:-1], edges[1:]):
        total += integrate.quad(lambda z: f_even(s * z) * (1 - z * z) ** alpha, lo, hi, **QUAD)[0]
    return total / norm


def quad_M(s, design, dim):
    return _quad_even(lambda t: softplus(t) + softplus(-t), s, design, dim)


def quad_N(s, design, dim):
    return _quad_even(lambda t: t * math.tanh(0.5 * t), s, design, dim)


def mean_pos(design, dim):
    """E[Z+]: 1/sqrt(2 pi), or Gamma(d/2) / (2 sqrt(pi) Gamma((d+1)/2)) on the sphere."""
    if design == "gaussian":
        return 1 / math.sqrt(2 * math.pi)
    return math.exp(gammaln(dim / 2) - gammaln((dim + 1) / 2)) / (2 * math.sqrt(math.pi))


def moment2(design, dim):
    return 1.0 if design == "gaussian" else 1.0 / dim


def moment4(design, dim):
    return 3.0 if design == "gaussian" else 3.0 / (dim * (dim + 2))


def expected_loss(u, v):
    """Loss averaged over y | x, from its definition (no softplus(-u) = softplus(u) - u)."""
    return expit(v) * softplus(-u) + expit(-v) * softplus(u)


# ---- M and N --------------------------------------------------------------------------


@pytest.mark.parametrize("design,dim", DESIGNS)
def test_moments_match_quad(design, dim):
    ref_m = [quad_M(s, design, dim) for s in S_GRID]
    ref_n = [quad_N(s, design, dim) for s in S_GRID]
    np.testing.assert_allclose(softplus_moment(S_GRID, design, dim), ref_m, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(sigmoid_moment(S_GRID, design, dim), ref_n, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("design,dim", DESIGNS + [("sphere", 4), ("sphere", 3001)])
def test_small_s_series(design, dim):
    """log 2 + s^2 E Z^2 / 8 - s^4 E Z^4 / 192 and s^2 E Z^2 / 4 - s^4 E Z^4 / 48 (N relative)."""
    s = np.array([1e-6, 1e-4, 1e-3])
    m2, m4 = moment2(design, dim), moment4(design, dim)
    np.testing.assert_allclose(softplus_moment(s, design, dim), LOG2 + s**2 * m2 / 8 - s**4 * m4 / 192,
                               rtol=1e-14)
    np.testing.assert_allclose(sigmoid_moment(s, design, dim), s**2 * m2 / 4 - s**4 * m4 / 48, rtol=1e-10)
    assert softplus_moment(0.0, design, dim) == LOG2
    assert sigmoid_moment(0.0, design, dim) == 0.0


@pytest.mark.parametrize("design,dim", DESIGNS + [("sphere", 3001)])
def test_large_s_asymptotics(design, dim):
    """M - s E Z+ ~ s E Z+ - N ~ p(0) pi^2 / (6 s).

    Both remainders integrate to pi^2/12 in t = s z: int_0^inf log1p(e^-t) = int_0^inf t sigma(-t).
    """
    s = 1e3 * (1.0 if design == "gaussian" else math.sqrt(dim))  # large against Z's spread
    p0 = 1 / math.sqrt(2 * math.pi) if design == "gaussian" else 2 * mean_pos(design, dim) * (dim - 1) / 2
    lead = s * mean_pos(design, dim)
    rem = p0 * math.pi**2 / (6 * s)
    assert softplus_moment(s, design, dim) - lead == pytest.approx(rem, rel=1e-4)
    assert lead - sigmoid_moment(s, design, dim) == pytest.approx(rem, rel=1e-4)
    huge = softplus_moment(1e300, design, dim), sigmoid_moment(1e300, design, dim)
    np.testing.assert_allclose(huge, 1e300 * mean_pos(design, dim), rtol=1e-11)  # gammaln ref: ~1e-13


@pytest.mark.parametrize("design,dim", DESIGNS)
def test_moments_increasing_and_continuous_across_regimes(design, dim):
    s = np.logspace(-3, 4, 400)
    assert np.all(np.diff(softplus_moment(s, design, dim)) > 0)
    assert np.all(np.diff(sigmoid_moment(s, design, dim)) > 0)
    rule = quadrature_rule(design, dim)
    for seam in {rule.s_dense, rule.s_fixed}:
        delta = 1e-10 * seam
        for f in (softplus_moment, sigmoid_moment):
            jump = f(seam + delta, design, dim) - f(seam - delta, design, dim)
            assert 0 < jump < 2 * delta + 1e-13, (f.__name__, seam, jump)  # slopes < 1


def test_chunked_evaluation_matches_elementwise():
    s = np.linspace(0.0, 120.0, 9001)  # > one block, all three regimes
    for design, dim in [("gaussian", None), ("sphere", 3)]:
        m = softplus_moment(s, design, dim)
        picks = [0, 1, 4095, 4096, 4500, 9000]
        single = [softplus_moment(s[i], design, dim) for i in picks]
        np.testing.assert_allclose(m[picks], single, rtol=1e-14)  # only BLAS summation order differs



@pytest.mark.parametrize("design,dim", DESIGNS + [("sphere", 4), ("sphere", 100_000)])
def test_table_matches_the_rule_it_samples(design, dim):
    """R_M from the table (and its series near 0) against the composite rule at each s <= s_dense."""
    rule = quadrature_rule(design, dim)
    s = np.r_[np.linspace(0.0, rule.s_dense, 6001), np.logspace(-8, 0, 200) * rule.s_dense / 60]
    total, length = tau_sums(s, rule, g_softplus, 0)
    np.testing.assert_allclose(softplus_remainder(s, rule), total * length, rtol=2e-15)  # measured <= 1.0e-15
    t = softplus_table(design, dim)
    ratio = 1.0 + t.delta / t.mid[:, None]
    assert np.all((ratio >= 0.5) & (ratio <= 2.0))  # so the differences from mid are exact (Sterbenz)


def test_table_kernel_is_exact_on_its_points_and_for_polynomials():
    from echosim.training.risk_kernel import softplus_remainder

    t = softplus_table("sphere", 5)
    poly = np.polynomial.Polynomial([1.0, 0.3, -0.02, 0.001])  # increasing, >= 1; degree < 14 points
    pieces = np.arange(t.mid.size)[:, None] + 0.5 * (t.x + 1.0)  # the points, with width 1
    values = poly(pieces)
    mid = values[:, 7].copy()
    s = np.r_[np.random.default_rng(0).uniform(0.0, t.mid.size, 500), pieces[0, t.x <= -0.5]]  # x + 1 exact
    out = np.empty(s.size)
    softplus_remainder(s, 0.0, 0.0, 0.0, 1.0, t.x, t.lam, mid, values - mid[:, None], out)
    np.testing.assert_allclose(out, poly(s), rtol=1e-14)
    np.testing.assert_array_equal(out[500:], values[0, t.x <= -0.5])


# ---- F against direct 2-D integration -------------------------------------------------

GAUSSIAN_CASES = [  # (w, w*, Sigma factor A with Sigma = A A^T)
    ([0.3, -0.2, 0.5], [1.0, 0.5, -0.8], [[1.0, 0, 0], [0.3, 0.8, 0], [-0.2, 0.1, 1.2]]),
    ([1.5, 0.4, -1.0], [1.0, 0.5, -0.8], np.eye(3)),
    ([-0.7, 0.1, 0.0], [2.0, -1.0, 0.5], [[0.5, 0, 0], [0.2, 1.5, 0], [0.0, -0.4, 0.9]]),
    ([1.0, 0.5, -0.8], [1.0, 0.5, -0.8], np.eye(3)),  # w = w*
]


def _gram(w, wstar, sigma):
    return w @ sigma @ w, w @ sigma @ wstar, wstar @ sigma @ wstar


@pytest.mark.parametrize("w,wstar,factor", GAUSSIAN_CASES)
def test_gaussian_risk_matches_dblquad(w, wstar, factor):
    w, wstar, factor = np.array(w), np.array(wstar), np.array(factor, dtype=float)
    a, c, b2 = _gram(w, wstar, factor @ factor.T)
    s_v, slope = math.sqrt(b2), c / math.sqrt(b2)  # (v, u) = Cholesky of [[b2, c], [c, a]]
    resid = math.sqrt(max(a - c * c / b2, 0.0))

    def integrand(xi2, xi1):
        v, u = s_v * xi1, slope * xi1 + resid * xi2
        return expected_loss(u, v) * math.exp(-0.5 * (xi1 * xi1 + xi2 * xi2)) / (2 * math.pi)

    ref = integrate.dblquad(integrand, -11, 11, -11, 11, epsabs=1e-13, epsrel=1e-12)[0]
    assert gaussian_risk(a, c, b2) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("dim", [2, 3, 5])
@pytest.mark.parametrize("w_coef,radius", [((0.4, -0.9), 1.0), ((1.2, 0.3), 2.5), ((-0.5, 0.0), 1.7)])
def test_sphere_risk_matches_angular_integral(dim, w_coef, radius):
    """x = r (cos t1, sin t1 cos t2, ...) with density ~ sin^(d-2) t1 sin^(d-3) t2."""
    rng = np.random.default_rng(dim)
    wstar = rng.normal(size=dim)
    e1 = wstar / np.linalg.norm(wstar)
    e2 = rng.normal(size=dim)
    e2 -= (e2 @ e1) * e1
    e2 /= np.linalg.norm(e2)
    w = w_coef[0] * e1 + w_coef[1] * e2
    nws = np.linalg.norm(wstar)

    def loss(x1, x2):
        return expected_loss(radius * (w_coef[0] * x1 + w_coef[1] * x2), radius * nws * x1)

    if dim == 2:
        circle = integrate.quad(lambda t: loss(math.cos(t), math.sin(t)), 0, 2 * math.pi, **QUAD)[0]
        ref = circle / (2 * math.pi)
    else:
        k1, k2 = dim - 2, dim - 3
        norm = (integrate.quad(lambda t: math.sin(t) ** k1, 0, math.pi)[0]
                * integrate.quad(lambda t: math.sin(t) ** k2, 0, math.pi)[0])
        def integrand(t2, t1):
            x1, x2 = math.cos(t1), math.sin(t1) * math.cos(t2)
            return loss(x1, x2) * math.sin(t1) ** k1 * math.sin(t2) ** k2

        ref = integrate.dblquad(integrand, 0, math.pi, 0, math.pi, epsabs=1e-13, epsrel=1e-12)[0] / norm
    got = sphere_risk(np.linalg.norm(w), w @ wstar, nws, radius, dim)
    assert got == pytest.approx(ref, rel=1e-8)


# ---- F against Monte Carlo ------------------------------------------------------------

N_MC, CHUNK_MC, Z_MC = 2_000_000, 250_000, 5.0


def _mc_mean_se(draw, w, wstar, rng):
    """Mean and standard error of softplus(u) - sigma(v) u over N_MC draws of x (chunked)."""
    total = total_sq = 0.0
    for _ in range(N_MC // CHUNK_MC):
        x = draw(rng, CHUNK_MC)
        u, v = x @ w, x @ wstar
        loss = softplus(u) - expit(v) * u
        total += loss.sum()
        total_sq += (loss * loss).sum()
    mean = total / N_MC
    return mean, math.sqrt((total_sq / N_MC - mean**2) / N_MC)


@pytest.mark.parametrize("which", ["w*", "other"])
def test_gaussian_risk_matches_monte_carlo(which):
    rng = np.random.default_rng(20240611)
    factor = np.array([[1.0, 0, 0, 0], [0.4, 0.9, 0, 0], [-0.3, 0.2, 1.1, 0], [0.1, -0.5, 0.3, 0.7]])
    wstar = np.array([1.2, -0.6, 0.8, 0.3])
    w = wstar if which == "w*" else np.array([0.2, 0.9, -0.4, 1.0])
    mean, se = _mc_mean_se(lambda g, n: g.standard_normal((n, 4)) @ factor.T, w, wstar, rng)
    exact = gaussian_risk(*_gram(w, wstar, factor @ factor.T))
    assert abs(mean - exact) <= Z_MC * se


@pytest.mark.parametrize("which", ["w*", "other"])
def test_sphere_risk_matches_monte_carlo(which):
    rng = np.random.default_rng(7)
    dim, radius = 5, 1.5
    wstar = np.array([0.9, -1.1, 0.4, 0.0, 0.6])
    w = wstar if which == "w*" else np.array([-0.3, 0.5, 1.2, -0.8, 0.1])

    def draw(g, n):
        x = g.standard_normal((n, dim))
        return radius * x / np.linalg.norm(x, axis=1, keepdims=True)

    mean, se = _mc_mean_se(draw, w, wstar, rng)
    exact = sphere_risk(np.linalg.norm(w), w @ wstar, np.linalg.norm(wstar), radius, dim)
    assert abs(mean - exact) <= Z_MC * se


# ---- properties ---------------------------------------------------------------------

# on a 1e-6 grid: products like w*' Sigma w* must not underflow (b2 = 0 with c != 0 is rejected)
coords = st.floats(-3.0, 3.0, allow_nan=False).map(lambda x: round(x, 6))
vec3 = st.lists(coords, min_size=3, max_size=3).map(np.array)


@given(w=vec3, wstar=vec3, scale=st.floats(0.05, 20.0))
def test_wstar_minimises_gaussian_risk(w, wstar, scale):
    sigma = scale * np.array([[1.0, 0.3, 0.0], [0.3, 2.0, -0.5], [0.0, -0.5, 0.7]])
    a, c, b2 = _gram(w, wstar, sigma)
    assert gaussian_risk(b2, b2, b2) <= gaussian_risk(a, c, b2) + 1e-12


@given(w=vec3, wstar=vec3, radius=st.floats(0.05, 30.0), dim=st.integers(3, 200))
def test_wstar_minimises_sphere_risk(w, wstar, radius, dim):
    nws = np.linalg.norm(wstar)
    best = sphere_risk(nws, nws**2, nws, radius, dim)
    assert best <= sphere_risk(np.linalg.norm(w), w @ wstar, nws, radius, dim) + 1e-12


@given(w=vec3, wstar=vec3)
def test_flipping_w_changes_risk_by_two_kappa_n(w, wstar):
    """F(w) - F(-w) = -E[u tanh(v/2)] = -2 kappa N(s_v): ties F's R_N path to Stein's N."""
    a, c, b2 = _gram(w, wstar, np.eye(3))
    if b2 == 0:
        return
    diff = gaussian_risk(a, c, b2) - gaussian_risk(a, -c, b2)
    expected = -2 * c / b2 * sigmoid_moment(math.sqrt(b2), "gaussian")
    assert diff == pytest.approx(expected, rel=1e-10, abs=1e-12 * (1 + math.sqrt(a)))


def test_risk_at_zero_is_log2_and_fair_coins():
    assert gaussian_risk(0.0, 0.0, 3.0) == LOG2
    assert gaussian_risk(0.0, 0.0, 0.0) == LOG2
    assert sphere_risk(0.0, 0.0, 2.0, 1.3, 7) == LOG2
    a = np.array([0.0, 0.3, 4.0, 900.0])
    fair = gaussian_risk(a, np.zeros(4), 0.0)
    np.testing.assert_array_equal(fair, softplus_moment(np.sqrt(a), "gaussian"))
    np.testing.assert_allclose(fair, gaussian_risk(a, np.zeros(4), 5.0), rtol=1e-15)  # w orthogonal to w*
    np.testing.assert_allclose(gaussian_risk(a, 0.5 * np.sqrt(a * 1e-14), 1e-14), fair, atol=1e-7)
    np.testing.assert_allclose(sphere_risk(np.sqrt(a), np.zeros(4), 0.0, 2.0, 4),
                               softplus_moment(2.0 * np.sqrt(a), "sphere", 4), rtol=0)


def test_sphere_risk_depends_on_radius_only_through_scales():
    nw, c, nws = np.array([0.3, 1.0, 2.0]), np.array([0.1, -0.4, 1.5]), 1.1
    scaled = sphere_risk(2.5 * nw, 6.25 * c, 2.5 * nws, 1.0, 6)
    np.testing.assert_allclose(sphere_risk(nw, c, nws, 2.5, 6), scaled, rtol=1e-13)


def test_high_dimensional_sphere_approaches_gaussian():
    """sqrt(d) Z_sphere -> N(0, 1): sphere risk ~ Gaussian risk with Sigma = (r^2/d) I, error O(1/d)."""
    dim, radius = 100_000, 300.0
    nw, c, nws = np.array([0.5, 2.0, 3.0]), np.array([0.8, -1.0, 5.5]), 2.0
    k = radius**2 / dim
    gauss = gaussian_risk(k * nw**2, k * c, k * nws**2)
    np.testing.assert_allclose(sphere_risk(nw, c, nws, radius, dim), gauss, rtol=1e-4)


def test_shapes_and_broadcasting():
    a = np.array([[0.5], [1.0], [2.0]])
    c = np.array([[0.1, 0.2, -0.3, 0.0]])
    out = gaussian_risk(a, c, 1.0)
    assert out.shape == (3, 4)
    assert out[1, 2] == pytest.approx(gaussian_risk(1.0, -0.3, 1.0), rel=1e-14)
    scalar = gaussian_risk(1.0, 0.2, 1.0)
    assert np.ndim(scalar) == 0 and isinstance(float(scalar), float)
    assert gaussian_risk([0.5, 1.0], [0.1, 0.2], 1.0).shape == (2,)
    assert gaussian_risk(np.empty(0), np.empty(0), 1.0).shape == (0,)
    assert sphere_risk(np.ones((2, 3)), 0.5, 1.0, 1.0, 3).shape == (2, 3)
    assert softplus_moment(np.ones((2, 5)), "sphere", 4).shape == (2, 5)
    assert sigmoid_moment(np.ones((2, 5)), "gaussian").shape == (2, 5)


def test_rules_are_cached_and_read_only():
    assert quadrature_rule("sphere", 5) is quadrature_rule("sphere", 5)
    with pytest.raises(ValueError):
        quadrature_rule("gaussian", None).tau[0] = 1.0


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: sphere_risk(1.0, 0.0, 1.0, 1.0, 1), "dim"),
        (lambda: sphere_risk(1.0, 0.0, 1.0, 1.0, 2.5), "dim"),
        (lambda: sphere_risk(1.0, 0.0, 1.0, 1.0, True), "dim"),
        (lambda: softplus_moment(1.0, "sphere"), "dim"),
        (lambda: sphere_risk(1.0, 0.0, 1.0, 0.0, 3), "radius"),
        (lambda: sphere_risk(1.0, 0.0, 1.0, -2.0, 3), "radius"),
        (lambda: sphere_risk(1.0, 0.0, -1.0, 1.0, 3), "norm_wstar"),
        (lambda: sphere_risk(-1.0, 0.0, 1.0, 1.0, 3), "norm_w"),
        (lambda: sphere_risk(1.0, 2.5, 2.0, 1.0, 3), "Cauchy-Schwarz"),
        (lambda: gaussian_risk(-1.0, 0.0, 1.0), "a"),
        (lambda: gaussian_risk(1.0, np.inf, 1.0), "c"),
        (lambda: gaussian_risk(1.0, 0.0, -1.0), "b2"),
        (lambda: gaussian_risk(1.0, 0.0, [1.0, 2.0]), "b2"),
        (lambda: gaussian_risk(1.0, 1.5, 2.0), "Cauchy-Schwarz"),
        (lambda: gaussian_risk([1.0, 2.0], [0.0, 0.0, 0.0], 1.0), "broadcast"),
        (lambda: softplus_moment(-1e-3, "gaussian"), "s"),
        (lambda: sigmoid_moment(np.nan, "gaussian"), "s"),
        (lambda: softplus_moment(1.0, "laplace"), "design"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_written_out_gauss_legendre_rule_is_scipys_bit_for_bit():
    from scipy.special import roots_legendre

    from echosim.training import logistic_risk as lr

    x, w = roots_legendre(lr._ORDER)
    np.testing.assert_array_equal(np.array(lr._GL_NODES), x)
    np.testing.assert_array_equal(np.array(lr._GL_WEIGHTS), w)
