"""Closed-form bounds and timing models for data echoing (pure NumPy).

Bounds from Agarwal, Anil, Koren, Talwar, Zhang, "Stochastic Optimization with Laggard
Data Pipelines" (NeurIPS 2020) and the pipeline timing model of Choi et al. (2019).
Derivations: ``docs/background/bounds.md``. Every function is vectorised over its
arguments; keyword names follow the paper (``beta, rho, D, B, T, K, lr, eps``), so a
problem's constants dict can be splatted in:

    theory.echoed_gd_bound(**problem.constants(), B=64, T=500, K=4)
"""

from theory import bounds, sample_complexity, timing
from theory.bounds import *  # noqa: F403 (the public names are listed in bounds.__all__)
from theory.sample_complexity import *
from theory.timing import *  # noqa: F403

__all__ = bounds.__all__ + sample_complexity.__all__ + timing.__all__
