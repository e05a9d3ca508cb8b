"""The planner's candidates as value objects: what might be recommended (`Candidate`), what
evaluating it found (`Outcome`), and the two side by side with sync at the same batch size
and loader workers (`Planned`: speedup, the theory's ceiling, cost).

Each stage makes new frozen objects instead of filling a dict in place: `candidates`
enumerates, an evaluator (`echosim.planner.modelled` for form (b), the simulated runs of
`echosim.planner.simulated` for form (a)) turns each `Candidate` into an `Outcome`, and
`compare` makes the `Planned` rows the `Plan` shows. The ceiling comes from
`theory.rate_speedup_ceiling`.

What a policy does comes from its row in `echosim.pipeline.model.POLICIES` (``takes_echo``:
a given K; ``capped``: K_t follows the loader's waits); by name the planner knows only
`BASELINE`, the policy every speedup is measured against.

`Planned` reads like the dicts of earlier versions (``row["speedup"]``, ``row.get("cost")``)
so that code and notebooks written against them keep working.

Examples
--------
>>> c = Candidate("fixed", 4, batch_size=256, workers=1, R=8.0)
>>> c.name
'fixed K=4'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from echosim.pipeline.model import POLICIES

__all__ = ["BASELINE", "Candidate", "Outcome", "Planned", "candidates", "compare", "default_echoes"]

BASELINE = "sync"
"""The policy of the baseline: one step per fresh batch, no echoing. Every speedup is over
it at the same batch size and loader workers, and every plan has it."""


@dataclass(frozen=True)
class Candidate:
    """One policy at one batch size and loader-worker count, before it is evaluated.

    policy : "sync", "fixed", "greedy" or "auto"
    echo : K for "fixed" (1 for "sync"), NaN for "greedy" and "auto" (chosen as the run goes)
    batch_size, workers : B and the loader workers W
    R : how many steps the mean loader time per batch is, with W workers (t_load / (W t_step))
    max_echo : the cap on K_t for "greedy" and "auto", else None
    """

    policy: str
    echo: float
    batch_size: int
    workers: int
    R: float
    max_echo: int | None = None

    @property
    def name(self) -> str:
        if self.policy == BASELINE:
            return f"{BASELINE} (no echo)"
        if POLICIES[self.policy].takes_echo:
            return f"{self.policy} K={int(self.echo)}"
        return self.policy

    def as_dict(self) -> dict:
        d = {"policy": self.policy, "echo": self.echo, "batch_size": self.batch_size, "workers": self.workers,
             "R": self.R}
        if self.max_echo is not None:
            d["max_echo"] = self.max_echo
        return d


@dataclass(frozen=True)
class Outcome:
    """What evaluating a candidate found (times in seconds).

    mean_echo : steps per fresh batch (K for fixed; measured or simulated for greedy and auto)
    batches_to_target, steps_to_target : fresh batches and optimizer steps to the target (median)
    wall_clock_to_target, wall_clock_low, wall_clock_high : the median and its 10-90% band
    wall_clock_seeds : the wall-clock of each seed (loader runs in form (b), data and loader
        in form (a)): what the choice of K is made robust over
    utilization : the accelerator's busy fraction until the target
    throughput : fresh batches per second
    extra : form (a)'s tuned lr, its edge flag, seeds converged, budget, auto's caps
    """

    mean_echo: float
    batches_to_target: float
    steps_to_target: float
    wall_clock_to_target: float
    wall_clock_low: float
    wall_clock_high: float
    wall_clock_seeds: tuple = ()
    utilization: float = math.nan
    throughput: float = math.nan
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_fields(cls, d) -> "Outcome":
        """An Outcome from a mapping with its field names (other keys go to `extra`)."""
        names = {f.name for f in fields(cls)} - {"extra"}
        kw = {k: d[k] for k in names if k in d}
        kw["wall_clock_seeds"] = tuple(float(x) for x in kw.get("wall_clock_seeds", ()))
        return cls(**kw, extra={k: v for k, v in d.items() if k not in names})


@dataclass(frozen=True, eq=False)
class Planned:
    """A candidate, its outcome, and how it compares with sync at the same B and workers.

    baseline_wall_clock : sync's median wall-clock there
    speedup : baseline / this (NaN if either never reaches the target; at most the ceiling)
    speedup_ceiling : `theory.rate_speedup_ceiling`: the speedup if every echoed step were
        worth a fresh batch
    cost : price per run, when prices were given
    """

    candidate: Candidate
    outcome: Outcome
    baseline_wall_clock: float
    speedup: float
    speedup_ceiling: float
    cost: float | None = None

    def as_dict(self) -> dict:
        """The flat view: the candidate's fields, the outcome's (with `extra`), the comparison."""
        o = self.outcome
        d = self.candidate.as_dict()
        if POLICIES[self.candidate.policy].capped:  # K_t varied: the mean the run had
            d["echo"] = o.mean_echo
        d.update({f.name: getattr(o, f.name) for f in fields(Outcome) if f.name != "extra"})
        d["wall_clock_seeds"] = list(o.wall_clock_seeds)
        d.update(o.extra)
        d.update(baseline_wall_clock=self.baseline_wall_clock, speedup=self.speedup,
                 speedup_ceiling=self.speedup_ceiling)
        if self.cost is not None:
            d["cost"] = self.cost
        return d

    def __getitem__(self, key):
        return self.as_dict()[key]

    def get(self, key, default=None):
        return self.as_dict().get(key, default)

    def __contains__(self, key) -> bool:
        return key in self.as_dict()

    def keys(self):
        return self.as_dict().keys()

    def items(self):
        return self.as_dict().items()


def default_echoes(R: float) -> list[int]:
    """Powers of two from 2 to the first one >= 2R (at most 64): they bracket K = R."""
    out, k = [], 2
    while k <= 64:
        out.append(k)
        if k >= 2 * R:
            break
        k *= 2
    return out


def candidates(batch_sizes, workers, policies, echoes, max_echo: int, ratio) -> list[Candidate]:
    """Every policy at every (B, W): sync, fixed at each K of `echoes` (default: `default_echoes`
    of R), greedy and auto capped at `max_echo`. `ratio(B, W)` is R there."""
    out = []
    for B in batch_sizes:
        for W in workers:
            R = float(ratio(B, W))
            for p in policies:
                if POLICIES[p].takes_echo:
                    out.extend(Candidate(p, k, B, W, R) for k in (echoes if echoes is not None else default_echoes(R)))
                elif POLICIES[p].capped:
                    out.append(Candidate(p, math.nan, B, W, R, max_echo))
                else:  # the baseline: one step per fresh batch
                    out.append(Candidate(p, 1, B, W, R))
    return out


def compare(cands, outcomes, prices=None) -> tuple[list[Planned], list[str]]:
    """`Planned` rows: each outcome against sync's at the same B and workers, the ceiling from
    `theory.rate_speedup_ceiling`, the cost per run from ``prices = (accelerator, worker)``
    per hour (either may be None; both None: no cost). Also notes where a speedup above its
    ceiling was clipped (the sync baseline's time to target is noisy)."""
    from theory import rate_speedup_ceiling

    base = {(c.batch_size, c.workers): o for c, o in zip(cands, outcomes) if c.policy == BASELINE}
    rows, notes = [], []
    for c, o in zip(cands, outcomes):
        b = base[(c.batch_size, c.workers)]
        ceiling = float(rate_speedup_ceiling(max(o.mean_echo, 1.0), o.throughput, b.throughput)) \
            if all(math.isfinite(x) and x > 0 for x in (o.mean_echo, o.throughput, b.throughput)) else math.nan
        sp = b.wall_clock_to_target / o.wall_clock_to_target \
            if math.isfinite(o.wall_clock_to_target) and math.isfinite(b.wall_clock_to_target) else math.nan
        if math.isfinite(sp) and math.isfinite(ceiling) and sp > ceiling * (1 + 1e-9):
            name = f"{c.policy} (mean K {o.mean_echo:.2g})" if POLICIES[c.policy].capped else c.name
            notes.append(f"{name} at B = {c.batch_size}: the simulated speedup {sp:.2f}x is above its ceiling "
                         f"{ceiling:.2f}x (the sync baseline's time to target is noisy); shown at the ceiling")
            sp = ceiling
        cost = None
        if prices is not None and any(p is not None for p in prices):
            rate = (prices[0] or 0.0) + c.workers * (prices[1] or 0.0)
            cost = o.wall_clock_to_target * rate / 3600.0
        rows.append(Planned(c, o, b.wall_clock_to_target, sp, ceiling, cost))
    return rows, notes
