"""What a run gives back: the `Trajectory` (excess risk at logged fresh-batch or step
boundaries), the rule that places log points (`log_points`) and the divergence rule's
factor; built by the driver (`echosim.training.driver`), public through
`echosim.training.runner`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from echosim._validate import check_int

__all__ = ["AUTO_LOG_MAX", "DIVERGENCE_FACTOR", "FRAME_UNITS", "Trajectory", "explicit_points", "log_points"]

AUTO_LOG_MAX = 2000
"""log="auto": log every ⌈n/2000⌉ units (and the last), so at most about 2000 points:
the one rule for `run` and for sweeps (`echosim.experiments.assemble`)."""

DIVERGENCE_FACTOR = 100.0
"""A run diverges where the last iterate's excess risk exceeds this multiple of F(w₀)."""


FRAME_UNITS = {
    "batches": "fresh batches consumed",
    "steps": "optimizer steps taken",
    "time": "simulated wall-clock, in the pipeline's time unit (NaN without a clock)",
    "risk": "excess risk F(w) - F* of the last iterate, in the loss's unit",
    "risk_avg": "excess risk of the average of every step's iterate, in the loss's unit",
    "risk_end_avg": "excess risk of the average of batch-end iterates, in the loss's unit",
}
"""`Trajectory.to_frame`'s columns and their units (the frame's ``attrs["units"]``)."""

@dataclass(frozen=True)
class Trajectory:
    """Excess risk F(w) − F* at logged fresh-batch boundaries.

    ``batches[i]`` fresh batches had been consumed at log point i (point 0 is w₀),
    ``steps[i]`` optimizer steps taken, ``time[i]`` the simulated wall-clock time
    (None without a clock). ``risk`` is the last iterate's excess risk, ``risk_avg``
    the uniform average of every step's iterate, ``risk_end_avg`` the average of
    batch-end iterates. A run that diverged (see `run`) has status "diverged" and
    stops at its last logged point before the divergence. ``first_loss`` (with
    ``first_loss=True``): per fresh batch t, the minibatch loss f_t(w_t) at the iterate
    before the first step on it (plus the l2 term), what a training loop's forward
    pass reports; None otherwise.
    """

    batches: np.ndarray
    steps: np.ndarray
    time: np.ndarray | None
    risk: np.ndarray
    risk_avg: np.ndarray
    risk_end_avg: np.ndarray
    status: str
    w: np.ndarray
    w_avg: np.ndarray
    diverged_at: int | None = None
    info: dict = field(default_factory=dict)
    first_loss: np.ndarray | None = None

    def __len__(self):
        return len(self.batches)

    def __repr__(self) -> str:
        n = len(self)
        wall = f", wall_clock={float(self.time[-1]):.6g}" if self.time is not None and n else ""
        risk = f"{float(self.risk[-1]):.4g}" if n else "nan"
        batches, steps = (int(self.batches[-1]), int(self.steps[-1])) if n else (0, 0)
        return (f"Trajectory(status={self.status!r}, points={n}, batches={batches}, steps={steps}, "
                f"final_excess_risk={risk}{wall})")

    def _repr_html_(self) -> str:
        import html

        n = len(self)
        facts = [("status", self.status + (f" at fresh batch {self.diverged_at}" if self.diverged_at is not None
                                           else "")),
                 ("logged points", str(n)),
                 ("fresh batches", str(int(self.batches[-1])) if n else "0"),
                 ("optimizer steps", str(int(self.steps[-1])) if n else "0"),
                 ("final excess risk F(w) − F*", f"{float(self.risk[-1]):.4g}" if n else "-")]
        if self.time is not None and n:
            facts.append(("simulated wall-clock", f"{float(self.time[-1]):.6g} time units"))
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                       for k, v in facts)
        return f"<table><caption>Trajectory</caption>{rows}</table>"

    def summary(self) -> dict:
        """Final values and the run's parameters, as one flat dict."""
        out = dict(self.info)
        out.update(
            status=self.status,
            diverged_at=self.diverged_at,
            batches=int(self.batches[-1]),
            steps=int(self.steps[-1]),
            time=None if self.time is None else float(self.time[-1]),
            final_risk=float(self.risk[-1]),
            final_risk_avg=float(self.risk_avg[-1]),
            final_risk_end_avg=float(self.risk_end_avg[-1]),
        )
        return out

    def to_frame(self):
        """The logged points as a pandas DataFrame (one row per point; pandas: the ``sweep`` extra),
        each column's unit in ``frame.attrs["units"]`` (`FRAME_UNITS`)."""
        try:
            import pandas as pd  # an optional library, imported here only (tests/test_layers.py)
        except ImportError:
            raise ImportError("Trajectory.to_frame needs pandas: pip install 'echosim[sweep]'") from None
        columns = {"batches": self.batches, "steps": self.steps,
                   "time": np.full(len(self), np.nan) if self.time is None else self.time,
                   "risk": self.risk, "risk_avg": self.risk_avg, "risk_end_avg": self.risk_end_avg}
        frame = pd.DataFrame(columns)
        frame.attrs["units"] = FRAME_UNITS
        return frame


def log_points(log, n: int) -> np.ndarray:
    """Counts 1..n (fresh batches, or steps) after which to log, always with n: "auto"
    (every ⌈n/`AUTO_LOG_MAX`⌉), "all", a count (that many log-spaced) or an array."""
    if isinstance(log, str):
        if log == "all":
            return np.arange(1, n + 1, dtype=np.int64)
        if log != "auto":
            raise ValueError(f"log must be 'auto', 'all', a count or an array of batch counts, got {log!r}")
        every = max(1, math.ceil(n / AUTO_LOG_MAX))
        return np.union1d(np.arange(every, n + 1, every, dtype=np.int64), [n]).astype(np.int64)
    if np.ndim(log) == 0:
        count = check_int("log", log, lo=1)
        pts = np.unique(np.round(np.geomspace(1, n, num=min(count, n))).astype(np.int64))
    else:
        pts = explicit_points(log, n)
    return np.union1d(pts, [n]).astype(np.int64)


def explicit_points(log, n=None) -> np.ndarray:
    """The log positions the caller gave (sorted, unique), checked to lie in 1..n."""
    try:
        pts = np.unique(np.asarray(log, dtype=np.int64))
    except (TypeError, ValueError):
        raise ValueError(f"log must be 'auto', 'all', a count or an array of batch counts, got {log!r}") from None
    if pts.size and (pts[0] < 1 or (n is not None and pts[-1] > n)):
        raise ValueError(f"log: batch counts must lie in [1, {'n' if n is None else n}]")
    return pts

