"""Echo policy "auto": greedy echoing under a cap tuned online from the loss of each
fresh batch's first step, so that echoed steps are taken only while they speed
training up. The derivation, what it assumes and when it can be fooled are in
docs/background/auto-echo.md; in short:

- Each fresh batch's first-step loss y_t is measured before the model has seen the
  batch: an unbiased, noisy reading of the population loss L at time tau_t.
- If L obeys dL/dtau = -r_c(L) under cap c (the loss is the state that matters), the
  wall-clock to reach a target from L_0 is the integral of dL / r_c(L), and it is
  smallest when, at every L, the cap with the largest rate r_c(L) is used. So the
  policy keeps a *base* cap and compares it with a neighbour on blocks of ``window``
  fresh batches, A-B-A: the neighbour's slope of y against tau minus the mean of the
  two base blocks around it (which cancels a rate drifting linearly with L). A
  difference beyond ``z`` standard errors moves the base cap.
- When the base cap stops making progress (the slope over two blocks is not
  significantly negative: a plateau, where a smaller cap settles lower) it halves the
  echo taken, down to K = 1 over successive stalls. Otherwise it probes at doubling intervals (so a good cap costs few
  probes), by half of the echo actually taken or, where the cap bound K_t, twice the
  cap (below a plateau only while the loss still falls fast, and not after two lost
  probes). It starts at the top (greedy).

The class is plain Python, deterministic given its inputs (batch indices, losses and
clock readings), O(1) per fresh batch, and is the one decision code behind both
`echosim.echoing` (a real loop) and the simulator's "auto" policy.

Examples
--------
>>> a = AutoEcho(max_echo=8, window=4)
>>> a.cap(0, 0.0)
8
>>> for t in range(12):                    # the loss falls steadily: keep echoing
...     c = a.cap(t, float(t))
...     a.observe(t, 1.0 - 0.05 * t + 0.01 * (-1) ** t, float(t))
...     a.batch_done(c)
>>> a.cap(12, 12.0), a.decisions
(8, [])
"""

from __future__ import annotations

import math
import numbers

__all__ = ["AutoEcho", "AUTO_OPTIONS", "AUTO_DEFAULTS"]

AUTO_OPTIONS = {"window": (2, 10_000), "z": (0.0, 10.0)}
"""The options of policy "auto" and their allowed ranges (inclusive)."""
AUTO_DEFAULTS = {"window": 8, "z": 1.0}
"""Their defaults (`AutoEcho`'s)."""


class _Block:
    """Sums for the least-squares slope of y against tau over one block, and its echo."""

    __slots__ = ("cap", "role", "n", "st", "sy", "stt", "sty", "sdd", "last", "k_sum", "k_at_cap", "batches")

    def __init__(self, cap: int, role: str):
        self.cap, self.role = cap, role
        self.n = 0
        self.st = self.sy = self.stt = self.sty = self.sdd = 0.0
        self.last = None
        self.k_sum = 0
        self.k_at_cap = 0
        self.batches = 0

    def merged(self, other: "_Block") -> "_Block":
        """This block and `other` (an earlier one at the same cap) as one."""
        m = _Block(self.cap, self.role)
        for name in ("n", "st", "sy", "stt", "sty", "sdd", "k_sum", "k_at_cap", "batches"):
            setattr(m, name, getattr(self, name) + getattr(other, name))
        m.last = self.last
        return m

    def add(self, tau: float, y: float) -> None:
        self.n += 1
        self.st += tau
        self.sy += y
        self.stt += tau * tau
        self.sty += tau * y
        if self.last is not None:
            self.sdd += (y - self.last) ** 2
        self.last = y

    def fit(self):
        """(slope, S_tt) of the least-squares line, or None with fewer than 3 points."""
        if self.n < 3:
            return None
        n = self.n
        s_tt = self.stt - self.st * self.st / n
        if not s_tt > 0:
            return None
        return (self.sty - self.st * self.sy / n) / s_tt, s_tt


class AutoEcho:
    """The echo cap of policy "auto" (see the module docstring).

    Call `cap` when a fresh batch begins, `observe` with its first step's loss,
    `batch_done` with the steps it got, `diverged` on a non-finite loss.

    Parameters
    ----------
    max_echo : int
        The largest cap (greedy's bound), >= 1.
    window : int
        Fresh batches per block, >= 2 (default 8).
    z : float
        Standard errors a difference of slopes must pass to move the cap, and that
        a block's slope must fall short of to count as a stall (default 1.0).
    """

    def __init__(self, max_echo: int = 64, *, window: int = AUTO_DEFAULTS["window"], z: float = AUTO_DEFAULTS["z"]):
        if isinstance(max_echo, bool) or not isinstance(max_echo, numbers.Integral) or max_echo < 1:
            raise ValueError(f"max_echo: expected an integer >= 1, got {max_echo!r}")
        lo, hi = AUTO_OPTIONS["window"]
        if isinstance(window, bool) or not isinstance(window, numbers.Integral) or not lo <= window <= hi:
            raise ValueError(f"auto.window: expected an integer in {lo}..{hi} (fresh batches per block), "
                             f"got {window!r}")
        lo, hi = AUTO_OPTIONS["z"]
        if isinstance(z, bool) or not isinstance(z, numbers.Real) or not (math.isfinite(z) and lo <= z <= hi):
            raise ValueError(f"auto.z: expected a number in {lo:g}..{hi:g} (standard errors), got {z!r}")
        self.max_echo = int(max_echo)
        self.window = int(window)
        self.z = float(z)
        self.base = self.max_echo
        self.decisions: list[dict] = []
        self._block = _Block(self.base, "base")
        self._prev_base = None   # the base block before a probe (A of A-B-A)
        self._probe = None       # the probe block awaiting its closing base block
        self._gap = 4            # base blocks before the next probe (doubles after each kept cap)
        self._stalled = False    # the base cap came from a stall
        self._up_lost = 0        # probes up lost since then
        self._since_probe = 0
        self._next_dir = "down"
        self._noise = None       # pooled residual variance of y about the block lines
        self._noise_df = 0
        self._prev_at_base = None  # the base block before the last one (the stall test spans both)
        self._reported = False
        self._dead = False
        self._t = -1

    # ---- inputs

    def cap(self, t: int, tau: float) -> int:
        """The cap for fresh batch `t`, beginning at loop time `tau` (seconds)."""
        self._t = t
        if self._dead:
            return 1
        if self._block.batches >= self.window:
            self._close_block(t)
        return self._block.cap

    def cap_holds(self) -> int:
        """Fresh batches, from the one `cap` was last called for (included), that get
        that cap whatever is observed meanwhile (the rest of the block; a non-finite loss
        aside): a simulator may run the pipeline that far ahead before asking again."""
        return max(1, self.window - self._block.batches)

    def observe(self, t: int, loss: float, tau: float) -> None:
        """The first step's loss on fresh batch `t`, taken at loop time `tau`."""
        self._reported = True
        self._block.add(float(tau), float(loss))

    def batch_done(self, steps: int) -> None:
        """Fresh batch done after `steps` steps (K_t)."""
        b = self._block
        b.batches += 1
        b.k_sum += steps
        b.k_at_cap += steps >= b.cap

    def diverged(self) -> None:
        """A non-finite loss: K = 1 from now on."""
        if not self._dead:
            self._dead = True
            self._log("diverged", cap=1)

    # ---- decisions

    def _pool(self, b: _Block) -> None:
        """Update the variance of a batch loss about the trend from block b's successive
        differences (half their mean square: insensitive to a smooth trend, unlike the
        residuals of a line through a curving loss). Recent blocks weigh more: the noise of
        a batch loss shrinks as the loss does."""
        df = b.n - 1
        if df < 2:
            return
        v = b.sdd / (2 * df)
        if self._noise is None:
            self._noise, self._noise_df = v, df
        else:
            w = min(df / (self._noise_df + df), 0.5)
            self._noise = (1 - w) * self._noise + w * v
            self._noise_df = min(self._noise_df + df, 64)

    def _slope(self, b: _Block):
        """(slope, standard error) of block b, or None."""
        fit = b.fit()
        if fit is None or self._noise is None:
            return None
        slope, s_tt = fit
        return slope, math.sqrt(self._noise / s_tt)

    def _close_block(self, t: int) -> None:
        b = self._block
        self._pool(b)
        nxt_cap, nxt_role = self.base, "base"
        if not self._reported:
            pass  # nothing to act on: greedy
        elif b.role == "probe":
            self._probe = b
            self._prev_at_base = None  # the stall test spans consecutive base blocks only
        else:
            if self._probe is not None and self._prev_base is not None:
                self._decide(self._prev_base, self._probe, b, t)
                self._probe = None
            self._since_probe += 1
            probe = self._after_base(b)
            if probe is not None:
                self._prev_base = b
                nxt_cap, nxt_role = probe, "probe"
        self._block = _Block(self.base if nxt_role == "base" else nxt_cap, nxt_role)

    def _after_base(self, b: _Block):
        """A base block closed: step down on a stall; the cap to probe next, or None."""
        s = self._slope(b)
        if s is None or b.cap != self.base:  # A-B-A needs both A blocks at the base cap
            return None
        slope, se = s
        eff = b.k_sum / b.batches if b.batches else float(self.base)
        prev, self._prev_at_base = self._prev_at_base, b
        two = self._slope(b.merged(prev)) if prev is not None and prev.cap == b.cap else None
        if two is not None and two[0] > -self.z * two[1]:
            # A stall: no significant progress over the last two blocks. On a plateau the stability term
            # grows with K (each batch is fitted down to its own noise), so a smaller cap settles lower.
            # Halve the echo taken rather than drop to 1: slow progress under noisy losses reads as a
            # stall too, and there halving costs at most twofold; a true plateau is left in
            # log2(mean echo) such steps of two blocks each.
            if self.base > 1 and eff > 1.0:
                old = self.base
                self.base = _pow2_at_most(max(1.0, eff / 2.0))
                self._prev_at_base = None  # the next stall test spans two blocks at the new cap
                self._gap, self._since_probe, self._stalled = 4, 0, True
                self._log("step down", cap=self.base, previous=old, why="stall", slope=two[0], se=two[1],
                          mean_echo=eff)
            return None
        if self._since_probe < self._gap:
            return None
        bound = b.k_at_cap * 2 >= b.batches  # the cap bound K_t on half the batches or more
        down = _pow2_at_most(max(1.0, eff / 2.0)) if eff > 1.0 else None  # a cap above eff changes nothing
        up = min(self.base * 2, self.max_echo) if bound and self.base < self.max_echo else None
        # Below a plateau a probe up lifts the loss towards the plateau it came from: probe up
        # there only while the loss still falls fast (the stall was perhaps slow progress misread),
        # and give up after two lost probes.
        if self._stalled and (slope > -2 * self.z * se or self._up_lost >= 2):
            up = None
        for d in (("down", "up") if self._next_dir == "down" else ("up", "down")):
            c = down if d == "down" else up
            if c is not None and c != self.base:
                self._since_probe = 0
                self._next_dir = "up" if d == "down" else "down"
                self._log("probe", cap=c, slope=slope, se=se, mean_echo=eff)
                return c
        return None

    def _decide(self, a1: _Block, p: _Block, a2: _Block, t: int) -> None:
        s1, sp, s2 = self._slope(a1), self._slope(p), self._slope(a2)
        if s1 is None or sp is None or s2 is None:
            self._log("keep", cap=self.base, probe=p.cap, why="too few losses to compare")
            self._gap *= 2
            return
        d = sp[0] - 0.5 * (s1[0] + s2[0])
        se = math.sqrt(sp[1] ** 2 + 0.25 * (s1[1] ** 2 + s2[1] ** 2))
        zd = d / se if se > 0 else 0.0
        est = {"slope_base": 0.5 * (s1[0] + s2[0]), "slope_probe": sp[0], "difference": d, "se": se,
               "z": zd}
        if zd < -self.z:
            old = self.base
            self.base = p.cap
            self._gap = 2
            self._stalled, self._up_lost = False, 0
            self._next_dir = "down" if p.cap < old else "up"
            self._log("switch", cap=self.base, probe=p.cap, previous=old, **est)
        else:
            self._gap *= 2
            self._up_lost += p.cap > self.base
            self._log("keep", cap=self.base, probe=p.cap,
                      why="the probe was slower" if zd > self.z else "no significant difference", **est)

    def _log(self, action: str, **info) -> None:
        self.decisions.append({"batch": self._t, "action": action, "base": self.base, **info})

    # ---- what it did

    def describe(self) -> dict:
        """The cap in force and a count of what was decided."""
        counts: dict = {}
        for d in self.decisions:
            counts[d["action"]] = counts.get(d["action"], 0) + 1
        return {"cap": 1 if self._dead else self._block.cap, "base_cap": self.base,
                "losses_reported": self._reported, "decisions": counts,
                "last": dict(self.decisions[-1]) if self.decisions else None}


def _pow2_at_most(x: float) -> int:
    """The largest power of two <= x (x >= 1)."""
    return 1 << (int(math.floor(math.log2(x))) if x >= 1 else 0)
