"""The minimisers the benchmarks' reference problems share: w* and F* of L2-logistic
regression by Newton's method, and a stationary point by BFGS where the objective is not
convex. NumPy (and SciPy for BFGS) only; nothing from echosim, so the truths they give are
independent of the code they score.

Used by `plan_validation.references` (the planner's validation truths) and by
bench_auto.py's logistic table (the auto suite's NumPy cases).
"""

from __future__ import annotations

import numpy as np


def softplus(z):
    """log(1 + e^z) without overflow."""
    return np.maximum(z, 0.0) + np.log1p(np.exp(-np.abs(z)))


def sigmoid(z):
    """1 / (1 + e^-z); e^-z overflows to inf for z < -709, which gives the right limit 0."""
    with np.errstate(over="ignore"):
        e = np.exp(-z)
    e += 1.0
    return np.reciprocal(e, out=e)


def newton_logistic(X, y, l2, tol=1e-12, max_iter=100):
    """Minimiser of F(w) = mean(softplus(Xw) - y Xw) + l2/2 |w|^2, labels y in {0, 1}, by
    Newton's method from w = 0 (stops when |grad F|_inf <= tol): (w*, F*, |grad F(w*)|_inf).

    With labels s in {-1, +1}, pass y = (s + 1) / 2: softplus(z) - y z = log(1 + e^(-s z))."""
    n, d = X.shape
    w = np.zeros(d)
    for _ in range(max_iter):
        z = X @ w
        p = sigmoid(z)
        g = X.T @ (p - y) / n + l2 * w
        if np.max(np.abs(g)) <= tol:
            break
        H = (X * (p * (1 - p))[:, None]).T @ X / n + l2 * np.eye(d)
        w = w - np.linalg.solve(H, g)
    z = X @ w
    g = X.T @ (sigmoid(z) - y) / n + l2 * w
    F = float(np.mean(softplus(z) - y * z) + 0.5 * l2 * w @ w)
    return w, F, float(np.max(np.abs(g)))


def stationary_bfgs(objective, grad, dim: int, gtol: float = 1e-11, max_iter: int = 10_000):
    """A stationary point of a smooth objective reached by BFGS from w = 0 (SciPy):
    (w, |grad(w)|_inf). `objective` maps w to a float, `grad` to its gradient."""
    from scipy.optimize import minimize

    res = minimize(lambda w: float(objective(w)), np.zeros(dim), jac=grad, method="BFGS",
                   options={"gtol": gtol, "maxiter": max_iter})
    return res.x, float(np.max(np.abs(grad(res.x))))
