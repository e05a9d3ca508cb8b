"""The controller protocol, its observation, and the two controllers that need no data
(the registry of all of them is `echosim.control.registry`).

A controller is asked `cap(t)` when fresh batch t begins (once per batch, in order) and
told `observe(obs)` when everything about an earlier batch is known. Observations
arrive with a lag: the one of batch t needs the first-step loss of batch t+1, so the
driver hands it over when batch t+2 begins (`echosim.control.driver`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from echosim._validate import check_int

__all__ = ["Observation", "Controller", "Fixed", "Greedy", "HOLDS_FOREVER", "MAX_ECHO"]

MAX_ECHO = 64
"""The default cap on K_t under greedy and auto (``max_echo``): its one home."""

HOLDS_FOREVER = 1 << 62
"""`holds()` of a controller whose cap never changes."""


@dataclass(frozen=True)
class Observation:
    """What the loop measured about fresh batch t (times in the loop's seconds; NaN where
    the loop did not report that signal).

    Attributes
    ----------
    batch : int
        t.
    start : float
        tau_t, when batch t's first step began.
    duration : float
        tau_{t+1} - tau_t: the wall-clock batch t occupied, its steps and the wait after them.
    steps, cap : int
        K_t, and the cap it was taken under.
    first_loss, next_first_loss : float
        y_t and y_{t+1}: the first step's loss on batch t and on batch t+1, each measured
        before the model trained on that batch.
    paired_progress : float
        p_t = l(w_{t-1}; S_{t+1}) - l(w_t; S_{t+1}): the loss of batch t+1 at the weights
        batch t started from minus its loss after batch t's steps (the paired next-batch
        progress; the examples are the same, so their noise cancels).
    probe, next_probe : float
        A held-out probe loss taken at the start of batch t, and of batch t+1.
    """

    batch: int
    start: float
    duration: float
    steps: int
    cap: int
    first_loss: float = math.nan
    next_first_loss: float = math.nan
    paired_progress: float = math.nan
    probe: float = math.nan
    next_probe: float = math.nan


class Controller(Protocol):
    """What the driver needs of a controller."""

    exact: bool
    """True if the cap is the exact number of steps (fixed K), False if it bounds greedy's K_t."""
    decisions: list

    def cap(self, t: int) -> int: ...

    def observe(self, obs: Observation) -> None: ...

    def holds(self) -> int:
        """Fresh batches, from the one `cap` was last asked for (included), that keep that cap
        whatever is observed meanwhile: a simulator may run the pipeline that far ahead."""
        ...

    def diverged(self) -> None: ...

    def describe(self) -> dict: ...


def _positive_int(name: str, value) -> int:
    return check_int(name, value, 1)


class _Constant:
    """A cap that never changes: it needs no observation."""

    exact = False

    def __init__(self, cap: int):
        self._cap = cap
        self.decisions: list = []

    def cap(self, t: int) -> int:
        return self._cap

    def observe(self, obs: Observation) -> None:
        pass

    def holds(self) -> int:
        return HOLDS_FOREVER

    def diverged(self) -> None:
        pass

    def describe(self) -> dict:
        return {"cap": self._cap}


class Fixed(_Constant):
    """Exactly K steps on every fresh batch (Choi et al.'s batch echoing; K = 1 is sync)."""

    exact = True

    def __init__(self, K: int = 1):
        super().__init__(_positive_int("K", K))


class Greedy(_Constant):
    """Echo while the next batch is not ready, at most ``max_echo`` steps per batch."""

    def __init__(self, max_echo: int = MAX_ECHO):
        super().__init__(_positive_int("max_echo", max_echo))
