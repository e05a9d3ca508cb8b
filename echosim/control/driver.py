"""`Driver`: a loop's events in, `Observation`s to its controller in one fixed order.

The events of fresh batch t, as a training loop produces them:

    begin(t, tau)          batch t's first step begins at loop time tau -> its cap
    first_loss(t, y)       that step's loss (computed before the model saw batch t)
    lagged_loss(t, v)      optional: batch t's loss at the weights batch t-1 started from
    probe(t, v)            optional: a held-out loss at the start of batch t
    end(t, K_t)            batch t got K_t steps

`begin(t)` first hands the controller the observation of batch t-2, complete by then
(its duration needs tau_{t-1}, its progress y_{t-1}), then asks it for batch t's cap.
A loss that is not finite, or so large that squaring it would overflow (|y| > 1e150),
means the run diverged: the controller is told once and every later cap is 1.
"""

from __future__ import annotations

import math

from echosim.control.base import Observation

__all__ = ["Driver", "diverging", "HUGE_LOSS"]

HUGE_LOSS = 1e150
"""Losses beyond this magnitude count as a diverged run (their squares would overflow)."""


def diverging(value: float) -> bool:
    """Is this loss a sign of divergence (not finite, or beyond `HUGE_LOSS` in magnitude)?"""
    return not (math.isfinite(value) and abs(value) <= HUGE_LOSS)


class Driver:
    """Feeds one controller from one loop (see the module docstring)."""

    __slots__ = ("controller", "dead", "_pending", "_t")

    def __init__(self, controller):
        self.controller = controller
        self.dead = False
        self._pending: dict = {}
        self._t = -1

    def begin(self, t: int, tau: float) -> int:
        """Batch t begins at `tau`: its cap (1 after a divergence)."""
        if t != self._t + 1:
            raise ValueError(f"begin: fresh batches begin in order; expected batch {self._t + 1}, got {t}")
        prev = self._pending.get(t - 1)
        if prev is not None:
            prev[1] = float(tau)
        self._emit(t - 2)
        self._t = t
        c = 1 if self.dead else int(self.controller.cap(t))
        # [start, end, cap, steps, y, lagged, probe]
        self._pending[t] = [float(tau), math.nan, c, 0, math.nan, math.nan, math.nan]
        return c

    def holds(self) -> int:
        """Batches from the last `begin` (included) that keep its cap (see `Controller.holds`)."""
        return 1 << 62 if self.dead else max(1, int(self.controller.holds()))

    def first_loss(self, t: int, y: float) -> None:
        if self._check(y):
            self._pending[t][4] = float(y)

    def lagged_loss(self, t: int, v: float) -> None:
        if self._check(v):
            self._pending[t][5] = float(v)

    def probe(self, t: int, v: float) -> None:
        if self._check(v):
            self._pending[t][6] = float(v)

    def end(self, t: int, steps: int) -> None:
        self._pending[t][3] = int(steps)

    def diverged(self) -> None:
        """The run diverged: K = 1 from now on (said to the controller once)."""
        if not self.dead:
            self.dead = True
            self.controller.diverged()

    def _check(self, v: float) -> bool:
        if diverging(v):
            self.diverged()
            return False
        return True

    def _emit(self, t: int) -> None:
        row = self._pending.pop(t, None)
        if row is None or self.dead:
            return
        nxt = self._pending.get(t + 1)
        y1 = nxt[4] if nxt is not None else math.nan
        paired = nxt[5] - nxt[4] if nxt is not None else math.nan
        probe1 = nxt[6] if nxt is not None else math.nan
        self.controller.observe(Observation(
            batch=t, start=row[0], duration=row[1] - row[0], steps=row[3], cap=row[2], first_loss=row[4],
            next_first_loss=y1, paired_progress=paired, probe=row[6],
            next_probe=probe1))
