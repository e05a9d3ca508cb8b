"""How a training problem responds to echoing: fresh batches to target T(K, B),
predicted from measurements without echoing (steps to target at K = 1 and two or more
batch sizes).

Two models, both with two parameters fitted from K = 1 runs (derivations in
``docs/background/plan-model.md``):

``"bound"`` (default)
    Theorem 7 of Agarwal et al., E F(w_T) − F* ≤ βD²/(2KT) + 2ρD/√(BT), read at the
    target ε and divided by ε:  1 = S/(K·T) + √(E/(B·T)), with S = βD²/(2ε) optimisation
    steps and E = (2ρD/ε)² samples. The worst-case constants are replaced by fitted
    S and E. Solving the quadratic in 1/√T:
    T(K, B) = ((√(E/B) + √(E/B + 4S/K)) / 2)².
``"mccandlish"``
    McCandlish et al. (2018): (S/S_min − 1)(E/E_min − 1) = 1, i.e. at K = 1
    T(B) = S_min + E_min/B steps. Echoing divides the optimisation part and leaves the
    noise part: T(K, B) = S_min/K + E_min/B.

Both fits are linear least squares in relative error (non-negative parameters). The
uncertainty comes from a bootstrap over the measurements: over repeated
measurements at each batch size if there are any, else over the fit's relative
residuals when three or more batch sizes were measured, else from an assumed relative
measurement error (``rel_error``, 10% by default), and is reported as such.

Examples
--------
>>> fit = fit_response({64: 1100.0, 1024: 160.0})
>>> round(fit.predict(1, 64)), round(fit.predict(1, 1024))
(1100, 160)
>>> fit.predict(8, 1024) < fit.predict(1, 1024)
True
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MODELS", "DEFAULT_MODEL", "Response", "fit_response", "predict_batches"]

MODELS = ("bound", "mccandlish")
DEFAULT_MODEL = "bound"
"""The model `echosim.plan.plan` uses unless told otherwise. The two models are within a few
points of each other (benchmarks/bench_plan_model.py; docs/background/plan-model.md); the bound
model has the smaller 90th-percentile error of T(K) when fitted on two batch sizes."""

ACCURACY = ("measured against simulation on least squares, logistic and breast-cancer logistic regression, "
            "B 4..16384, K 2..64, fitted on B = 64 and 1024: relative error of T(K) median 22%, 90th "
            "percentile 52%; of the speedup median 21%, 90th percentile 69% (bound model; "
            "benchmarks/bench_plan_model.py)")
"""The measured accuracy, quoted in the planner's output."""


def predict_batches(model: str, p1, p2, K, B):
    """T(K, B) of `model` with parameters (p1, p2) = (S, E) or (S_min, E_min); broadcasts."""
    K = np.asarray(K, dtype=float)
    B = np.asarray(B, dtype=float)
    p1 = np.asarray(p1, dtype=float)
    p2 = np.asarray(p2, dtype=float)
    if model == "bound":
        n = p2 / B
        return ((np.sqrt(n) + np.sqrt(n + 4.0 * p1 / K)) / 2.0) ** 2
    if model == "mccandlish":
        return p1 / K + p2 / B
    raise ValueError(f"model must be one of {MODELS}, got {model!r}")


def _design(model: str, B: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Rows whose product with the parameter vector is 1 at an exact fit (relative scale)."""
    if model == "bound":  # S/T + sqrt(E)/sqrt(B T) = 1, parameters (S, sqrt(E))
        return np.column_stack([1.0 / T, 1.0 / np.sqrt(B * T)])
    return np.column_stack([1.0 / T, 1.0 / (B * T)])  # (S_min + E_min/B)/T = 1


def _fit_once(model: str, B: np.ndarray, T: np.ndarray) -> tuple[float, float]:
    from scipy.optimize import nnls

    (a, b), _ = nnls(_design(model, B, T), np.ones_like(T))
    return (float(a), float(b) ** 2) if model == "bound" else (float(a), float(b))


@dataclass(frozen=True)
class Response:
    """A fitted T(K, B) model; `predict` gives fresh batches to target.

    Attributes
    ----------
    model : "bound" or "mccandlish"
    params : dict, {"S", "E"} for "bound", {"S_min", "E_min"} for "mccandlish"
    draws : float64[n, 2], bootstrap draws of the two parameters
    uncertainty : how the draws were made (replicates, residuals or an assumed error)
    batch_sizes, steps : the measurements (K = 1), one entry per measurement
    """

    model: str
    params: dict
    draws: np.ndarray = field(repr=False)
    uncertainty: str
    batch_sizes: np.ndarray = field(repr=False)
    steps: np.ndarray = field(repr=False)

    @property
    def p(self) -> tuple[float, float]:
        return tuple(self.params.values())

    def predict(self, echo, batch_size):
        """Predicted fresh batches T to target at echo factor K (mean K̄ for greedy) and B."""
        out = predict_batches(self.model, *self.p, echo, batch_size)
        return float(out) if np.ndim(out) == 0 else out

    def predict_draws(self, echo, batch_size) -> np.ndarray:
        """T(K, B) under every bootstrap draw of the parameters (for bands)."""
        return predict_batches(self.model, self.draws[:, 0], self.draws[:, 1], echo, batch_size)

    def describe(self) -> str:
        lo, hi = np.quantile(self.draws, [0.1, 0.9], axis=0)
        names = list(self.params)
        parts = [f"{n} = {v:.4g} [{a:.3g}, {b:.3g}]" for n, v, a, b in zip(names, self.params.values(), lo, hi)]
        return f"{self.model} model: " + ", ".join(parts) + f" (10-90% band: {self.uncertainty})"


def _measurements(steps_to_target) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(steps_to_target, Mapping):
        raise ValueError("steps_to_target: expected a mapping batch size -> steps to target at K = 1 "
                         f"(a number or a list of repeated measurements), got {type(steps_to_target).__name__}")
    Bs, Ts = [], []
    for B, v in steps_to_target.items():
        if isinstance(B, bool) or not isinstance(B, numbers.Integral) or B < 1:
            raise ValueError(f"steps_to_target: batch sizes must be integers >= 1, got {B!r}")
        vals = np.atleast_1d(np.asarray(v, dtype=float)).reshape(-1)
        if vals.size == 0 or not np.all(np.isfinite(vals) & (vals >= 1)):
            raise ValueError(f"steps_to_target: at B = {B} every measurement must be a finite number of "
                             f"steps >= 1, got {v!r}")
        Bs.append(np.full(vals.size, float(B)))
        Ts.append(vals)
    if len(Bs) < 2:
        raise ValueError(f"steps_to_target: the T(K) model needs steps to target at two or more batch sizes, "
                         f"got {len(Bs)}")
    return np.concatenate(Bs), np.concatenate(Ts)


def fit_response(steps_to_target, model: str = DEFAULT_MODEL, *, n_draws: int = 400,
                 rel_error: float = 0.1, seed: int = 0) -> Response:
    """Fit T(K, B) from steps to target measured without echoing.

    Parameters
    ----------
    steps_to_target : mapping B -> steps (or a list of repeated measurements)
        Optimizer steps (= fresh batches, K = 1) to reach the target, at two or more
        batch sizes B.
    model : "bound" (default) or "mccandlish"; see the module docstring.
    n_draws : bootstrap draws for the uncertainty.
    rel_error : assumed relative measurement error, used only when nothing else
        measures it (no repeats and exactly two batch sizes).
    seed : seed of the bootstrap (numpy SeedSequence).
    """
    if model not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}, got {model!r}")
    if not (isinstance(rel_error, numbers.Real) and 0 <= rel_error < 1):
        raise ValueError(f"rel_error must be a number in [0, 1), got {rel_error!r}")
    B, T = _measurements(steps_to_target)
    p = _fit_once(model, B, T)
    if not (p[0] > 0 or p[1] > 0):
        raise ValueError("steps_to_target: the measurements fit no positive T(K, B) model")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    sizes = np.unique(B)
    replicated = any(np.sum(B == b) > 1 for b in sizes)
    draws = np.empty((n_draws, 2))
    if replicated:
        groups = [np.flatnonzero(B == b) for b in sizes]
        how = "bootstrap over the repeated measurements"
        for i in range(n_draws):
            idx = np.concatenate([rng.choice(g, g.size) for g in groups])
            draws[i] = _fit_once(model, B[idx], T[idx])
    else:
        fitted = predict_batches(model, *p, 1.0, B)
        resid = np.log(T / fitted)
        if sizes.size >= 3:
            scale = float(np.sqrt(np.sum(resid ** 2) / (sizes.size - 2))) if sizes.size > 2 else 0.0
            how = f"bootstrap, relative residual scale {scale:.2g} from the fit"
        else:
            scale = float(rel_error)
            how = f"assumed {rel_error:.0%} relative error per measurement (measure repeats to replace it)"
        for i in range(n_draws):
            draws[i] = _fit_once(model, B, fitted * np.exp(rng.normal(0.0, scale, B.size)))
    names = ("S", "E") if model == "bound" else ("S_min", "E_min")
    return Response(model, dict(zip(names, p)), draws, how, B, T)
