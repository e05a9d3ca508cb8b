"""Discrete-event simulation of a laggard data pipeline: when is each fresh batch
ready, and how many optimizer steps use it?

`Pipeline` describes the system, `simulate` runs it and returns a `Schedule` of
plain NumPy arrays, the whole interface to the optimizer kernels. The event loop is
Numba code (`echosim.pipeline.kernel`), compiled on first use, not at import.

The model
---------
Loader. ``workers`` = W loader workers form a pool. Whenever a worker is free it
starts the next batch ("production index" i = 0, 1, 2, ...), which takes
``arrival`` time (i.i.d. draws, in production order). Finished batches go to a
prefetch buffer of capacity ``prefetch`` = C. When the buffer is full a worker
blocks, and ``blocking`` says where:

- ``"after"`` (blocking after service, the default; tf.data's prefetch): a worker
  always starts a batch when free, and if the buffer is full when it finishes, it
  holds the finished batch, blocked, until a slot frees (held batches enter first
  come, first served). At most W + C batches exist at once.
- ``"before"`` (blocking before service; PyTorch's DataLoader, where C =
  ``prefetch_factor * num_workers`` bounds the outstanding batches): a worker
  starts a batch only if it can reserve a slot, i.e. while batches in service plus
  batches in the buffer are fewer than C. With C < W only C workers can be busy.

Delivery. ``"ordered"``: fresh batch t is production index t and is not handed
over before batch t-1 (PyTorch's DataLoader). A batch that finishes early waits in
the buffer (a reorder buffer) for its turn, occupying a slot: under ``"before"``
its reserved one; under ``"after"`` it may enter out of order only while it leaves
one slot free, the last free slot being kept for the next batch in production
order (without that rule the buffer could fill with later batches and deadlock).
So with C = 1 and ``"after"`` batches enter strictly in order and early finishers
hold their batch (head-of-line blocking). ``"unordered"``: a batch is available as
soon as it enters the buffer (tf.data with ``deterministic=False``), and the fresh
batch index t is the order of delivery, so the data identity of batch t (in
`echosim.training.problems`) follows delivery order, not production order.

Accelerator. It takes fresh batches in order; taking one frees its buffer slot.
Each optimizer step takes ``step_time`` (a number or a service-time process, for
jitter). ``switch_overhead`` = h is a fixed time spent when the accelerator
switches to a new fresh batch (the host-to-device copy) before its first step; it
counts neither as busy (compute) nor as idle, and `Schedule.summary` reports it as
``switch_fraction``. Under example echoing every step's batch is assembled on the
host, so h is paid before every step.

Policies (``policy``):

- ``"sync"``: one step per fresh batch; wait idle when none is ready.
- ``"fixed"``: K_t steps on fresh batch t (Choi et al.'s batch echoing with echo
  factor e = ``echo``). A non-integer e is rounded at random,
  K_t = floor(e) + Bernoulli(e - floor(e)), so E[K_t] = e. ``echo=1`` is "sync".
- ``"greedy"``: echo while waiting. After each step on batch t, if batch t+1 is
  ready (or ``max_echo`` steps were taken) switch to it, waiting idle if it is
  not ready yet; otherwise step on batch t again. So 1 <= K_t <= max_echo. The last
  batch, with no next one to wait for, gets exactly one step.
- ``"example"``: Choi et al.'s example echoing. Each fresh example is repeated e
  times (per-example random rounding as above) into a shuffle buffer of
  ``shuffle_buffer`` = S examples; every step draws a batch of B examples from it,
  so a step mixes fresh and repeated examples. The shuffle stage pulls fresh
  batches from the prefetch buffer only when it needs them: the buffer is filled
  to S before each example is drawn (fewer once the input is exhausted), so step j
  needs min(S + (j+1)B - 1, total) echoed examples pulled; the remainder of fewer
  than B examples at the very end is dropped.
- ``"auto"``: greedy under a cap c_t on K_t per fresh batch (1 <= c_t <= ``max_echo``),
  which `echosim.control.auto.AutoEcho` decides by comparing caps on the first-step
  losses of the batches before it (options ``window``, ``alpha``, ``min_effect``, ``start``). The caps depend on the training
  run, so the pipeline is simulated with it (`echosim.training.runner.run_coupled`),
  or with given caps (``simulate(..., caps=)``, which also caps "greedy" per batch).

Tie rule. At equal times, loader completions come first (among themselves by
production index), then the accelerator decides. So a batch finishing exactly when a step ends counts
as ready (greedy switches to it; sync starts it at once). A slot freed by the
accelerator at time t is reused by the loader at time t.

Blocked workers (``loader_blocked_fraction`` in `Schedule.summary`): under
``"after"`` the workers holding a finished batch; under ``"before"`` the idle
workers while batches remain to be started (they lack a free slot).

Closed forms (checked in the tests). With deterministic times and W = 1, policy
"fixed" spends exactly time(e) = `max(t_up, e*t_down + h)` per fresh batch in steady
state, Choi et al.'s time(e) (with h = 0). With W workers the long-run time per
batch is `max(t_up/W_busy, e*t_down + h)`, W_busy = W under "after" and min(W, C)
under "before". "greedy" with max_echo = e <= R = t_up/t_down is "fixed" with
K_t = e; with a larger max_echo it fills the idle time, mean K_t -> R, except that
with C = 1 under "before" the loader cannot run ahead (it starts batch t+1 only
when batch t is taken), so every batch takes ceil(R) steps. With several workers
batches arrive in bursts and greedy's K_t varies from batch to batch. Under
"sync" with exponential times and unordered delivery the pipeline is a
finite-capacity birth-death queue (see tests/pipeline/test_schedule.py).

Randomness. `simulate` spawns four independent streams from
``numpy.random.SeedSequence(seed)``: loader times, step times, echo rounding,
shuffle. All draws happen in NumPy; the same seed gives bitwise the same
`Schedule`.

Examples
--------
>>> from echosim.pipeline import Exponential, simulate
>>> p = Pipeline(Exponential(4.0), workers=2, prefetch=4, policy="greedy")
>>> s = simulate(p, n_batches=1000, seed=0)
>>> s.n_batches, bool(s.n_steps >= 1000), bool(s.steps_per_batch.min() >= 1)
(1000, True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from echosim._validate import check_choice, check_int, check_real, is_real
from echosim.control.auto import AUTO_DEFAULTS, AUTO_OPTIONS, check_auto_option
from echosim.control.base import MAX_ECHO
from echosim.pipeline.service_times import as_service_time
from echosim.pipeline.service_times import ServiceTime
from echosim.pipeline.sizes import check_fits

__all__ = ["Pipeline", "Policy", "POLICIES", "ECHO_POLICIES", "CAPPED_POLICIES", "MAX_ECHO", "policies_taking",
           "check_echo"]


@dataclass(frozen=True)
class Policy:
    """One echo policy: its name, its code in the event loop (`echosim.pipeline.kernel`
    takes its constants from here), the `Pipeline` parameters it takes, and the flags
    its consumers read (no module outside the pipeline branches on a policy's name).

    Flags: ``takes_echo`` (a given echo factor K sets its steps per fresh batch),
    ``capped`` (K_t follows the loader's waits, up to ``max_echo``), ``shuffles_examples``
    (every step draws B examples from a shuffle buffer of echoed examples: the schedule
    needs the batch size, counts steps rather than fresh batches, and a step may mix
    batches), ``coupled`` (its K_t depend on the training run's losses, so the pipeline
    is simulated together with the run).
    """

    name: str
    code: int
    params: tuple
    doc: str
    coupled: bool = False
    shuffles_examples: bool = False

    @property
    def takes_echo(self) -> bool:
        """Does an echo factor K (``Pipeline.echo``) set its steps per fresh batch?"""
        return "echo" in self.params

    @property
    def capped(self) -> bool:
        """Does it echo while waiting, up to ``max_echo`` steps per fresh batch?"""
        return "max_echo" in self.params

    @property
    def one_step_per_batch(self) -> bool:
        """Can it give every fresh batch exactly one step (with K = 1)? Not when it
        echoes while waiting or mixes examples across steps."""
        return not (self.capped or self.shuffles_examples)


POLICIES: dict[str, Policy] = {p.name: p for p in (
    Policy("sync", 0, (), "one step per fresh batch"),
    Policy("fixed", 1, ("echo",), "K_t steps on fresh batch t, K = echo rounded at random"),
    Policy("greedy", 2, ("max_echo",), "echo while waiting for the next batch, up to max_echo steps"),
    Policy("example", 3, ("echo", "shuffle_buffer"), "example echoing through a shuffle buffer",
           shuffles_examples=True),
    Policy("auto", 4, ("max_echo", *AUTO_OPTIONS), "greedy under an echo cap chosen online by comparing caps "
           "(echosim.control.auto)", coupled=True),
)}
"""The registry of echo policies: name → row. Nothing else lists them or their codes."""
ECHO_POLICIES = tuple(name for name, p in POLICIES.items() if p.takes_echo)
"""The policies that take an echo factor K (derived from `POLICIES`)."""
CAPPED_POLICIES = tuple(name for name, p in POLICIES.items() if p.capped)
"""The policies that echo while waiting, up to a cap: "greedy" (max_echo), "auto" (its caps)."""


def policies_taking(param: str) -> tuple[str, ...]:
    """The policies that take `Pipeline` parameter `param` (e.g. "shuffle_buffer")."""
    return tuple(name for name, p in POLICIES.items() if param in p.params)
DELIVERIES = ("ordered", "unordered")
BLOCKING = ("before", "after")



# ---------------------------------------------------------------------------
# validation: echosim._validate's checks, and K's own (its owner is the echo policy)


def check_echo(value: Any, name: str = "echo", integer: bool = False) -> float | int:
    """The echo factor K (Choi et al.'s e): a finite number >= 1, an integer where asked."""
    ok = is_real(value) and math.isfinite(value) and value >= 1
    if ok and integer and value != math.floor(value):
        raise ValueError(f"{name} must be an integer >= 1 (a non-integer echo factor needs pipeline policy "
                         f"'fixed', which rounds it at random), got {value!r}")
    if not ok:
        raise ValueError(f"{name} must be {'an integer' if integer else 'a finite number'} >= 1, got {value!r}")
    return int(value) if integer else float(value)


def _service(name: str, value: Any) -> ServiceTime:
    try:
        return as_service_time(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


@dataclass(frozen=True)
class Pipeline:
    """A data pipeline feeding an accelerator (see the module docstring for the model).

    Parameters
    ----------
    arrival : ServiceTime or float
        Time one loader worker needs per fresh batch (t_up per worker).
    workers : int
        W >= 1 loader workers.
    prefetch : int
        C >= 1, capacity of the prefetch buffer (finished batches not yet taken).
    step_time : ServiceTime or float
        Time of one optimizer step (t_down), > 0.
    policy : {"sync", "fixed", "greedy", "example", "auto"}
        How many steps use each fresh batch.
    echo : float or None
        Echo factor e >= 1 (Choi et al.'s e, Agarwal et al.'s K) for "fixed" and
        "example"; must be None for "sync" and "greedy".
    max_echo : int
        Upper bound on K_t under "greedy" and "auto" (>= 1).
    delivery : {"ordered", "unordered"}
    blocking : {"after", "before"}
        Where a worker blocks when the buffer is full.
    switch_overhead : float
        h >= 0, time to switch the accelerator to a new batch.
    shuffle_buffer : int or None
        S >= 1 examples, "example" only; None means ``batch_size * ceil(echo)``
        (about one fresh batch's echoed copies).
    window, alpha, min_effect, start : int, float, float, int or None
        "auto" only (`echosim.control.auto.AutoEcho`): fresh batches per run of its
        comparisons (default 8), the chance of any wrong move in the job (0.1), the
        relative difference in rate below which two caps count as equal (0.05), the
        cap to start from (1, at most ``max_echo``).
    """

    arrival: ServiceTime
    workers: int = 1
    prefetch: int = 2
    step_time: ServiceTime = 1.0
    policy: str = "sync"
    echo: float | None = None
    max_echo: int = MAX_ECHO
    delivery: str = "ordered"
    blocking: str = "after"
    switch_overhead: float = 0.0
    shuffle_buffer: int | None = None
    window: int | None = None
    alpha: float | None = None
    min_effect: float | None = None
    start: int | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "arrival", _service("Pipeline.arrival", self.arrival))
        set_(self, "workers", check_int("Pipeline.workers", self.workers, 1))
        check_fits("Pipeline.workers", self.workers, 24, what="the state of every loader worker")
        set_(self, "prefetch", check_int("Pipeline.prefetch", self.prefetch, 1))
        set_(self, "step_time", _service("Pipeline.step_time", self.step_time))
        set_(self, "policy", check_choice("Pipeline.policy", self.policy, tuple(POLICIES)))
        params = POLICIES[self.policy].params
        set_(self, "max_echo", check_int("Pipeline.max_echo", self.max_echo, 1))
        set_(self, "delivery", check_choice("Pipeline.delivery", self.delivery, DELIVERIES))
        set_(self, "blocking", check_choice("Pipeline.blocking", self.blocking, BLOCKING))
        set_(self, "switch_overhead", check_real("Pipeline.switch_overhead", self.switch_overhead, lo=0.0))
        e = self.echo
        if "echo" in params:
            if e is None:
                raise ValueError(f"Pipeline.echo is required for policy {self.policy!r} (a number >= 1)")
            set_(self, "echo", check_echo(e, "Pipeline.echo"))
        elif e is not None:
            raise ValueError(
                f"Pipeline.echo applies only to policies {' and '.join(map(repr, ECHO_POLICIES))}, got echo={e!r} "
                f"with policy {self.policy!r} (greedy is bounded by max_echo)"
            )
        S = self.shuffle_buffer
        if S is not None:
            if "shuffle_buffer" not in params:
                takes = policies_taking("shuffle_buffer")
                raise ValueError(
                    f"Pipeline.shuffle_buffer applies only to policy {' and '.join(map(repr, takes))}, got {S!r} "
                    f"with policy {self.policy!r}"
                )
            set_(self, "shuffle_buffer", check_int("Pipeline.shuffle_buffer", S, 1))
            check_fits("Pipeline.shuffle_buffer", self.shuffle_buffer, 8, what="the example ids it holds")
        for name in AUTO_OPTIONS:
            v = getattr(self, name)
            if name not in params:
                if v is not None:
                    takes = policies_taking(name)
                    raise ValueError(f"Pipeline.{name} applies only to policy {' and '.join(map(repr, takes))}, "
                                     f"got {v!r} with policy {self.policy!r}")
                continue
            set_(self, name, check_auto_option(name, AUTO_DEFAULTS[name] if v is None else v, "Pipeline"))
        if self.start is not None and self.start > self.max_echo:
            raise ValueError(f"Pipeline.start must be at most max_echo = {self.max_echo} (the cap 'auto' starts "
                             f"from), got {self.start}")


