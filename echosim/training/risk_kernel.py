"""Numba kernel of the exact logistic risk (`echosim.training.logistic_risk`).

Imported on first use, so that importing the risk module does not import Numba; compiled
once and cached on disk (``cache=True``).
"""

import math

from numba import njit

_LOG2 = math.log(2.0)


@njit(cache=True)
def softplus_remainder(s, s_series, mean_pos, m2, width, x, lam, mid, delta, out):
    """out[i] = R_M(s[i]) for 0 <= s[i] <= (number of pieces) * width.

    Below ``s_series`` the Taylor series log 2 - s E[Z+] + s^2 E[Z^2] / 8 (``mean_pos``,
    ``m2``); elsewhere the barycentric formula on piece p = floor(s / width) (the last
    piece also takes its right end): mid[p] + sum_j w_j delta[p, j] / sum_j w_j with
    w_j = lam[j] / (t - x[j]) at t = 2 (s / width - p) - 1 in [-1, 1], or that point's
    value when t is one of the points x.
    """
    last = mid.size - 1
    for i in range(s.size):
        if s[i] < s_series:
            out[i] = _LOG2 - s[i] * (mean_pos - s[i] * (m2 / 8.0))
            continue
        u = s[i] / width
        p = min(int(u), last)
        t = 2.0 * (u - p) - 1.0
        num = 0.0
        den = 0.0
        for j in range(x.size):
            dx = t - x[j]
            if dx == 0.0:
                num = delta[p, j]
                den = 1.0
                break
            w = lam[j] / dx
            num += w * delta[p, j]
            den += w
        out[i] = mid[p] + num / den
