"""Closed-form bounds and timing models for data echoing (pure NumPy).

Bounds from Agarwal, Anil, Koren, Talwar, Zhang, "Stochastic Optimization with Laggard
Data Pipelines" (NeurIPS 2020) and the pipeline timing model of Choi et al. (2019).
Derivations: ``docs/background/bounds.md``. Every function is vectorised over its
arguments; keyword names follow the paper (``beta, rho, D, B, T, K, lr, eps``), so a
problem's constants dict can be splatted in::

    theory.echoed_gd_bound(**problem.constants(), B=64, T=500, K=4)
"""

from theory.bounds import (
    batches_to_accuracy,
    echoed_agd_bound,
    echoed_agd_lr,
    echoed_gd_bound,
    echoed_gd_lr,
    echoed_prox_bound,
    echoed_prox_param,
    minibatch_sgd_bound,
    saturation_echo,
    stability_gd,
    variable_echo_bound,
    variable_echo_lr,
)
from theory.timing import echo_speedup, pipeline_time, time_to_accuracy

__all__ = [
    "minibatch_sgd_bound",
    "echoed_gd_bound",
    "echoed_gd_lr",
    "stability_gd",
    "echoed_prox_bound",
    "echoed_prox_param",
    "echoed_agd_bound",
    "echoed_agd_lr",
    "variable_echo_bound",
    "variable_echo_lr",
    "batches_to_accuracy",
    "saturation_echo",
    "pipeline_time",
    "echo_speedup",
    "time_to_accuracy",
]
