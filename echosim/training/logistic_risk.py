"""Exact population risk of well-specified logistic regression, without Monte-Carlo noise.

Setting: labels y in {-1, +1} with P(y = 1 | x) = sigma(x . w*), loss
log(1 + exp(-y x . w)), and two designs: ``"gaussian"`` (x ~ N(0, Sigma)) and
``"sphere"`` (x uniform on the sphere of radius r in R^d, d >= 2).

Reduction (derived by the lead, checked here and in the tests). With u = x . w,
v = x . w* and softplus(-u) = softplus(u) - u, the loss averaged over y given x is
softplus(u) - sigma(v) u. Both designs have E[u | v] = kappa v (Gaussian:
kappa = w'Sigma w* / w*'Sigma w*; sphere, by reflection symmetry: kappa = w . w* / |w*|^2),
so

    F(w) = M(s_u) - kappa N(s_v),   M(s) = E[softplus(s Z)],   N(s) = E[sigma(s Z) s Z],

with Z standardised and symmetric: Z ~ N(0, 1), s_u = sqrt(w'Sigma w), s_v = sqrt(w*'Sigma w*)
(Gaussian) or Z = first coordinate of a uniform point on the unit sphere in R^d, density
c_d (1 - z^2)^((d-3)/2), s_u = r|w|, s_v = r|w*| (sphere).

Numerics. Writing softplus(t) = t+ + log1p(exp(-|t|)) and sigma(t) t = t+ - |t| sigma(-|t|),

    M(s) = s E[Z+] + R_M(s),   N(s) = s E[Z+] - R_N(s),
    R_M(s) = 2 int_0 log1p(exp(-s z)) p(z) dz,   R_N(s) = 2 int_0 s z sigma(-s z) p(z) dz,

and the risk is evaluated as F = (s_u - kappa s_v) E[Z+] + R_M(s_u) + kappa R_N(s_v): every
term is computed to full relative precision, and at w = w* the two large linear terms cancel
exactly instead of through rounding (F(w*) ~ 1/s is tiny next to M ~ s when s is large).
N alone is computed from Stein's identity, N(s) = s^2 E[q(Z) sigma'(s Z)] with q = 1
(Gaussian) or q = (1 - z^2)/(d - 1) (sphere, by integrating by parts against the weight), whose
integrand is positive: no cancellation at small s.

Every remainder is 2 int_0 g(s z) p(z) q(z) dz with g(t) <= (1 + t) e^-t (< 1e-18 beyond
T = 46) analytic in the strip |Im t| < pi. One fixed composite Gauss-Legendre rule on tau in
[0, 1] (84 nodes) is mapped per s so that the integrand varies on scales >= 1/T in tau
whatever s and d:

- weight-limited (s z_max <= T): Gaussian z = 9.5 tau; sphere z = sin(Phi_d tau), which turns
  the weight into cos^(d-2) phi (smooth even for d = 2, 4), Phi_d cutting where
  cos^(d-2) < e^-45 (large d). Nodes and weight values are precomputed: per s only g(s z_i).
- kernel-limited (large s): z = (T/s) tau, so t = T tau and g(t_i) are fixed: per s only the
  weight (sphere: once T/s <= 0.9, away from the weight's z = 1 singularity).
- sphere with T < s < T/0.9: phi variable again, Phi = arcsin(T/s).

Accuracy is ~1e-15 relative for s in [0, 1e300) (checked against 30-digit mpmath for
d in {2, ..., 1e5}; the tests check against scipy.integrate.quad), at a few transcendental
calls per node.

Table for R_M (the hot path: one value per logged iterate). For s <= s_dense the rule is a
fixed function of s, analytic except where s z_i = +-i pi (2k + 1) at a node z_i, i.e. at
distance >= pi s_dense / T from the real axis. `softplus_table` samples it once per
(design, d) at 14 Chebyshev points on each of 60 equal pieces of [0, s_dense], and the Numba
kernel `risk_kernel.softplus_remainder` interpolates by the barycentric formula: in units of
a piece's half-width the singularities are >= 2 pi 60 / T ~ 8.2 away, so the interpolation
error is ~16.4^-14 ~ 1e-17. Weighting only the differences from the piece's middle value
(exact in floating point) keeps the rounding at the rule's own level: against the rule's sum
in x86 long double (d in {2, ..., 1e5}) the rule is within 6.7e-16 relative, the table within
7.8e-16, and they differ by at most 1.0e-15.
Below s = 1e-4 the series log 2 - s E[Z+] + s^2 E[Z^2] / 8 is used (next term < 2e-18):
exactly log 2 as s -> 0, as the rule gives. A value costs 14 divisions, not 84 exp + log1p.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from numbers import Integral

import numpy as np

__all__ = [
    "gaussian_risk",
    "sphere_risk",
    "gaussian_risk_scaled",
    "softplus_moment",
    "sigmoid_moment",
]
"""The risks and moments. The quadrature's building blocks (`quadrature_rule`, `tau_sums`,
the remainders' integrands `g_softplus`, `g_sigmoid`, `g_stein`, `softplus_table`,
`softplus_remainder`) are public for the tests and the ablation of
``benchmarks/bench_risk.py``, and not re-exported."""

DESIGNS = ("gaussian", "sphere")

_T_MAX = 46.0  # g(t) < 1e-18 for t > T: the s z range that matters
_Z_MAX_GAUSS = 9.5  # 2 * tail of N(0, 1) beyond 9.5 < 1e-20
_LOG_WEIGHT_FLOOR = 45.0  # sphere: cut phi where cos^(d-2) phi < exp(-45)
_Z_FIXED_SPHERE = 0.9  # sphere: largest z range integrated in the z variable
_BREAKS = (0.0, 0.15, 0.4, 1.0)  # panels in tau, finer where exp(-T tau) varies fastest
_ORDER = 28  # Gauss-Legendre points per panel
_CHUNK = 4096  # s values per vectorised block (bounds temporaries to ~3 MB)
_PIECES = 60  # R_M table (module docstring): equal pieces of [0, s_dense],
_POINTS = 14  # Chebyshev points per piece,
_S_SERIES = 1e-4  # and R_M's Taylor series below this s
_CS_RTOL = 1e-8  # slack on Cauchy-Schwarz |c| <= sqrt(a b2) for rounding in the caller
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LOG2 = math.log(2.0)
# the nodes and weights of scipy.special.roots_legendre(_ORDER) on [-1, 1], bit for bit (a test holds
# it): written out so that the risk imports no SciPy (scipy.special and scipy.linalg cost ~0.3 s)
_GL_NODES = (
    -0.9964424975739544, -0.9813031653708728, -0.9542592806289381, -0.9156330263921321, -0.8658925225743951,
    -0.8056413709171792, -0.7356108780136318, -0.656651094038865, -0.5697204718114017, -0.4758742249551182,
    -0.37625151608907875, -0.27206162763517805, -0.16456928213338082, -0.05507928988403422,
    0.05507928988403422, 0.16456928213338082, 0.27206162763517805, 0.37625151608907875, 0.4758742249551182,
    0.5697204718114017, 0.656651094038865, 0.7356108780136318, 0.8056413709171792, 0.8658925225743951,
    0.9156330263921321, 0.9542592806289381, 0.9813031653708728, 0.9964424975739544,
)
_GL_WEIGHTS = (
    0.009124282593092585, 0.02113211259277212, 0.03290142778230522, 0.04427293475900388, 0.05510734567571665,
    0.0652729239669997, 0.07464621423456862, 0.08311341722890143, 0.09057174439303295, 0.09693065799793002,
    0.1021129675780608, 0.10605576592284646, 0.10871119225829423, 0.11004701301647533, 0.11004701301647533,
    0.10871119225829423, 0.10605576592284646, 0.1021129675780608, 0.09693065799793002, 0.09057174439303295,
    0.08311341722890143, 0.07464621423456862, 0.0652729239669997, 0.05510734567571665, 0.04427293475900388,
    0.03290142778230522, 0.02113211259277212, 0.009124282593092585,
)


@dataclass(frozen=True)
class _Rule:
    """Quadrature nodes and constants of Z for one (design, dim); built once and cached.

    ``tau``/``weight`` integrate over [0, 1]. ``z_max`` caps L (Gaussian) or is Phi_d (sphere).
    For s <= ``s_dense`` the range is set by the weight alone, so the nodes ``zeta`` (z, or
    sin phi) and the weight values ``dens[j]`` (j = extra powers of 1 - z^2) are precomputed;
    for s >= ``s_fixed`` the range is z in [0, T/s], so t = s z = T tau is fixed and only the
    weight is evaluated per s. ``mean_pos`` is E[Z+]; ``density_const`` normalises p.
    """

    design: str
    dim: int | None
    tau: np.ndarray
    weight: np.ndarray
    z_max: float
    s_dense: float
    s_fixed: float
    zeta: np.ndarray
    dens: tuple
    mean_pos: float
    density_const: float


def _gamma_half_ratio(dim: int) -> float:
    """Gamma(d/2) / Gamma((d+1)/2) to ~1e-15 relative for every integer d >= 2.

    ``scipy.special.beta``/``gammaln`` lose up to 1e-11 here for large d, so: the exact
    recurrence ratio(d+2) = ratio(d) d/(d+1) summed in log space with ``math.fsum`` for
    d < 2000, and the asymptotic series of Gamma(x+1/2)/Gamma(x) (x = d/2, error < 1e-17)
    beyond.
    """
    if dim >= 2000:
        x = dim / 2.0
        series = 1.0 - 1.0 / (8 * x) + 1.0 / (128 * x**2) + 5.0 / (1024 * x**3) - 21.0 / (32768 * x**4)
        return 1.0 / (math.sqrt(x) * series)
    d0 = 2 if dim % 2 == 0 else 3
    ratio0 = 2.0 / math.sqrt(math.pi) if d0 == 2 else math.sqrt(math.pi) / 2.0
    k = np.arange(d0, dim - 1, 2, dtype=float)
    return ratio0 * math.exp(math.fsum(np.log1p(-1.0 / (k + 1.0))))


def _check_design(design, dim) -> int | None:
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if design == "gaussian":
        return None  # Z ~ N(0, 1) whatever the dimension
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, Integral) or dim < 2:
        raise ValueError(f"dim must be an integer >= 2 for the sphere design, got {dim!r}")
    return int(dim)


@lru_cache(maxsize=64)
def quadrature_rule(design: str, dim: int | None) -> _Rule:
    """Composite Gauss-Legendre rule on [0, 1] plus the constants of Z (cached)."""
    x, w = np.array(_GL_NODES), np.array(_GL_WEIGHTS)
    b = np.asarray(_BREAKS)
    lo, hi = b[:-1, None], b[1:, None]
    tau = ((lo + hi) / 2 + (hi - lo) / 2 * x).ravel()
    weight = ((hi - lo) / 2 * w).ravel()
    if design == "gaussian":
        zeta = _Z_MAX_GAUSS * tau
        dens = np.exp(-0.5 * zeta * zeta)
        s_dense = _T_MAX / _Z_MAX_GAUSS
        rule = _Rule(design, None, tau, weight, _Z_MAX_GAUSS, s_dense, s_dense, zeta, (dens, dens),
                     1.0 / _SQRT_2PI, 1.0 / _SQRT_2PI)
    else:
        mean_abs = _gamma_half_ratio(dim) / math.sqrt(math.pi)  # E|Z| = G(d/2)/(sqrt(pi) G((d+1)/2))
        density_const = (dim - 1) / 2.0 * mean_abs  # c_d = G(d/2)/(sqrt(pi) G((d-1)/2))
        phi_max = math.pi / 2 if dim == 2 else math.acos(math.exp(-_LOG_WEIGHT_FLOOR / (dim - 2)))
        phi = phi_max * tau
        h = np.sin(0.5 * phi)
        log_cos = np.log1p(-2.0 * h * h)  # accurate log cos phi; cos^k amplifies its error k-fold
        dens = tuple(np.exp((dim - 2 + 2 * j) * log_cos) for j in (0, 1))  # dz = cos dphi
        s_dense = _T_MAX / math.sin(phi_max)
        # z-variable only once z <= 0.9: keeps (1 - z^2)^((d-3)/2) off its z = 1 singularity
        rule = _Rule(design, dim, tau, weight, phi_max, s_dense, max(s_dense, _T_MAX / _Z_FIXED_SPHERE),
                     np.sin(phi), dens, mean_abs / 2.0, density_const)
    for arr in (rule.tau, rule.weight, rule.zeta, *rule.dens):
        arr.setflags(write=False)
    return rule


@dataclass(frozen=True)
class _Table:
    """R_M on [0, s_dense] as barycentric interpolation data (`risk_kernel.softplus_remainder`):
    piece p = [p width, (p + 1) width] holds the values mid[p] + delta[p, j] at the
    Chebyshev points x (in [-1, 1], first kind) with barycentric weights lam; the middle
    value is kept apart so that rounding scales with delta, not with R_M."""

    width: float
    x: np.ndarray
    lam: np.ndarray
    mid: np.ndarray
    delta: np.ndarray


@lru_cache(maxsize=64)
def softplus_table(design: str, dim: int | None) -> _Table:
    """Sample the weight-limited rule's R_M at the Chebyshev points of every piece (cached)."""
    rule = quadrature_rule(design, dim)
    theta = np.pi * (2 * np.arange(_POINTS) + 1) / (2 * _POINTS)
    x, lam = np.cos(theta), (-1.0) ** np.arange(_POINTS) * np.sin(theta)
    width = rule.s_dense / _PIECES
    s = (np.arange(_PIECES)[:, None] + 0.5 * (x + 1.0)) * width
    total, length = tau_sums(s.ravel(), rule, g_softplus, 0)
    values = (total * length).reshape(s.shape)
    mid = values[:, _POINTS // 2].copy()
    delta = values - mid[:, None]  # exact (Sterbenz): values in a piece are within 2x
    table = _Table(width, x, lam, mid, delta)
    for arr in (x, lam, mid, delta):
        arr.setflags(write=False)
    return table


def softplus_remainder(s, rule: _Rule) -> np.ndarray:
    """R_M(s) = 2 int_0 log1p(e^-s z) p(z) dz for s >= 0 (any shape): series and table up to
    s_dense, the rule beyond (module docstring)."""
    from echosim.training.risk_kernel import softplus_remainder  # Numba: compiled on first use

    flat = np.ascontiguousarray(s, dtype=float).ravel()
    out = np.empty(flat.shape)
    t = softplus_table(rule.design, rule.dim)
    m2 = 1.0 if rule.design == "gaussian" else 1.0 / rule.dim  # E[Z^2]
    dense = flat <= rule.s_dense
    if dense.all():
        softplus_remainder(flat, _S_SERIES, rule.mean_pos, m2, t.width, t.x, t.lam, t.mid, t.delta, out)
    else:
        part = np.empty(np.count_nonzero(dense))
        softplus_remainder(flat[dense], _S_SERIES, rule.mean_pos, m2, t.width, t.x, t.lam, t.mid, t.delta, part)
        out[dense] = part
        total, length = tau_sums(flat[~dense], rule, g_softplus, 0)
        out[~dense] = total * length
    return out.reshape(np.shape(s))


@lru_cache(maxsize=8)
def _fixed_kernel(kernel) -> np.ndarray:
    """g(T tau) at the nodes: the kernel values shared by every s >= s_fixed (any design)."""
    values = kernel(_T_MAX * quadrature_rule("gaussian", None).tau)  # tau is the same for every design
    values.setflags(write=False)
    return values


# --- the three decaying kernels g(t), t >= 0 -------------------------------------------


def g_softplus(t):
    """log1p(exp(-t)): softplus(t) - t+, the remainder of M."""
    return np.log1p(np.exp(-t))


def g_sigmoid(t):
    """t sigma(-t): t+ - sigma(t) t, the remainder of N."""
    e = np.exp(-t)
    return t * e / (1.0 + e)


def g_stein(t):
    """sigma'(t) = sigma(t) sigma(-t), the integrand of N after Stein's identity."""
    e = np.exp(-t)
    return e / (1.0 + e) ** 2


def tau_sums(s, rule: _Rule, kernel, extra_power: int):
    """For s >= 0 (1-D): (S, length) with 2 int_0 g(s z) p(z) (1-z^2)^j dz = length * S.

    ``length`` is L or Phi (in z or phi units, as the regime integrates); s * length is
    bounded by T pi / 2, so s J = (s length) S never overflows.
    """
    tau, wt = rule.tau, rule.weight
    s = np.asarray(s, dtype=float)
    total = np.empty(s.shape)
    length = np.empty(s.shape)
    dense = s <= rule.s_dense
    fixed = s >= rule.s_fixed
    norm = 2.0 * rule.density_const
    for idx in _blocks(np.flatnonzero(dense)):  # weight-limited: only g(s z_i) per s
        total[idx] = norm * (kernel(s[idx, None] * rule.zeta) @ (wt * rule.dens[extra_power]))
        length[idx] = rule.z_max
    g_wt = _fixed_kernel(kernel) * wt
    for idx in _blocks(np.flatnonzero(fixed & ~dense)):  # kernel-limited: z = (T/s) tau
        reach = _T_MAX / s[idx]
        z = reach[:, None] * tau
        if rule.design == "gaussian":
            dens = np.exp(-0.5 * z * z)
        else:
            dens = np.exp((0.5 * (rule.dim - 3) + extra_power) * np.log1p(-z * z))
        total[idx] = norm * (dens @ g_wt)
        length[idx] = reach
    for idx in _blocks(np.flatnonzero(~fixed & ~dense)):  # sphere, T < s < T/0.9: phi variable
        phi_len = np.arcsin(_T_MAX / s[idx])
        phi = phi_len[:, None] * tau
        h = np.sin(0.5 * phi)
        dens = np.exp((rule.dim - 2 + 2 * extra_power) * np.log1p(-2.0 * h * h))
        total[idx] = norm * ((kernel(s[idx, None] * np.sin(phi)) * dens) @ wt)
        length[idx] = phi_len
    return total, length


def _blocks(indices):
    """Split an index array into blocks of at most _CHUNK (bounds the temporaries)."""
    return [indices[i:i + _CHUNK] for i in range(0, indices.size, _CHUNK)]


@lru_cache(maxsize=256)
def _sigmoid_remainder(design: str, dim: int | None, s_v: float) -> float:
    """R_N(s_v) = 2 int_0 s_v z sigma(-s_v z) p(z) dz: one value per problem, so cached."""
    total, length = tau_sums(np.array([s_v]), quadrature_rule(design, dim), g_sigmoid, 0)
    return float(total[0] * length[0])


def _validate_s(s) -> np.ndarray:
    s = np.asarray(s, dtype=float)
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise ValueError("s must be finite and >= 0")
    return s


def softplus_moment(s, design: str, dim: int | None = None):
    """M(s) = E[softplus(s Z)] for the standardised design variable Z.

    Parameters
    ----------
    s : array_like
        Scale(s) >= 0, finite; any shape.
    design : {"gaussian", "sphere"}
        Z ~ N(0, 1), or Z = first coordinate of a uniform point on the unit sphere in R^dim.
    dim : int, optional
        Dimension d >= 2 (sphere only; ignored for the Gaussian).

    Returns
    -------
    ndarray or float
        M(s), to ~1e-15 relative: s E[Z+] + E[log1p(exp(-s|Z|))]. M(0) = log 2.

    Examples
    --------
    >>> round(float(softplus_moment(0.0, "gaussian")), 12)
    0.69314718056
    """
    dim = _check_design(design, dim)
    s = _validate_s(s)
    rule = quadrature_rule(design, dim)
    out = s * rule.mean_pos + softplus_remainder(s, rule)  # R_M(0) = log 2 exactly
    return out[()]


def sigmoid_moment(s, design: str, dim: int | None = None):
    """N(s) = E[sigma(s Z) s Z] for the standardised design variable Z.

    Computed from Stein's identity, N(s) = s^2 E[q(Z) sigma'(s Z)] (q = 1 Gaussian,
    q = (1 - Z^2)/(d - 1) sphere), so it is accurate relative to its size also as s -> 0,
    where N(s) ~ s^2 E[Z^2] / 4. Parameters as in :func:`softplus_moment`.

    Examples
    --------
    >>> float(sigmoid_moment(0.0, "sphere", dim=3))
    0.0
    """
    dim = _check_design(design, dim)
    s = _validate_s(s)
    rule = quadrature_rule(design, dim)
    flat = s.ravel()
    total, length = tau_sums(flat, rule, g_stein, 0 if design == "gaussian" else 1)
    out = flat * (flat * length) * total  # s * (s L) * S: no s^2 overflow
    if design == "sphere":
        out = out / (rule.dim - 1)
    return out.reshape(s.shape)[()]


def _risk(s_u, proj, s_v, rule: _Rule):
    """F = (s_u - proj) E[Z+] + R_M(s_u) + (proj / s_v) R_N(s_v), all terms accurate.

    ``proj`` = E[u Z_v] in units of s: the projection of w on w* (|proj| <= s_u, clipped
    here so that rounding in the caller cannot break Cauchy-Schwarz). ``s_u`` may be +inf
    (F = +inf); a huge finite s_u gives the linear asymptote, R_M(s_u) ~ 1/s_u being
    far below its last bit. Tiny s_u (down to the smallest double) needs no squaring here.
    """
    s_u = np.asarray(s_u, dtype=float)
    proj = np.clip(np.asarray(proj, dtype=float), -s_u, s_u)
    if s_u.shape != proj.shape:
        s_u, proj = np.broadcast_arrays(s_u, proj)
    inf = np.isinf(s_u)
    s_fin = np.where(inf, 0.0, s_u)
    r_m = softplus_remainder(s_fin, rule)
    if s_v == 0:
        out = s_fin * rule.mean_pos + r_m
    else:
        r_n = _sigmoid_remainder(rule.design, rule.dim, s_v)
        p_fin = np.where(inf, 0.0, proj)
        out = (s_fin - p_fin) * rule.mean_pos + r_m + (p_fin / s_v) * r_n
    return np.where(inf, np.inf, out)[()]


def _scalar(value, name: str, *, positive: bool = False) -> float:
    arr = np.asarray(value, dtype=float)
    bound = "> 0" if positive else ">= 0"
    if arr.ndim != 0 or not np.isfinite(arr) or arr < 0 or (positive and arr == 0):
        raise ValueError(f"{name} must be a finite scalar {bound}, got {value!r}")
    return float(arr)


def _check_pair(first, c, first_name: str, scale_of_bound, bound_desc: str):
    """Arrays (first, c) broadcast; first may be +inf (an overflowed iterate: F = +inf)."""
    first = np.asarray(first, dtype=float)
    c = np.asarray(c, dtype=float)
    if not np.all(first >= 0):
        raise ValueError(f"{first_name} must be >= 0 (or +inf), got NaN or a negative value")
    if np.any(np.isnan(c)):
        raise ValueError("c must not be NaN")
    if first.shape != c.shape:
        try:
            first, c = np.broadcast_arrays(first, c)
        except ValueError:
            raise ValueError(f"{first_name} of shape {first.shape} and c of shape {c.shape} must broadcast "
                             "together") from None
    # compare |c| / scale with sqrt(first) (no squaring: no overflow or underflow at extreme w)
    finite = np.isfinite(first)
    first_fin, c_fin = (first, c) if finite.all() else (first[finite], c[finite])
    if np.any(np.abs(c_fin) / scale_of_bound > first_fin * (1.0 + _CS_RTOL) + 1e-300):
        raise ValueError(f"c must satisfy Cauchy-Schwarz |c| <= {bound_desc}")
    if not np.all(np.isfinite(c_fin)):
        raise ValueError("c must be finite where the norm is")
    return first, c


def gaussian_risk(a, c, b2):
    """Population logistic risk F(w) for x ~ N(0, Sigma), exact to ~1e-15 relative.

    Parameters
    ----------
    a : array_like
        w' Sigma w >= 0 (one entry per iterate).
    c : array_like
        w' Sigma w*, broadcastable with ``a``; |c| <= sqrt(a b2).
    b2 : float
        w*' Sigma w* >= 0. ``b2 = 0`` means w* = 0: labels are fair coins, F = M(sqrt(a)).

    Returns
    -------
    ndarray or float
        F(w) = E[log(1 + exp(-y x.w))] with P(y = 1 | x) = sigma(x.w*), shape of
        ``broadcast(a, c)``. F(0) = log 2; F is minimised at w = w*.

    Examples
    --------
    >>> round(float(gaussian_risk(0.0, 0.0, 4.0)), 12)
    0.69314718056
    >>> bool(gaussian_risk(4.0, 4.0, 4.0) < gaussian_risk(4.0, 3.0, 4.0))
    True
    """
    b2 = _scalar(b2, "b2")
    a = np.asarray(a, dtype=float)
    if np.any(np.isnan(a)) or np.any(a < 0):
        raise ValueError("a must be >= 0 (or +inf), got NaN or a negative value")
    return gaussian_risk_scaled(np.sqrt(a), c, b2)


def gaussian_risk_scaled(s_u, c, b2):
    """`gaussian_risk` with s_u = sqrt(w' Sigma w) instead of its square.

    For iterates so large or small that w' Sigma w over- or underflows (|w| beyond
    ~1e154 or below ~1e-154): s_u itself stays in range. ``s_u = +inf`` gives F = +inf.

    Examples
    --------
    >>> float(gaussian_risk_scaled(1e-200, 1e-200, 4.0)) == float(gaussian_risk(0.0, 0.0, 4.0))
    True
    """
    b2 = _scalar(b2, "b2")
    s_v = math.sqrt(b2)
    s_u, c = _check_pair(s_u, c, "s_u", s_v if s_v > 0 else 1.0, "s_u * sqrt(b2)")
    rule = quadrature_rule("gaussian", None)
    if s_v == 0:
        return _risk(s_u, 0.0, 0.0, rule)
    return _risk(s_u, c / s_v, s_v, rule)


def sphere_risk(norm_w, c, norm_wstar, radius, dim):
    """Population logistic risk F(w) for x uniform on the sphere of radius r in R^d.

    Parameters
    ----------
    norm_w : array_like
        |w| >= 0 (one entry per iterate).
    c : array_like
        w . w*, broadcastable with ``norm_w``; |c| <= |w| |w*|.
    norm_wstar : float
        |w*| >= 0 (0: fair-coin labels).
    radius : float
        r > 0, the norm of every x.
    dim : int
        d >= 2.

    Returns
    -------
    ndarray or float
        F(w), exact to ~1e-15 relative, shape of ``broadcast(norm_w, c)``.

    Examples
    --------
    >>> round(float(sphere_risk(0.0, 0.0, 1.0, radius=1.0, dim=3)), 12)
    0.69314718056
    """
    dim = _check_design("sphere", dim)
    norm_wstar = _scalar(norm_wstar, "norm_wstar")
    radius = _scalar(radius, "radius", positive=True)
    norm_w, c = _check_pair(norm_w, c, "norm_w", norm_wstar if norm_wstar > 0 else 1.0, "norm_w * norm_wstar")
    rule = quadrature_rule("sphere", dim)
    with np.errstate(over="ignore"):  # r |w| beyond the largest double is +inf: F = +inf
        s_u = radius * norm_w
    s_v = radius * norm_wstar
    if s_v == 0:
        return _risk(s_u, 0.0, 0.0, rule)
    return _risk(s_u, radius * (c / norm_wstar), s_v, rule)
