"""Optimizer specs: small value objects that name a method and its hyper-parameters.

Every method consumes fresh batches S_1, ..., S_T and a step count K_t per batch
(an int, an array, or a pipeline `Schedule`); f_S is the batch loss (1/B)Σ_{z∈S} ℓ(w; z).

``MinibatchSGD``    w_t = w_{t−1} − η∇f_{S_t}(w_{t−1})                  (K_t = 1)
``EchoedGD``        K_t steps u_k = u_{k−1} − η∇f_{S_t}(u_{k−1}) from u_0 = w_{t−1}
``EchoedSGD``       the same, each step on a random sub-batch of b rows of S_t
``EchoedNesterov``  y_k = x_k + μ_k(x_k − x_{k−1}), x_{k+1} = y_k − η∇f_{S(k)}(y_k), with
                    the momentum carried across batches; μ_k = k/(k+3) (Nesterov's
                    schedule for convex losses, k the global step from 0) or a constant μ
``EchoedProx``      K_t steps on h_t(u) = f_{S_t}(u) + (λ/2)‖u − w_{t−1}‖² from w_{t−1}

Each run reports three iterates: the last one, ``avg`` (uniform average of every
step's iterate, which for constant K is (1/T)Σ_t x_t with x_t the inner average of
batch t, the output the echoed-GD bound is about) and ``end_avg`` (average of the
batch-end iterates w_1..w_T).

The learning rate η is a number, an array with one value per fresh batch, or a
callable mapping the batch indices 0..T−1 to such an array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Union

import numpy as np

from echosim.training import codes as _k

LearningRate = Union[float, np.ndarray, Callable[[np.ndarray], np.ndarray]]


def _lr_repr(lr) -> str:
    if callable(lr):
        return getattr(lr, "__name__", "schedule")
    if np.ndim(lr) == 0:
        return repr(float(lr))
    return f"array(len={np.size(lr)})"


def learning_rates(lr, n_batches: int) -> np.ndarray:
    """The per-batch learning rates η_0..η_{T−1}; ValueError if any is negative or non-finite."""
    if callable(lr):
        values = np.asarray(lr(np.arange(n_batches)), dtype=np.float64)
    else:
        values = np.asarray(lr, dtype=np.float64)
    if values.ndim == 0:
        values = np.full(n_batches, float(values))
    if values.shape != (n_batches,):
        raise ValueError(f"lr must be a number or have one value per fresh batch ({n_batches}), "
                         f"got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("lr must be non-negative and finite")
    return values


def _check_lr(lr):
    if callable(lr):
        return lr
    try:
        values = np.asarray(lr, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"lr must be a non-negative finite number (or one per batch), got {lr!r}") from None
    if values.ndim > 1 or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"lr must be a non-negative finite number (or one per batch), got {lr!r}")
    return float(values) if values.ndim == 0 else values


class Optimizer:
    """Base of the specs: the kernel's method code and its hyper-parameters as attributes."""

    method = _k.METHOD_GD
    sub_batch: int | None = None
    replace: bool = True
    momentum: float = -1.0
    lam: float = 0.0
    max_echo_one = False

    def __post_init__(self):
        object.__setattr__(self, "lr", _check_lr(self.lr))

    def __repr__(self):
        fields = {k: v for k, v in self.__dict__.items() if k != "lr"}
        inner = ", ".join([f"lr={_lr_repr(self.lr)}"] + [f"{k}={v!r}" for k, v in fields.items()])
        return f"{type(self).__name__}({inner})"


@dataclass(frozen=True, repr=False)
class MinibatchSGD(Optimizer):
    """Synchronous minibatch SGD, the baseline: one step per fresh batch (K_t = 1)."""

    name = "minibatch_sgd"
    bound = "echoed_gd_bound"

    lr: LearningRate
    max_echo_one = True


@dataclass(frozen=True, repr=False)
class EchoedGD(Optimizer):
    """K_t full-batch gradient steps on each fresh batch (data-echoed GD)."""

    name = "echoed_gd"
    bound = "echoed_gd_bound"

    lr: LearningRate


@dataclass(frozen=True, repr=False)
class EchoedSGD(Optimizer):
    """K_t steps per fresh batch, each on a random sub-batch of `sub_batch` rows.

    Rows are drawn with or without replacement (`replace`); sub_batch = B without
    replacement is EchoedGD.
    """

    name = "echoed_sgd"
    bound = "echoed_gd_bound"

    lr: LearningRate
    sub_batch: int = 1
    replace: bool = True

    def __post_init__(self):
        super().__post_init__()
        b = self.sub_batch
        if isinstance(b, bool) or not isinstance(b, (int, np.integer)) or b < 1:
            raise ValueError(f"sub_batch must be a positive integer, got {b!r}")


@dataclass(frozen=True, repr=False)
class EchoedNesterov(Optimizer):
    """Nesterov's accelerated gradient with momentum carried across batches.

    momentum="nesterov" uses μ_k = k/(k+3) (k = global step from 0; the schedule of
    Nesterov's method for convex functions); a number μ ∈ [0, 1) is a constant momentum.
    """

    name = "echoed_nesterov"
    bound = "echoed_agd_bound"

    lr: LearningRate
    momentum: Union[str, float] = "nesterov"

    def __post_init__(self):
        super().__post_init__()
        m = self.momentum
        if m != "nesterov" and not (isinstance(m, (int, float)) and not isinstance(m, bool)
                                    and math.isfinite(m) and 0 <= m < 1):
            raise ValueError(f"momentum must be 'nesterov' or a number in [0, 1), got {m!r}")

    method = _k.METHOD_NESTEROV

    @property
    def kernel_momentum(self) -> float:
        return -1.0 if self.momentum == "nesterov" else float(self.momentum)


@dataclass(frozen=True, repr=False)
class EchoedProx(Optimizer):
    """K_t gradient steps (step lr = γ) on f_S(u) + (λ/2)‖u − w_{t−1}‖² for each fresh batch."""

    name = "echoed_prox"
    bound = "echoed_prox_bound"

    lr: LearningRate
    lam: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if not (isinstance(self.lam, (int, float)) and math.isfinite(self.lam) and self.lam >= 0):
            raise ValueError(f"lam must be a non-negative finite number, got {self.lam!r}")

    method = _k.METHOD_PROX


METHODS = {cls.name: cls for cls in (MinibatchSGD, EchoedGD, EchoedSGD, EchoedNesterov, EchoedProx)}
"""The registry of optimizer methods: config name → spec class (``.bound`` names its theory bound)."""
OPTIMIZERS = {cls.__name__: cls for cls in METHODS.values()}
