"""Problems: a stream of fresh batches, the population risk F, w*, F* and β, ρ, D.

The kinds a config names are the rows of `PROBLEMS` (class, defaults, a preset
instance), which the config schema and the planner read.

A problem draws i.i.d. examples; fresh batch t is a pure function of
(seed, t, batch size), so runs that share a seed see the same batches whatever
their echo factor, policy or optimizer (common random numbers).

Losses: the rows of `echosim.training.losses.LOSSES` (its docstring gives each ℓ(w; z)).
The synthetic problems use the squared (`LeastSquares`) and logistic (`Logistic`) loss;
a `Dataset` takes any row (the softmax loss's W is C×d, flattened row-major into w),
plus (l2/2)‖w‖² with L2 regularisation.

Constants (``constants()``), with D = ‖w₀ − w*‖:
  β  smoothness of the per-example loss (where the design is bounded), else the
     population smoothness λ_max(∇²F), flagged by ``constants_kind``;
  ρ  a Lipschitz constant of the per-example loss on the ball ‖w − w*‖ ≤ D
     ("almost sure"), or, for unbounded (Gaussian) data, the mean-square
     constant sup_{‖w−w*‖≤D} (E‖∇ℓ(w; z)‖²)^{1/2} ("mean square").
The derivations are in docs/background/problems.md.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import numpy as np

from echosim._validate import check_choice, check_int, check_real, is_int
from echosim.pipeline.sizes import check_fits
from echosim.training import logistic_risk as _logistic_risk
from echosim.training.losses import LOSSES, get_loss

EVAL_SEED = 0
"""Seed of a `Dataset`'s evaluation subsample (``eval_rows``): one subsample for every run."""

BATCHES_PER_BLOCK = 16
"""Fresh batches drawn from one generator: batch t comes from block t // 16."""

STREAM_DATA = 0
STREAM_OPTIMIZER = 1

DESIGNS = ("gaussian", "sphere")
"""Designs of the synthetic problems: x ~ N(0, diag(i^-decay)), or uniform on a sphere."""
NOISES = ("gaussian", "uniform")
"""Label-noise laws of `LeastSquares`."""


def block_rng(seed: int, stream: int, block: int) -> np.random.Generator:
    """The generator of one block of one random stream of a run."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream, block)))


def _dimension(dim):
    dim = check_int("dim", dim, lo=1)
    check_fits("dim", dim, 64, what="w*, the spectrum, the iterates and their averages")
    return dim


def _w_star(w_star, w_star_norm, dim):
    if w_star is None:
        norm = check_real("w_star_norm", w_star_norm, lo=0.0)
        return np.full(dim, norm / math.sqrt(dim))
    w = np.asarray(w_star, dtype=np.float64)
    if w.shape != (dim,):
        raise ValueError(f"w_star must have shape ({dim},), got {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError("w_star must be finite")
    return w.copy()


class Problem:
    """Base class: the data stream and evaluation of a convex objective."""

    loss: str
    l2: float = 0.0

    @property
    def dim(self) -> int:
        """Number of parameters (C·d for the multinomial loss)."""
        return self.w_star.shape[0]

    @property
    def n_features(self) -> int:
        """Number of features d of an example."""
        return self.dim

    def sample(self, rng: np.random.Generator, n: int):
        """Draw n i.i.d. examples: X of shape (n, dim), y of shape (n,)."""
        raise NotImplementedError

    def risk(self, W) -> np.ndarray:
        """F(w) for each row w of W (population risk, or full-data loss)."""
        raise NotImplementedError

    def excess_risk(self, W) -> np.ndarray:
        """F(w) − F* for each row w of W."""
        return self.risk(W) - self.F_star

    def batches(self, seed: int, start: int, stop: int, batch_size: int, dtype=np.float64):
        """Fresh batches start..stop−1 as X (n, B, dim), y (n, B); start must be block-aligned."""
        if start % BATCHES_PER_BLOCK:
            raise ValueError(f"start must be a multiple of {BATCHES_PER_BLOCK}, got {start}")
        n, per_block = stop - start, BATCHES_PER_BLOCK * batch_size
        d = self.n_features
        X = np.empty((n, batch_size, d), dtype=dtype)
        y = np.empty((n, batch_size), dtype=dtype)
        for first in range(start, stop, BATCHES_PER_BLOCK):
            Xb, yb = self.sample(block_rng(seed, STREAM_DATA, first // BATCHES_PER_BLOCK), per_block)
            m = min(BATCHES_PER_BLOCK, stop - first)
            X[first - start : first - start + m] = Xb.reshape(BATCHES_PER_BLOCK, batch_size, d)[:m]
            y[first - start : first - start + m] = yb.reshape(BATCHES_PER_BLOCK, batch_size)[:m]
        return X, y

    def memoize_batches(self, max_bytes: int = 256 << 20) -> "Problem":
        """Keep recently drawn batches (least recently used first out, at most `max_bytes`).

        Runs that differ only in K, lr or method read the same fresh batches (common
        random numbers), so a sweep worker draws them once. The arrays are shared
        and must only be read. Returns the problem itself; a second call is a no-op.
        """
        if not isinstance(self.__dict__.get("batches"), _BatchMemo):
            self.batches = _BatchMemo(self.batches, max_bytes)
        return self

    def distance(self, w0=None) -> float:
        """D = ‖w₀ − w*‖ (w₀ = 0 by default)."""
        w0 = np.zeros(self.dim) if w0 is None else np.asarray(w0, dtype=np.float64)
        return float(np.linalg.norm(w0 - self.w_star))


class SeparableDataError(ValueError):
    """Logistic data that a hyperplane separates: F has no minimiser without l2 > 0."""


class _BatchMemo:
    """A bounded LRU memo of ``problem.batches``; see `Problem.memoize_batches`."""

    def __init__(self, batches, max_bytes):
        self.batches, self.max_bytes = batches, max_bytes
        self.entries: dict = {}
        self.nbytes = 0  # of the entries, kept as they come and go (a coupled run asks per few batches)

    def __call__(self, seed, start, stop, batch_size, dtype=np.float64):
        key = (seed, start, stop, batch_size, np.dtype(dtype).str)
        hit = self.entries.pop(key, None)
        if hit is None:
            hit = self.batches(seed, start, stop, batch_size, dtype)
            self.nbytes += hit[0].nbytes + hit[1].nbytes
        self.entries[key] = hit
        while self.nbytes > self.max_bytes and len(self.entries) > 1:
            X, Y = self.entries.pop(next(iter(self.entries)))
            self.nbytes -= X.nbytes + Y.nbytes
        return hit


def _check_W(W, dim):
    W = np.asarray(W, dtype=np.float64)
    if W.ndim == 1:
        W = W[None, :]
    if W.ndim != 2 or W.shape[1] != dim:
        raise ValueError(f"W must have shape (n, {dim}) or ({dim},), got {np.shape(W)}")
    return W


def _scale_and_projection(W, lam, v):
    """Per row w of W: (sqrt(sum_j lam_j w_j^2), sum_j lam_j w_j v_j), lam = None meaning ones.

    Rows whose weighted square is within 1e-280..1e280 are summed as they are; the others
    (also 0, NaN and inf rows) are rescaled by their largest entry first, so that nothing
    under- or overflows; a non-finite row gives (+inf, 0). Row by row (einsum, not BLAS):
    a row's values do not depend on the other rows.
    """
    lv = v if lam is None else lam * v
    with np.errstate(invalid="ignore", over="ignore"):
        sq = np.einsum("ij,ij->i", W, W) if lam is None else np.einsum("ij,j->i", W * W, lam)
        scale, proj = np.sqrt(sq), np.einsum("ij,j->i", W, lv)
        rest = np.flatnonzero(~((sq > 1e-280) & (sq < 1e280)))
        R = W[rest]
        if R.any():  # zero rows are right already
            m = np.max(np.abs(R), axis=1)
            ok = np.isfinite(m) & (m > 0)
            U = R / np.where(ok, m, 1.0)[:, None]
            U[~ok] = 0.0
            m = np.where(ok, m, np.where(m == 0, 0.0, np.inf))  # NaN rows count as +inf
            uu = np.einsum("ij,ij->i", U, U) if lam is None else np.einsum("ij,j->i", U * U, lam)
            scale[rest] = np.where(ok, m * np.sqrt(uu), m)
            proj[rest] = np.where(ok, m * np.einsum("ij,j->i", U, lv), 0.0)
    return scale, proj


class _SyntheticDesign:
    """x ~ N(0, diag(λ)) with λ_i = i^{−decay}, or x uniform on the sphere of radius r."""

    def _init_design(self, dim, design, decay, radius):
        self._dim = _dimension(dim)
        self.design = check_choice("design", design, DESIGNS)
        self.decay = check_real("decay", decay, lo=0.0)
        self.radius = check_real("radius", radius, lo=0.0, lo_open=True)
        if self.design == "sphere":
            self.eigenvalues = np.full(self._dim, self.radius**2 / self._dim)
        else:
            self.eigenvalues = np.arange(1, self._dim + 1, dtype=np.float64) ** -self.decay

    def batches(self, seed: int, start: int, stop: int, batch_size: int, dtype=np.float64):
        """Fresh batches start..stop−1 as X (n, B, dim), y (n, B); start must be block-aligned.

        Drawn in compiled code from the same block generators, in the same order, as
        `Problem.batches` draws them through `sample` (see `echosim.training.sampling`).
        """
        from echosim.training import sampling  # compiles on first use, not at import

        if start % BATCHES_PER_BLOCK:
            raise ValueError(f"start must be a multiple of {BATCHES_PER_BLOCK}, got {start}")
        n, d = stop - start, self.n_features
        X = np.empty((n, batch_size, d), dtype=dtype)
        y = np.empty((n, batch_size), dtype=dtype)
        if self.loss == "logistic":
            kind, noise_scale = sampling.LABELS_LOGISTIC, 0.0
        elif self.noise == "gaussian":
            kind, noise_scale = sampling.NOISE_GAUSSIAN, self.noise_std
        else:
            kind, noise_scale = sampling.NOISE_UNIFORM, self.noise_std * math.sqrt(3.0)
        radius = self.radius if self.design == "sphere" else 0.0
        scale = np.sqrt(self.eigenvalues)
        for first in range(start, stop, BATCHES_PER_BLOCK):
            m = min(BATCHES_PER_BLOCK, stop - first)
            state = sampling.pcg64_state(block_rng(seed, STREAM_DATA, first // BATCHES_PER_BLOCK).bit_generator)
            sampling.draw_block(state, BATCHES_PER_BLOCK, m, batch_size, scale, radius, self.w_star, kind,
                                noise_scale, X[first - start : first - start + m],
                                y[first - start : first - start + m])
        return X, y

    def _draw_x(self, rng, n):
        z = rng.standard_normal((n, self._dim))
        if self.design == "sphere":
            return z * (self.radius / np.linalg.norm(z, axis=1, keepdims=True))
        return z * np.sqrt(self.eigenvalues)


class LeastSquares(_SyntheticDesign, Problem):
    """Linear regression y = x·w* + ε with exact population risk ½(w − w*)ᵀΣ(w − w*) + ½σ².

    Parameters
    ----------
    dim : int
        Dimension d.
    design : {"gaussian", "sphere"}
        x ~ N(0, Σ) with Σ = diag(i^{−decay}), or x uniform on the sphere ‖x‖ = radius.
    decay : float
        Power-law exponent a of the spectrum λ_i = i^{−a} (0: isotropic).
    radius : float
        Sphere radius r (design "sphere").
    noise : {"gaussian", "uniform"}
        N(0, σ²), or uniform on [−σ√3, σ√3] (bounded, so ρ is finite).
    noise_std : float
        σ.
    w_star : array, optional
        The true parameter; default a vector of norm ``w_star_norm`` with equal entries.
    w_star_norm : float
        ‖w*‖ of the default w*.
    """

    loss = "squared"

    def __init__(self, dim, design="gaussian", decay=0.0, radius=1.0, noise="gaussian",
                 noise_std=0.5, w_star=None, w_star_norm=1.0):
        self._init_design(dim, design, decay, radius)
        self.noise = check_choice("noise", noise, NOISES)
        self.noise_std = check_real("noise_std", noise_std, lo=0.0)
        self.w_star_norm = float(w_star_norm)
        self.w_star = _w_star(w_star, w_star_norm, self._dim)
        self.F_star = 0.5 * self.noise_std**2

    def __repr__(self):
        return (f"LeastSquares(dim={self._dim}, design={self.design!r}, decay={self.decay}, "
                f"radius={self.radius}, noise={self.noise!r}, noise_std={self.noise_std}, "
                f"w_star_norm={self.w_star_norm})")

    def sample(self, rng, n):
        X = self._draw_x(rng, n)
        if self.noise == "gaussian":
            eps = self.noise_std * rng.standard_normal(n)
        else:
            eps = self.noise_std * math.sqrt(3.0) * rng.uniform(-1.0, 1.0, n)
        return X, X @ self.w_star + eps

    def risk(self, W):
        delta = _check_W(W, self._dim) - self.w_star
        return 0.5 * (delta**2 @ self.eigenvalues) + self.F_star

    @property
    def constants_kind(self) -> str:
        bounded = self.design == "sphere" and self.noise == "uniform"
        return "almost sure" if bounded else "mean square"

    def constants(self, w0=None) -> dict:
        """β, ρ on the ball ‖w − w*‖ ≤ D, and D = ‖w₀ − w*‖ (see ``constants_kind``)."""
        D = self.distance(w0)
        sigma, lam = self.noise_std, self.eigenvalues
        if self.design == "sphere":
            r = self.radius
            beta = r**2
            if self.noise == "uniform":  # |x·Δ − ε|·‖x‖ ≤ r(rD + σ√3)
                rho = r * (r * D + sigma * math.sqrt(3.0))
            else:  # E[(x·Δ − ε)²]‖x‖² = r²(ΔᵀΣΔ + σ²)
                rho = r * math.sqrt(lam[0] * D**2 + sigma**2)
        else:  # E[(x·Δ)²‖x‖²] = ΔᵀΣΔ·trΣ + 2ΔᵀΣ²Δ (Isserlis), plus σ²·trΣ
            lmax, tr = float(lam.max()), float(lam.sum())
            beta = lmax
            rho = math.sqrt(D**2 * lmax * (tr + 2 * lmax) + sigma**2 * tr)
        return {"beta": float(beta), "rho": float(rho), "D": D}


class Logistic(_SyntheticDesign, Problem):
    """Binary logistic regression whose labels follow the model: P(y = 1 | x) = σ(x·w*).

    w* is then the population minimiser. The population risk is computed without
    Monte-Carlo noise by reducing it to two one-dimensional integrals
    (``echosim.training.logistic_risk``), accurate to about 1e-15 relative.

    Parameters
    ----------
    dim, design, decay, radius, w_star, w_star_norm
        As for `LeastSquares` (the default design here is "sphere", ‖w*‖ = 2).
    """

    loss = "logistic"

    def __init__(self, dim, design="sphere", decay=0.0, radius=1.0, w_star=None, w_star_norm=2.0):
        self._init_design(dim, design, decay, radius)
        self.w_star_norm = float(w_star_norm)
        self.w_star = _w_star(w_star, w_star_norm, self._dim)
        self.F_star = float(self.risk(self.w_star)[0])

    def __repr__(self):
        return (f"Logistic(dim={self._dim}, design={self.design!r}, decay={self.decay}, "
                f"radius={self.radius}, w_star_norm={self.w_star_norm})")

    def sample(self, rng, n):
        X = self._draw_x(rng, n)
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ self.w_star)))  # σ(x·w*) without overflow
        return X, np.where(rng.random(n) < p, 1.0, -1.0)

    def risk(self, W):
        """F(w) per row; iterates from 1e-300 to 1e300 neither under- nor overflow (see
        `_scale_and_projection`); a non-finite row gives +inf."""
        W = _check_W(W, self._dim)
        if self.design == "sphere":
            norm_w, c = _scale_and_projection(W, None, self.w_star)
            return _logistic_risk.sphere_risk(norm_w, c, float(np.linalg.norm(self.w_star)), self.radius, self._dim)
        lam = self.eigenvalues
        s_u, c = _scale_and_projection(W, lam, self.w_star)
        return _logistic_risk.gaussian_risk_scaled(s_u, c, float(self.w_star**2 @ lam))

    @property
    def constants_kind(self) -> str:
        return "almost sure" if self.design == "sphere" else "mean square"

    def constants(self, w0=None) -> dict:
        """β = r²/4 and ρ = r on the sphere (‖∇ℓ‖ ≤ ‖x‖); Gaussian: β = λ_max/4, ρ = √trΣ."""
        if self.design == "sphere":
            beta, rho = self.radius**2 / 4, self.radius
        else:
            beta, rho = float(self.eigenvalues.max()) / 4, math.sqrt(float(self.eigenvalues.sum()))
        return {"beta": float(beta), "rho": float(rho), "D": self.distance(w0)}


class Dataset(Problem):
    """A finite table (X, y); batches are drawn from it with replacement.

    Because batches are drawn with replacement, the full-data training loss
    (plus (l2/2)‖w‖²) *is* the risk F that the stream samples. F* comes from
    Newton's method with backtracking, run to ‖∇F‖ ≤ 1e-10.

    Parameters
    ----------
    X : array of shape (n, d)
        The features.
    y : array of shape (n,)
        The labels the loss's row names: {−1, +1} for "logistic", class indices
        0..C−1 for "softmax", real targets for "squared".
    loss : str
        A loss of `echosim.training.losses.LOSSES`.
    l2 : float
        L2 regularisation weight (needed for logistic regression on separable data).
    name : str
        A label for results.
    n_classes : int, optional
        C for "softmax" (default: the largest label + 1).
    eval_rows : int, optional
        Evaluate the risk on a fixed uniform subsample S of this many rows (drawn
        without replacement with seed `EVAL_SEED`, the same for every run) instead of
        all n: F_S(w) − F_S* is what runs log, with F_S* = min F_S. Batches are still
        drawn from all rows, and w* (hence D and the theory's constants) is the
        full-data minimiser; ``eval_bias`` = F_S(w*) − F_S* is how far the full-data
        optimum sits above F_S*. For large tables, where each logged point would
        cost a pass over every row. Default: all rows.

    Notes
    -----
    The losses and derivatives of the margin losses are summed in a fixed order
    (`echosim.training.losses`), so F*, w* and every logged risk are the same bits
    whatever BLAS threading the process has; "softmax" uses NumPy's BLAS.
    """

    def __init__(self, X, y, loss="logistic", l2=0.0, name="dataset", n_classes=None, eval_rows=None):
        X = np.ascontiguousarray(X, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X must be a non-empty 2-D array (n, d), got shape {X.shape}")
        if y.shape != (X.shape[0],):
            raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X and y must be finite (found NaN or inf)")
        self.loss = get_loss(loss).name
        if self.loss == "logistic" and not np.all(np.abs(y) == 1):
            raise ValueError("y must be in {-1, +1} for the logistic loss (map 0/1 labels with 2*y - 1)")
        self.n_classes = 1
        if self.loss == "softmax":
            if np.any(y < 0) or np.any(y != np.round(y)):
                raise ValueError("y must hold class indices 0, 1, ..., C-1 for the softmax loss")
            C = int(y.max()) + 1 if n_classes is None else n_classes
            if not is_int(C) or C < 2 or y.max() >= C:
                raise ValueError(f"n_classes must be an integer >= 2 above every label, got {n_classes!r}")
            self.n_classes = int(C)
        self.l2 = check_real("l2", l2, lo=0.0)
        self.X, self.y, self.name = X, y, str(name)
        self._eval = (X, y)
        if eval_rows is not None and (not is_int(eval_rows) or eval_rows < 1):
            raise ValueError(f"eval_rows must be a positive integer (rows of the risk's subsample), got {eval_rows!r}")
        self.w_star = self._solve()
        self.eval_rows, self.eval_bias = X.shape[0], 0.0
        if eval_rows is not None and eval_rows < X.shape[0]:
            self._use_eval_rows(int(eval_rows))
        else:
            self.F_star = float(self.risk(self.w_star)[0])

    def _use_eval_rows(self, m):
        """Evaluate the risk on a fixed subsample of m rows: F* becomes min F_S, and w* sits eval_bias above it."""
        rows = np.sort(np.random.default_rng(EVAL_SEED).choice(self.X.shape[0], size=m, replace=False))
        self._eval = (np.ascontiguousarray(self.X[rows]), np.ascontiguousarray(self.y[rows]))
        self.eval_rows = m
        at_w_star = float(self.risk(self.w_star)[0])
        w_S = self._newton(1e-10, 100, start=self.w_star)
        self.F_star = min(at_w_star, float(self.risk(w_S)[0]))
        self.eval_bias = at_w_star - self.F_star

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def dim(self) -> int:
        return self.X.shape[1] * self.n_classes

    def __repr__(self):
        n, d = self.X.shape
        classes = f", n_classes={self.n_classes}" if self.loss == "softmax" else ""
        rows = f", eval_rows={self.eval_rows}" if self.eval_rows < n else ""
        return f"Dataset(name={self.name!r}, n={n}, d={d}, loss={self.loss!r}, l2={self.l2}{classes}{rows})"

    def sample(self, rng, n):
        idx = rng.integers(0, self.X.shape[0], size=n)
        return self.X[idx], self.y[idx]

    def risk(self, W):
        W = _check_W(W, self.dim)
        X, y = self._eval
        return LOSSES[self.loss].mean_losses(X, y, W) + 0.5 * self.l2 * (W**2).sum(axis=1)

    def _grad_hess(self, w):
        X, y = self._eval
        g, H = LOSSES[self.loss].grad_hess(X, y, w)
        return g + self.l2 * w, H + self.l2 * np.eye(self.dim)

    def _separable(self) -> bool:
        """True if some w has y_i x_i·w ≥ 1 for every row (then F has no minimiser)."""
        from scipy.optimize import linprog

        d = self.X.shape[1]
        res = linprog(np.zeros(d), A_ub=-(self.y[:, None] * self.X), b_ub=-np.ones(len(self.y)),
                      bounds=[(None, None)] * d, method="highs")
        return res.status == 0

    def _solve(self, tol=1e-10, max_iter=100):
        separable = SeparableDataError(
            "the logistic data are linearly separable, so F has no minimiser w*: set l2 > 0")
        unregularised_logistic = self.loss == "logistic" and self.l2 == 0
        try:
            w = self._newton(tol, max_iter)
        except ValueError:
            if unregularised_logistic and self._separable():
                raise separable from None
            raise
        # Where every margin is positive, 2w has a lower loss than w: no finite minimiser.
        if unregularised_logistic and np.all(self.y * _margins(self.X, w) > 0):
            raise separable
        return w

    def _newton(self, tol, max_iter, start=None):
        w = np.zeros(self.dim) if start is None else start.copy()
        f = self.risk(w)[0]
        for _ in range(max_iter):
            g, H = self._grad_hess(w)
            if np.linalg.norm(g) <= tol:
                return w
            step = np.linalg.lstsq(H, -g, rcond=None)[0]
            t = 1.0
            while t > 1e-12:
                f_new = self.risk(w + t * step)[0]
                if f_new <= f + 1e-4 * t * (g @ step):
                    break
                t *= 0.5
            if t <= 1e-12:
                break
            w, f = w + t * step, f_new
        g, _ = self._grad_hess(w)
        if np.linalg.norm(g) > 1e-8:
            raise ValueError(
                f"Newton's method did not reach the minimiser w* (gradient norm {np.linalg.norm(g):.2e}); "
                "separable data have none: try l2 > 0")
        return w

    constants_kind = "almost sure"

    def constants(self, w0=None) -> dict:
        """β and ρ on the ball ‖w − w*‖ ≤ D, as exact maxima over the rows.

        From the loss's row (`Loss.constants`): β = c·max‖x‖² with its curvature factor c
        (1 squared, 1/4 logistic, 1/2 softmax), ρ its Lipschitz constant on the ball
        (max‖x‖(|x·w* − y| + ‖x‖D) squared, max‖x‖ logistic, √2·max‖x‖ softmax); plus l2
        and l2(‖w*‖ + D).
        """
        D = self.distance(w0)
        norms = np.linalg.norm(self.X, axis=1)
        reg = self.l2 * (float(np.linalg.norm(self.w_star)) + D)
        residuals = _margins(self.X, self.w_star) - self.y if LOSSES[self.loss].margin else None
        beta, rho = LOSSES[self.loss].constants(norms, residuals, D)
        return {"beta": beta + self.l2, "rho": rho + reg, "D": D}


def _margins(X, w):
    from echosim.training.losses import margins

    return margins(X, np.ascontiguousarray(w))


@dataclass(frozen=True)
class ProblemKind:
    """One problem kind (the config's ``problem.kind``): its class, whether it is a
    synthetic design (`LeastSquares`, `Logistic`) or a finite table (`Dataset`), and a
    small ill-conditioned instance of it as config keys (``preset``, the planner's
    ``--problem NAME``). The defaults of its parameters are its constructor's."""

    name: str
    cls: type
    doc: str
    synthetic: bool = True
    preset: dict | None = None

    @property
    def defaults(self) -> dict:
        """Parameter → default, read from the constructor (parameters without one, or
        with default None, are left out)."""
        params = inspect.signature(self.cls.__init__).parameters.values()
        return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty and p.default is not None}

    @property
    def loss(self) -> str | None:
        """The loss of every instance (a row of `echosim.training.losses.LOSSES`), or None
        where each instance names its own (`Dataset`)."""
        return self.cls.__dict__.get("loss")

    def build(self, **params) -> Problem:
        """An instance from keyword parameters (the constructor validates them)."""
        return self.cls(**params)


PROBLEMS: dict[str, ProblemKind] = {k.name: k for k in (
    ProblemKind("least_squares", LeastSquares, "linear regression with label noise, exact population risk",
                # ill-conditioned (eigenvalues i^-2, condition number 100), so curvature, not only noise, sets T
                preset={"dim": 10, "design": "gaussian", "decay": 2.0, "w_star_norm": 1.0, "noise_std": 0.5}),
    ProblemKind("logistic", Logistic, "logistic regression with labels from the model, exact population risk",
                preset={"dim": 10, "design": "gaussian", "decay": 2.0, "w_star_norm": 3.0}),
    ProblemKind("dataset", Dataset, "a finite table, batches drawn with replacement", synthetic=False),
)}
"""The registry of problem kinds: config name → row. Nothing else lists them or their defaults."""
