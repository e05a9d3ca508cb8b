"""Echo policy "auto": greedy echoing under a cap chosen by comparing caps, with the chance
of any wrong move over the whole job bounded.

The derivation, its noise model and what each signal adds are in
docs/background/auto-echo.md; in short:

- Caps live on a ladder (1, 2, 4, ... up to ``max_echo``). The cap in force, the
  *incumbent*, starts at ``start`` (default 1: where a wrong guess costs least) and moves
  only when a test shows a neighbour on the ladder is faster.
- A test alternates the incumbent A and a challenger B (the next rung up or down) in
  runs of ``window`` fresh batches, in cycles A B B A. Each run gives a rate of
  progress per second of loop time, R = progress / duration; each cycle gives
  d = (R_A1 + R_A2 - R_B1 - R_B2) / 2, in which a rate drifting linearly in time cancels.
- Progress is measured with the best signal the loop reports: a held-out probe loss at
  the run boundaries, else the paired next-batch progress of every batch, else the
  first-step losses (the loss alone: their slope against loop time within each run, or
  for runs shorter than 6 batches the difference of the run's end points).
- The cycles' sum S_n is compared with an always-valid boundary (a normal-mixture
  confidence sequence, `echosim.control.sequential`) at level alpha_k = alpha / (k(k+1))
  for the k-th test of the job, so that P(any wrong move in the job) <= alpha. The
  variance of each d comes from the signal's noise model and, from the second cycle on,
  from the spread of the d's themselves (the larger of the two).
- The faster cap wins when the interval excludes 0; when it lies within
  +-``min_effect`` of the mean rate the two are practically equal and the smaller cap
  wins (fewer steps for the same progress). A test still open after 6 cycles is
  unresolved and the incumbent stays; a later test of that pair starts afresh (older
  evidence would be stale: how much echoing pays changes as training moves on).
- After a switch the next test, in the same direction, starts at once; otherwise the
  incumbent runs alone for as long as the last test took (twice that after each further
  test that did not move it, up to 8 times), and the next test goes the other way. An
  upward test is skipped while the incumbent does not bind K_t (the loader leaves no
  room for more steps).

Deterministic given its inputs; O(1) per fresh batch; no NumPy.

Examples
--------
>>> from echosim.control import Driver
>>> a = AutoEcho(max_echo=8, window=4)
>>> drv = Driver(a)
>>> L = 1.0
>>> for t in range(200):                  # every echoed step is worth a fresh one
...     c = drv.begin(t, float(t))         # one second per fresh batch, whatever K_t
...     drv.first_loss(t, L)
...     L *= 0.995 ** c
...     drv.end(t, c)
>>> [(d["action"], d["cap"]) for d in a.decisions if d["action"] != "test"]
[('switch', 2), ('switch', 4), ('switch', 8), ('keep', 8)]
"""

from __future__ import annotations

import math
import numbers

from echosim._validate import check_int
from echosim.control.base import MAX_ECHO
from echosim.control.sequential import mixture_boundary, rho_for, spent

__all__ = ["AutoEcho", "AUTO_OPTIONS", "AUTO_DEFAULTS", "check_auto_option"]

AUTO_OPTIONS = {"window": (2, 10_000), "alpha": (1e-6, 0.5), "min_effect": (0.0, 1.0), "start": (1, 1 << 20)}
"""The options of policy "auto" and their allowed ranges (inclusive)."""
AUTO_DEFAULTS = {"window": 8, "alpha": 0.1, "min_effect": 0.05, "start": 1}
"""Their defaults."""
_FIRST_GAP, _MAX_IDLE = 2, 8  # runs at the incumbent between tests: at least 2; up to 8x the last test's
_BURST = 6                    # cycles a test may take; then it is unresolved (a later test starts afresh)
_NOISE_MEMORY = 32            # observations the noise estimates average over (exponentially)
_MIN_CYCLES = {"paired": 1, "loss": 2, "probe": 2}
"""Cycles before any decision: one where each batch's paired progress gives the noise within
the cycle; two where the spread of the d's must check a noise model (the loss alone: its
noise may wander; a probe: no noise model at all)."""
_SLOPE_FROM = 6               # runs this long measure the loss's rate by its slope, shorter ones by their ends


def check_auto_option(name: str, value, where: str = "auto"):
    """One option of policy "auto", validated against `AUTO_OPTIONS` (ValueError naming it)."""
    if name not in AUTO_OPTIONS:
        raise ValueError(f"{where}: unknown option {name!r}; the options are {', '.join(AUTO_OPTIONS)}")
    lo, hi = AUTO_OPTIONS[name]
    what = {"window": "fresh batches per run", "alpha": "the chance of any wrong move in a job",
            "min_effect": "the smallest relative difference in rate worth acting on",
            "start": "the cap to start from"}[name]
    if name in ("window", "start"):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
            raise ValueError(f"{where}.{name}: expected an integer in {lo}..{hi} ({what}), got {value!r}")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and lo <= value <= hi):
        raise ValueError(f"{where}.{name}: expected a number in {lo:g}..{hi:g} ({what}), got {value!r}")
    return float(value)


class _Run:
    """One run of ``window`` fresh batches at one cap, and the sums its rate needs."""

    __slots__ = ("cap", "role", "first", "length", "n", "duration", "at_cap", "p_n", "p_sum", "p_ss",
                 "y0", "y_end", "probe0", "probe_end", "y_n", "st", "sy", "stt", "sty", "k_sum")

    def __init__(self, cap: int, role: str, first: int, length: int):
        self.cap, self.role, self.first, self.length = cap, role, first, length
        self.n = self.at_cap = self.p_n = self.y_n = self.k_sum = 0
        self.duration = self.p_sum = self.p_ss = self.st = self.sy = self.stt = self.sty = 0.0
        self.y0 = self.y_end = self.probe0 = self.probe_end = math.nan

    def add(self, o) -> None:
        if self.n == 0:
            self.y0, self.probe0 = o.first_loss, o.probe
        self.n += 1
        self.at_cap += o.steps >= o.cap
        self.k_sum += o.steps
        if math.isfinite(o.paired_progress):
            self.p_n += 1
            self.p_sum += o.paired_progress
            self.p_ss += o.paired_progress * o.paired_progress
        if math.isfinite(o.first_loss):  # the slope of y against loop time, from the run's start
            tau = self.duration
            self.y_n += 1
            self.st += tau
            self.sy += o.first_loss
            self.stt += tau * tau
            self.sty += tau * o.first_loss
        self.duration += o.duration
        if self.n == self.length:
            self.y_end, self.probe_end = o.next_first_loss, o.next_probe

    def slope(self):
        """(rate of fall of y = -slope, S_tt) from the run's own first-step losses, or None."""
        if self.y_n < 3:
            return None
        s_tt = self.stt - self.st * self.st / self.y_n
        if not s_tt > 0:
            return None
        return -(self.sty - self.st * self.sy / self.y_n) / s_tt, s_tt

    @property
    def closed(self) -> bool:
        return self.n == self.length


class _Sums:
    """One sequential test's cycles: each d, its model variance v, its squared cubic contrast,
    the cycle's mean rate, and the mixture's rho (set at the first cycle)."""

    __slots__ = ("d", "v", "c2", "rates", "rho")

    def __init__(self):
        self.d, self.v, self.c2, self.rates, self.rho = [], [], [], [], None


class _Test:
    """The comparison of two neighbouring caps lo < hi; its cycles' d = rate(lo) - rate(hi)."""

    __slots__ = ("k", "alpha", "lo", "hi", "cycle", "planned", "acc", "kind", "skipped", "outcome", "burst", "runs")

    def __init__(self, k: int, alpha: float, lo: int, hi: int):
        self.k, self.alpha, self.lo, self.hi = k, alpha, lo, hi
        self.cycle: list = []    # the runs of the cycle being planned (A B B A)
        self.planned: list = []  # cycles planned and not yet evaluated
        self.acc = _Sums()
        self.kind = None
        self.skipped = 0
        self.outcome = None
        self.burst = 0           # cycles evaluated (or skipped for want of a signal)
        self.runs = 0            # runs planned


class AutoEcho:
    """The echo cap of policy "auto" (see the module docstring).

    Parameters
    ----------
    max_echo : int
        The top of the ladder (greedy's bound), >= 1.
    window : int
        Fresh batches per run (default 4).
    alpha : float
        The chance of any wrong move over the whole job (default 0.1).
    min_effect : float
        Rates within this fraction of each other are practically equal (default 0.05).
    start : int
        The cap to start from (default 1; a planner's recommendation, say), <= max_echo.
    """

    exact = False

    def __init__(self, max_echo: int = MAX_ECHO, *, window: int = AUTO_DEFAULTS["window"],
                 alpha: float = AUTO_DEFAULTS["alpha"], min_effect: float = AUTO_DEFAULTS["min_effect"],
                 start: int = AUTO_DEFAULTS["start"]):
        self.max_echo = check_int("max_echo", max_echo, 1)
        self.window = check_auto_option("window", window)
        self.alpha = check_auto_option("alpha", alpha)
        self.min_effect = check_auto_option("min_effect", min_effect)
        start = check_auto_option("start", start)
        if start > self.max_echo:
            raise ValueError(f"auto.start: expected a cap in 1..max_echo = {self.max_echo}, got {start}")
        self.ladder = sorted({1 << i for i in range(self.max_echo.bit_length()) if 1 << i <= self.max_echo}
                             | {self.max_echo, start})
        self.incumbent = start
        self.decisions: list[dict] = []
        self._runs: list[_Run] = []      # runs not yet closed, oldest first
        self._run: _Run | None = None    # the run in force
        self._left = 0
        self._test: _Test | None = None
        self._tests = 0
        self._gap_left, self._idle = 0, 1
        self._direction = "up"
        self._last_at_incumbent: _Run | None = None
        self._s2 = self._p2 = None       # noise: of a first-step loss; of one batch's paired progress
        self._s2_n = self._p2_n = 0
        self._y_prev = math.nan
        self._dead = False
        self._t = -1

    # ---- the protocol

    def cap(self, t: int) -> int:
        """The cap of fresh batch `t` (asked once per batch, in order)."""
        self._t = t
        if self._dead:
            return 1
        if self._left == 0:
            self._plan(t)
        self._left -= 1
        return self._run.cap

    def holds(self) -> int:
        return 1 << 62 if self._dead else self._left + 1

    def observe(self, o) -> None:
        """Everything about one earlier fresh batch (`echosim.control.Observation`)."""
        if self._dead:
            return
        self._learn_noise(o)
        for run in self._runs:
            if run.first <= o.batch < run.first + run.length:
                run.add(o)
                break
        while self._runs and self._runs[0].closed:
            self._closed(self._runs.pop(0))

    def diverged(self) -> None:
        if not self._dead:
            self._dead = True
            self._log("diverged", cap=1)

    def describe(self) -> dict:
        counts: dict = {}
        for d in self.decisions:
            counts[d["action"]] = counts.get(d["action"], 0) + 1
        return {"cap": 1 if self._dead else (self._run.cap if self._run else self.incumbent),
                "incumbent": 1 if self._dead else self.incumbent, "tests": self._tests, "decisions": counts,
                "last": dict(self.decisions[-1]) if self.decisions else None}

    # ---- planning runs

    def _plan(self, t: int) -> None:
        test = self._test
        if test is not None and test.outcome is not None:
            self._conclude(test)
            test = self._test = None
        if test is None:
            if self._gap_left > 0:
                self._gap_left -= 1
            else:
                test = self._start_test()
        if test is None:
            self._begin_run(self.incumbent, "incumbent", t)
            return
        if len(test.cycle) == 4:
            test.cycle = []
        role = "ABBA"[len(test.cycle)]
        challenger = test.hi if self.incumbent == test.lo else test.lo
        run = self._begin_run(self.incumbent if role == "A" else challenger, role, t)
        test.runs += 1
        test.cycle.append(run)
        if len(test.cycle) == 1:
            test.planned.append(test.cycle)

    def _begin_run(self, cap: int, role: str, t: int) -> _Run:
        run = _Run(cap, role, t, self.window)
        self._run, self._left = run, self.window
        self._runs.append(run)
        return run

    def _start_test(self):
        i = self.ladder.index(self.incumbent)
        up = self.ladder[i + 1] if i + 1 < len(self.ladder) else None
        down = self.ladder[i - 1] if i > 0 else None
        last = self._last_at_incumbent
        if up is not None and last is not None and last.at_cap * 2 < last.n:
            self._log("skip", cap=self.incumbent, challenger=up, why="the cap does not bind K_t: the loader leaves "
                      "no room for more steps")
            up = None
        for direction in (("up", "down") if self._direction == "up" else ("down", "up")):
            c = up if direction == "up" else down
            if c is None:
                continue
            self._tests += 1
            test = _Test(self._tests, spent(self.alpha, self._tests), min(c, self.incumbent), max(c, self.incumbent))
            self._log("test", cap=self.incumbent, challenger=c, alpha=test.alpha)
            self._direction = direction
            self._test = test
            return test
        self._gap_left = self._rest(2 * _FIRST_GAP)
        return None

    def _rest(self, runs: int) -> int:
        """Runs at the incumbent before the next test: as many as the last test took, doubled
        after each test that did not move the cap, so testing takes a shrinking share of the job."""
        gap = max(_FIRST_GAP, runs) * self._idle
        self._idle = min(2 * self._idle, _MAX_IDLE)
        return gap

    def _conclude(self, test: _Test) -> None:
        winner = {"lower": test.lo, "higher": test.hi, "equal": test.lo}.get(test.outcome, self.incumbent)
        moved = winner != self.incumbent
        direction = "up" if winner > self.incumbent else "down"
        if moved:
            self.incumbent = winner
            self._last_at_incumbent = None
        if moved and test.outcome != "equal":
            self._direction, self._gap_left, self._idle = direction, 0, 1
        else:
            self._direction = "down" if test.outcome == "equal" else ("up" if self._direction == "down" else "down")
            self._gap_left = self._rest(test.runs)

    # ---- measuring

    def _learn_noise(self, o) -> None:
        # second differences: a trend that is locally linear cancels, white noise of variance s2
        # gives E[(y0 - 2 y1 + y2)^2] = 6 s2
        y0, y1, y2 = self._y_prev, o.first_loss, o.next_first_loss
        self._y_prev = y1
        if math.isfinite(y0) and math.isfinite(y1) and math.isfinite(y2):
            e = y0 - 2.0 * y1 + y2
            q = e * e / 6.0
            self._s2_n += 1
            w = max(1.0 / _NOISE_MEMORY, 1.0 / self._s2_n)
            self._s2 = q if self._s2 is None else (1 - w) * self._s2 + w * q

    def _closed(self, run: _Run) -> None:
        if run.p_n >= 2:
            s2 = max(0.0, (run.p_ss - run.p_sum * run.p_sum / run.p_n) / (run.p_n - 1))
            self._p2_n += 1
            w = max(4.0 / _NOISE_MEMORY, 1.0 / self._p2_n)
            self._p2 = s2 if self._p2 is None else (1 - w) * self._p2 + w * s2
        if run.cap == self.incumbent and run.role in ("A", "incumbent"):
            self._last_at_incumbent = run
        test = self._test
        if test is None or test.outcome is not None or not test.planned or run is not test.planned[0][-1]:
            return
        cycle = test.planned.pop(0)
        if len(cycle) == 4:
            self._evaluate(test, cycle)

    def _kinds(self, runs) -> list:
        """The signals every run of a cycle has, best first."""
        out = []
        if all(math.isfinite(r.probe0) and math.isfinite(r.probe_end) for r in runs):
            out.append("probe")
        if all(r.p_n == r.n for r in runs) and self._p2 is not None:
            out.append("paired")
        if self._s2 is not None and self.window >= _SLOPE_FROM and all(r.slope() is not None for r in runs):
            out.append("loss")
        elif self._s2 is not None and all(math.isfinite(r.y0) and math.isfinite(r.y_end) for r in runs):
            out.append("loss")
        return out

    def _evaluate(self, test: _Test, runs) -> None:
        high = [r for r in runs if r.cap == test.hi]
        if sum(r.k_sum for r in high) <= test.lo * sum(r.n for r in high):
            self._outcome(test, "equal", why=f"{test.hi} took no more steps than {test.lo} allows: the loader leaves "
                          "no room for more", cycles=len(test.acc.d) + 1)
            return
        kinds = self._kinds(runs)
        kind = (kinds[0] if kinds else None) if test.kind is None else (test.kind if test.kind in kinds else None)
        if kind is None or any(not r.duration > 0 for r in runs):
            test.skipped += 1
            test.burst += 1
            if test.burst >= _BURST:
                self._outcome(test, "unresolved", why="no signal to compare the caps by (report the loss)")
            return
        test.kind = kind
        # A B B A; d = rate(lo) - rate(hi)
        sign = (1.0, -1.0, -1.0, 1.0) if runs[0].cap == test.lo else (-1.0, 1.0, 1.0, -1.0)
        if kind == "probe":
            rates = [(r.probe0 - r.probe_end) / r.duration for r in runs]
            var = [0.0] * 4
        elif kind == "paired":
            rates = [r.p_sum / r.duration for r in runs]
            var = [r.n * self._p2 / (r.duration * r.duration) for r in runs]
        elif self.window >= _SLOPE_FROM:
            fits = [r.slope() for r in runs]
            rates = [f[0] for f in fits]
            var = [self._s2 / f[1] for f in fits]
        else:
            rates = [(r.y0 - r.y_end) / r.duration for r in runs]
            var = [2.0 * self._s2 / (r.duration * r.duration) for r in runs]
        xs = rates
        v = 0.25 * sum(var)
        d = 0.5 * sum(g * x for g, x in zip(sign, xs))
        # the cubic contrast of the four runs: free of the caps' difference and of a drift up to
        # quadratic in time, with d's variance when the runs' noises are alike: a pure-noise reading
        # of d's variance that holds under autocorrelated or changing noise
        c = (-xs[0] + 3.0 * xs[1] - 3.0 * xs[2] + xs[3]) / math.sqrt(20.0)
        if not (math.isfinite(d) and math.isfinite(v) and math.isfinite(c)):
            test.skipped += 1
            test.burst += 1
            if test.burst >= _BURST:
                self._outcome(test, "unresolved", why=f"no decision yet after {test.burst} cycles")
            return
        acc = test.acc
        acc.d.append(d)
        acc.v.append(v)
        acc.c2.append(c * c)
        acc.rates.append(sum(rates) / 4.0)
        test.burst += 1
        self._judge(test)

    def _judge(self, test: _Test) -> None:
        acc = test.acc
        n = len(acc.d)
        S = math.fsum(acc.d)
        V = max(math.fsum(acc.v), math.fsum(acc.c2))
        if n >= 2:
            mean = S / n
            V = max(V, n / (n - 1) * math.fsum((x - mean) * (x - mean) for x in acc.d))
        cycles = n
        if n < _MIN_CYCLES[test.kind] or not (V > 0 and math.isfinite(V)):
            if test.burst >= _BURST:
                self._outcome(test, "unresolved", why="too few cycles to compare", cycles=cycles)
            return
        alpha = test.alpha
        if acc.rho is None:
            acc.rho = rho_for(4.0 * V / n, alpha)
        u = mixture_boundary(V, acc.rho, alpha)
        rate = abs(math.fsum(acc.rates) / n)
        est = {"cycles": cycles, "kind": test.kind, "difference": S / n, "half_width": u / n, "rate": rate}
        tol = self.min_effect * rate  # equal: within min_effect of the mean rate
        if S - u > 0:
            self._outcome(test, "lower", why=f"{test.lo} is faster than {test.hi}", **est)
        elif S + u < 0:
            self._outcome(test, "higher", why=f"{test.hi} is faster than {test.lo}", **est)
        elif abs(S) + u <= tol * n:
            self._outcome(test, "equal", why=f"{test.lo} and {test.hi} within {self.min_effect:.0%} of each other: "
                          "the fewer steps", **est)
        elif test.burst >= _BURST:
            self._outcome(test, "unresolved", why=f"no decision yet after {cycles} cycles", **est)

    def _outcome(self, test: _Test, outcome: str, **info) -> None:
        test.outcome = outcome
        winner = {"lower": test.lo, "higher": test.hi, "equal": test.lo}.get(outcome, self.incumbent)
        challenger = test.hi if self.incumbent == test.lo else test.lo
        action = {"unresolved": "unresolved", "equal": "equal"}.get(outcome, "switch" if winner != self.incumbent else "keep")
        self._log(action, cap=winner, challenger=challenger, previous=self.incumbent, alpha=test.alpha, **info)

    def _log(self, action: str, **info) -> None:
        self.decisions.append({"batch": self._t, "action": action, **info})
