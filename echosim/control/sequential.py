"""Always-valid comparisons: a confidence sequence for a running sum, and its error spent
across the tests of a job.

For increments d_1, d_2, ... with mean mu and conditional variances s_i^2 (sub-Gaussian),
S_n = sum (d_i - mu) and V_n = sum s_i^2, Robbins' normal mixture gives, for any rho > 0,

    P( exists n : |S_n| >= u(V_n) ) <= alpha,   u(V) = sqrt((V + rho) log((V + rho) / (rho alpha^2)))

(Howard, Ramdas, McAuliffe, Sekhon 2021, the two-sided normal-mixture boundary): the test
may look after every increment and stop whenever it likes without inflating its error.
docs/background/auto-echo.md derives it and says what it assumes.
"""

from __future__ import annotations

import math

__all__ = ["mixture_boundary", "rho_for", "spent"]


def mixture_boundary(V: float, rho: float, alpha: float) -> float:
    """u(V): |S_n| beyond it rejects mean 0 with error <= alpha over all n."""
    return math.sqrt((V + rho) * math.log((V + rho) / (rho * alpha * alpha)))


def rho_for(V_star: float, alpha: float) -> float:
    """The mixture precision that makes the boundary tightest near V = V_star (approximately:
    the minimiser of u(V_star)/V_star in rho for small alpha)."""
    return V_star / (2.0 * math.log(1.0 / alpha) + math.log1p(2.0 * math.log(1.0 / alpha)))


def spent(alpha: float, k: int) -> float:
    """The error of test k = 1, 2, ... of one job: alpha / (k (k + 1)), which sums to alpha."""
    return alpha / (k * (k + 1))
