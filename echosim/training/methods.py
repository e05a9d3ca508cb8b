"""The optimizer methods: each one's spec and its row of the method table, `METHODS`.

Every method consumes fresh batches S_1, ..., S_T and a step count K_t per batch
(an int, an array, or a pipeline `Schedule`); f_S is the batch loss (1/B)Σ_{z∈S} ℓ(w; z),
g = ∇f_S at the point the method asks for, k the global step from 0.

``MinibatchSGD``     w_t = w_{t−1} − η∇f_{S_t}(w_{t−1})                 (K_t = 1)
``EchoedGD``         K_t steps u_k = u_{k−1} − η∇f_{S_t}(u_{k−1}) from u_0 = w_{t−1}
``EchoedSGD``        the same, each step on a random sub-batch of b rows of S_t
``EchoedNesterov``   y_k = x_k + μ_k(x_k − x_{k−1}), x_{k+1} = y_k − η∇f_{S(k)}(y_k), with
                     the momentum carried across batches; μ_k = k/(k+3) (Nesterov's
                     schedule for convex losses) or a constant μ
``EchoedProx``       K_t steps on h_t(u) = f_{S_t}(u) + (λ/2)‖u − w_{t−1}‖² from w_{t−1}
``EchoedHeavyBall``  v ← μv + g, w ← w − ηv (`torch.optim.SGD` with momentum μ, no
                     dampening, not Nesterov), v carried across batches from v = 0
``EchoedAdam``       m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², w ← w − η m̂/(√v̂ + ε) with
                     m̂ = m/(1−β₁^{k+1}), v̂ = v/(1−β₂^{k+1}) (`torch.optim.Adam`: ε outside
                     the square root), m, v and k carried across batches
``EchoedAdamW``      w ← (1 − ηλ)w, then Adam's step with g taken before the decay
                     (`torch.optim.AdamW`: decoupled weight decay λ)

Heavy-ball, Adam and AdamW follow PyTorch's conventions so that a training job's
hyper-parameters carry over; the problem's l2 term is in g, as torch's coupled
``weight_decay``. No theorem of Agarwal et al. covers them (nor echoed SGD on
sub-batches, nor Nesterov with a constant momentum): their rows have no bound, and no
bound is drawn for them.

Each run reports three iterates: the last one, ``avg`` (uniform average of every
step's iterate, which for constant K is (1/T)Σ_t x_t with x_t the inner average of
batch t, the output the echoed-GD bound is about) and ``end_avg`` (average of the
batch-end iterates w_1..w_T).

The learning rate η is a number, an array with one value per fresh batch, or a
callable mapping the batch indices 0..T−1 to such an array.

A new method is, in full:

1. here: its spec class (an `Optimizer` dataclass; its hyper-parameters' config keys
   in `HYPER_FIELDS` if they are new) and its row of `METHODS`: the kernel code it
   runs (a new constant below if its update is new), ``hyper`` (the config keys of
   the floats its update reads, in order), ``state`` (the arrays it carries across
   batches and how they start), ``lr_grid`` (the planner's grid, if 1/β does not set
   its step) and whether a bound covers it;
2. in `echosim.training.kernel`, if its code is new: its branch of the update (the
   ``METHOD == CODE`` chain in ``echo_chunk``; a variant may join a branch it extends,
   as AdamW joins Adam's) and its entry in ``UPDATES`` beside it: the numbers of
   hyper-parameters and state arrays the branch reads. The kernel compares
   ``UPDATES`` with this table when it is imported: a row whose code has no branch,
   or whose hyper-parameters or state differ from what its branch reads, is an error
   then, never another method's update;
3. its naive twin: a step function in ``tests/naive.py``'s ``STEPS`` under its name.

The config schema, the CLI, the specs of sweeps, the compile warm-up (arrays sized
from the row), the planner's grids, the kernel tests' lists and the plots read the
row. Two lines outside the table, as for every public name: the spec class in
``echosim/__init__.py``'s lazy exports (which cannot read this table without
importing Numba), and the method in the ``method`` row of ``docs/sweep.md`` (a test
holds every method and config key documented there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Callable, ClassVar, Union

import numpy as np

from echosim._validate import check_int, check_real, is_real

__all__ = ["Optimizer", "MinibatchSGD", "EchoedGD", "EchoedSGD", "EchoedNesterov", "EchoedProx", "EchoedHeavyBall",
           "EchoedAdam", "EchoedAdamW", "Method", "METHODS", "DEFAULT_METHOD", "HYPER_FIELDS", "ADAPTIVE_LRS", "learning_rates",
           "get_method", "check_rows"]

LearningRate = Union[float, np.ndarray, Callable[[np.ndarray], np.ndarray]]

# kernel codes: one update branch each in echosim.training.kernel (its UPDATES lists them)
GD = 0  # minibatch SGD, echoed GD, echoed SGD (sub-batches)
NESTEROV = 1
PROX = 2
HEAVY_BALL = 3
ADAM = 4
ADAMW = 5

ADAPTIVE_LRS = (10 ** -3.5, 1.0, 4)
"""The planner's learning-rate grid (start, stop, per decade) for Adam-like methods: their
step moves each coordinate by about lr whatever the curvature, so the grid is not scaled by
1/β (the sweep still extends it past an edge where the tuned lr sits)."""


def _lr_repr(lr) -> str:
    if callable(lr):
        return getattr(lr, "__name__", "schedule")
    if np.ndim(lr) == 0:
        return repr(float(lr))
    return f"array(len={np.size(lr)})"


def learning_rates(lr, n_batches: int, start: int = 0) -> np.ndarray:
    """The learning rates η_start..η_{n_batches−1}; ValueError if any is negative or non-finite.

    `n_batches` is the run's horizon T where known (an array must have T values); a
    callable is asked for batches start..n_batches−1 only.
    """
    if callable(lr):
        values = np.asarray(lr(np.arange(start, n_batches)), dtype=np.float64)
        want = n_batches - start
    else:
        values = np.asarray(lr, dtype=np.float64)
        want = n_batches
    if values.ndim == 0:
        values = np.full(want, float(values))
    if values.shape != (want,):
        raise ValueError(f"lr must be a number or have one value per fresh batch ({want}), "
                         f"got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError("lr must be non-negative and finite")
    return values if callable(lr) else values[start:]


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


def _fraction(name, value):
    """A number in [0, 1) (momenta, Adam's betas)."""
    if not (is_real(value) and math.isfinite(value) and 0 <= value < 1):
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


class Optimizer:
    """Base of the specs: the learning rate; each subclass adds its own hyper-parameters
    as dataclass fields, and names its row of `METHODS` by ``name``."""

    name: ClassVar[str]

    def __post_init__(self):
        object.__setattr__(self, "lr", _check_lr(self.lr))

    def __repr__(self):
        fields_ = {k: v for k, v in self.__dict__.items() if k != "lr"}
        inner = ", ".join([f"lr={_lr_repr(self.lr)}"] + [f"{k}={v!r}" for k, v in fields_.items()])
        return f"{type(self).__name__}({inner})"

    @property
    def method(self) -> "Method":
        """This spec's row of the method table."""
        return METHODS[self.name]

    def config(self) -> dict:
        """The hyper-parameters but lr under their config keys (``[optimizer]`` of a sweep)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "lr"}

    @classmethod
    def from_config(cls, lr, **hyper) -> "Optimizer":
        """The spec from its config keys (the inverse of `config`)."""
        return cls(lr=lr, **hyper)

    def kernel_hyper(self) -> np.ndarray:
        """The kernel's float parameters of this method, its row's ``hyper`` keys in order
        (its update reads them by position)."""
        config = self.config()
        return np.array([float(config[k]) for k in self.method.hyper], dtype=np.float64)

    def check_batch_size(self, batch_size: int) -> None:
        """ValueError if the hyper-parameters cannot work with fresh batches of `batch_size` rows."""


@dataclass(frozen=True, repr=False)
class MinibatchSGD(Optimizer):
    """Synchronous minibatch SGD, the baseline: one step per fresh batch (K_t = 1)."""

    name = "minibatch_sgd"

    lr: LearningRate


@dataclass(frozen=True, repr=False)
class EchoedGD(Optimizer):
    """K_t full-batch gradient steps on each fresh batch (data-echoed GD)."""

    name = "echoed_gd"

    lr: LearningRate


@dataclass(frozen=True, repr=False)
class EchoedSGD(Optimizer):
    """K_t steps per fresh batch, each on a random sub-batch of `sub_batch` rows.

    Rows are drawn with or without replacement (`replace`); sub_batch = B without
    replacement is EchoedGD.
    """

    name = "echoed_sgd"

    lr: LearningRate
    sub_batch: int = 1
    replace: bool = True

    def __post_init__(self):
        super().__post_init__()
        b = self.sub_batch
        check_int("sub_batch", b, lo=1)
        if not isinstance(self.replace, (bool, np.bool_)):
            raise ValueError(f"replace must be True or False, got {self.replace!r}")

    def check_batch_size(self, batch_size: int) -> None:
        if not self.replace and self.sub_batch > batch_size:
            raise ValueError(f"sub_batch={self.sub_batch} exceeds batch_size={batch_size} (sampling without "
                             "replacement)")


@dataclass(frozen=True, repr=False)
class EchoedNesterov(Optimizer):
    """Nesterov's accelerated gradient with momentum carried across batches.

    momentum="nesterov" uses μ_k = k/(k+3) (k = global step from 0; the schedule of
    Nesterov's method for convex functions); a number μ ∈ [0, 1) is a constant momentum.
    """

    name = "echoed_nesterov"

    lr: LearningRate
    momentum: Union[str, float] = "nesterov"

    def __post_init__(self):
        super().__post_init__()
        if self.momentum != "nesterov":
            try:
                _fraction("momentum", self.momentum)
            except ValueError:
                raise ValueError(f"momentum must be 'nesterov' or a number in [0, 1), got {self.momentum!r}") from None

    def kernel_hyper(self) -> np.ndarray:
        return np.array([-1.0 if self.momentum == "nesterov" else float(self.momentum)])  # μ < 0: μ_k = k/(k+3)


@dataclass(frozen=True, repr=False)
class EchoedProx(Optimizer):
    """K_t gradient steps (step lr = γ) on f_S(u) + (λ/2)‖u − w_{t−1}‖² for each fresh batch."""

    name = "echoed_prox"

    lr: LearningRate
    lam: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        check_real("lam", self.lam, lo=0.0)


@dataclass(frozen=True, repr=False)
class EchoedHeavyBall(Optimizer):
    """Polyak's heavy ball as `torch.optim.SGD(momentum=μ)`: v ← μv + g, w ← w − ηv.

    No dampening and no Nesterov variant; the velocity starts at 0 (so the first step
    is v = g, as torch's) and is carried across fresh batches, as in a training loop.
    No theorem of the paper covers it.
    """

    name = "echoed_heavy_ball"

    lr: LearningRate
    momentum: float = 0.9

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "momentum", _fraction("momentum", self.momentum))


@dataclass(frozen=True, repr=False)
class EchoedAdam(Optimizer):
    """Adam as `torch.optim.Adam(betas, eps)`: bias-corrected moments, ε outside the square root.

    m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², w ← w − (η/(1−β₁^{k+1}))·m/(√v/√(1−β₂^{k+1}) + ε),
    k the global step from 0; m, v and k are carried across fresh batches. No theorem
    of the paper covers it.
    """

    name = "echoed_adam"

    lr: LearningRate
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self):
        super().__post_init__()
        _check_adam(self)

    def config(self) -> dict:
        return {"beta1": self.betas[0], "beta2": self.betas[1], "eps": self.eps}

    @classmethod
    def from_config(cls, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        return cls(lr=lr, betas=(beta1, beta2), eps=eps)


@dataclass(frozen=True, repr=False)
class EchoedAdamW(Optimizer):
    """AdamW as `torch.optim.AdamW(betas, eps, weight_decay)`: Adam with decoupled weight decay.

    Each step first shrinks the iterate, w ← (1 − ηλ)w with λ = `weight_decay`, then takes
    Adam's step (`EchoedAdam`) with the gradient g taken before the shrink; λ never enters
    g, m or v (the problem's l2 term still does, as torch's coupled one would). No theorem
    of the paper covers it.
    """

    name = "echoed_adamw"

    lr: LearningRate
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 1e-2

    def __post_init__(self):
        super().__post_init__()
        _check_adam(self)
        object.__setattr__(self, "weight_decay", check_real("weight_decay", self.weight_decay, lo=0.0))

    def config(self) -> dict:
        return {"beta1": self.betas[0], "beta2": self.betas[1], "eps": self.eps, "weight_decay": self.weight_decay}

    @classmethod
    def from_config(cls, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2):
        return cls(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)


def _check_adam(spec) -> None:
    """Validate and normalise Adam's betas and eps on a frozen spec."""
    b = spec.betas
    if not isinstance(b, (tuple, list)) or len(b) != 2:
        raise ValueError(f"betas must be a pair (beta1, beta2) of numbers in [0, 1), got {b!r}")
    object.__setattr__(spec, "betas", (_fraction("betas[0]", b[0]), _fraction("betas[1]", b[1])))
    object.__setattr__(spec, "eps", check_real("eps", spec.eps, lo=0.0, lo_open=True))


@dataclass(frozen=True)
class Method:
    """One row of the method table: everything the other layers ask of a method."""

    name: str
    """Its config name (``optimizer.method``) and the spec's ``name``."""
    spec: type
    code: int
    """The kernel's code: which update branch of `echosim.training.kernel` it runs."""
    title: str
    """A short description (plot titles, docs)."""
    hyper: tuple = ()
    """The config keys of the floats its update reads, in order (the kernel's ``hyper[0]``,
    ``hyper[1]``, ...; `Optimizer.kernel_hyper` gives their values)."""
    state: tuple = ()
    """Extra state carried across fresh batches, (name, start) pairs: start "w0" (a copy of
    the starting point) or "zero"; the kernel's ``S[0]``, ``S[1]``, ... in order."""
    sub_batches: bool = False
    """Its steps use random sub-batches of the fresh batch (the kernel's sub-batch rows)."""
    one_step: bool = False
    """It takes exactly one step per fresh batch (K_t = 1)."""
    bound: str | None = None
    """The `theory` function bounding E[F(ŵ)] − F* for it, or None (no theorem covers it)."""
    bound_needs: tuple = ()
    """(config key, value) pairs the bound assumes, e.g. Nesterov's own momentum schedule."""
    lr_rule: str | None = None
    """The `theory` function of the bound's own step size (``lr = "theory"``), or None."""
    iterate: str = "last"
    """The iterate its bound is about, which plots compare with the bound: "last", "avg" or "end_avg"."""
    lr_grid: tuple | None = None
    """The planner's learning-rate grid (start, stop, per decade) where 1/β does not set its
    step (`ADAPTIVE_LRS`), or None: a grid from the problem's smoothness
    (`echosim.planner.simulated.lr_grid_for`)."""

    @property
    def fields(self) -> tuple[str, ...]:
        """Its config keys besides lr (``[optimizer]``), from the spec."""
        return tuple(self.defaults())

    def defaults(self) -> dict:
        """Its hyper-parameters' defaults under their config keys."""
        return self.spec(lr=0.0).config()

    def build(self, lr, hyper: dict) -> Optimizer:
        """The spec from lr and its config keys (missing keys take their defaults)."""
        return self.spec.from_config(lr, **{k: hyper[k] for k in self.fields if k in hyper})

    def bound_for(self, hyper: dict) -> str | None:
        """The bound of a run with these hyper-parameters (config keys), or None where no theorem covers it."""
        if self.bound is None:
            return None
        given = {**self.defaults(), **hyper}
        return self.bound if all(given.get(k) == v for k, v in self.bound_needs) else None


METHODS: dict[str, Method] = {m.name: m for m in (
    Method("minibatch_sgd", MinibatchSGD, GD, "minibatch SGD (K = 1)", one_step=True,
           bound="echoed_gd_bound", lr_rule="echoed_gd_lr", iterate="avg"),
    Method("echoed_gd", EchoedGD, GD, "echoed GD", bound="echoed_gd_bound", lr_rule="echoed_gd_lr", iterate="avg"),
    Method("echoed_sgd", EchoedSGD, GD, "echoed SGD (sub-batches)", sub_batches=True, lr_rule="echoed_gd_lr"),
    Method("echoed_prox", EchoedProx, PROX, "echoed prox", hyper=("lam",), bound="echoed_prox_bound",
           lr_rule="echoed_prox_param", iterate="end_avg"),
    Method("echoed_nesterov", EchoedNesterov, NESTEROV, "echoed AGD (Nesterov)", hyper=("momentum",),
           state=(("w_prev", "w0"),), bound="echoed_agd_bound", bound_needs=(("momentum", "nesterov"),),
           lr_rule="echoed_agd_lr"),
    Method("echoed_heavy_ball", EchoedHeavyBall, HEAVY_BALL, "echoed heavy ball (torch SGD momentum)",
           hyper=("momentum",), state=(("velocity", "zero"),)),
    Method("echoed_adam", EchoedAdam, ADAM, "echoed Adam (torch Adam)", hyper=("beta1", "beta2", "eps"),
           state=(("m", "zero"), ("v", "zero")), lr_grid=ADAPTIVE_LRS),
    Method("echoed_adamw", EchoedAdamW, ADAMW, "echoed AdamW (torch AdamW)",
           hyper=("beta1", "beta2", "eps", "weight_decay"), state=(("m", "zero"), ("v", "zero")),
           lr_grid=ADAPTIVE_LRS),
)}
"""The registry of optimizer methods: config name → row. Nothing else lists methods."""
DEFAULT_METHOD = "echoed_gd"
"""The method of a config, a plot or a plan that names none (a row of `METHODS`)."""

HYPER_FIELDS = {
    "sub_batch": dict(kind="int", lo=1, doc="rows per step (a random sub-batch of the fresh batch)"),
    "replace": dict(kind="bool", doc="sub-batch rows drawn with replacement"),
    "momentum": dict(kind="momentum", doc="μ: 'nesterov' (μ_k = k/(k+3), echoed_nesterov only) or a constant "
                                          "in [0, 1)"),
    "lam": dict(kind="float", lo=0, doc="prox weight λ"),
    "beta1": dict(kind="float", lo=0, hi=1, hi_open=True, doc="Adam's β₁ (torch's betas[0])"),
    "beta2": dict(kind="float", lo=0, hi=1, hi_open=True, doc="Adam's β₂ (torch's betas[1])"),
    "eps": dict(kind="float", lo=0, lo_open=True, doc="Adam's ε, added outside the square root"),
    "weight_decay": dict(kind="float", lo=0, doc="AdamW's decoupled weight decay λ: w ← (1 − ηλ)w before each "
                                                 "step (torch's AdamW)"),
}
"""The config keys of the methods' hyper-parameters: type, range and meaning (the
config schema reads them; each method's defaults come from its spec)."""



def check_rows(methods: dict) -> None:
    """ValueError unless every row of `methods` is whole: its spec names it, its ``hyper``
    keys are its config keys and `Optimizer.kernel_hyper` gives one float per key, its
    state starts are known, and every config key has its field. Run on `METHODS` at import;
    the kernel checks the codes, hyper-parameters and state against its branches at its own."""
    for name, row in methods.items():
        if row.name != name or row.spec.name != name:
            raise ValueError(f"method row {name!r}: its name ({row.name!r}) and its spec's ({row.spec.name!r}) "
                             f"must be {name!r}")
        unknown = set(row.hyper) - set(row.fields)
        if unknown:
            raise ValueError(f"method {name!r}: hyper names {sorted(unknown)}, which are not its config keys")
        n = len(row.spec(lr=0.0).kernel_hyper())
        if n != len(row.hyper):
            raise ValueError(f"method {name!r}: kernel_hyper() gives {n} floats, its row's hyper names "
                             f"{len(row.hyper)}")
        if any(start not in ("w0", "zero") for _, start in row.state):
            raise ValueError(f"method {name!r}: a state starts as 'w0' or 'zero', got {row.state!r}")
        if row.lr_grid is not None and len(row.lr_grid) != 3:
            raise ValueError(f"method {name!r}: lr_grid is (start, stop, per decade), got {row.lr_grid!r}")
    keys = {k for m in methods.values() for k in m.fields}
    if keys != set(HYPER_FIELDS):
        raise ValueError(f"config keys without their HYPER_FIELDS entry: {sorted(keys - set(HYPER_FIELDS))}; "
                         f"HYPER_FIELDS entries of no method: {sorted(set(HYPER_FIELDS) - keys)}")


check_rows(METHODS)


def get_method(name) -> Method:
    """The row of method `name`; ValueError naming the allowed ones otherwise."""
    if not isinstance(name, str) or name not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {name!r}")
    return METHODS[name]
