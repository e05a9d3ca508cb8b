"""`plan`'s arguments checked before any work: each one validated and normalised (lists
sorted, defaults filled in, curves read into steps to target) into one `Inputs`, or a
ValueError naming the argument, so that nothing runs and nothing is written on bad input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from echosim._validate import check_int, check_real
from echosim.pipeline.model import POLICIES
from echosim.planner.candidates import BASELINE

__all__ = ["PLANNED", "Inputs", "check_inputs"]

PLANNED = tuple(name for name, p in POLICIES.items() if not p.shuffles_examples)
"""The echo policies of `echosim.pipeline` that the planner offers as candidates: every one
whose steps each use one fresh batch (the planner counts fresh batches per candidate), so
all but example echoing."""


@dataclass(frozen=True)
class Inputs:
    """`plan`'s arguments, checked: sorted lists, sync among the policies, the steps to
    target read off `curves` (form (b)), the optimizer as config keys (form (a))."""

    batch_sizes: list
    workers: list
    prefetch: int
    max_echo: int
    policies: list
    echoes: list | None
    seeds: int
    seed: int
    target: float  # as given (checked: a real number > 0)
    processes: int
    accelerator_price: float | None
    worker_price: float | None
    problem: object
    steps_to_target: Mapping | None
    optimizer: dict

    @property
    def priced(self) -> bool:
        return self.accelerator_price is not None or self.worker_price is not None

    def record(self, timing: str, pconf, response) -> dict:
        """What the plan was asked, as `Plan.inputs` keeps it (`pconf`: form (a)'s problem
        table; `response`: form (b)'s fitted model)."""
        return {"timing": timing, "batch_size": self.batch_sizes, "workers": self.workers,
                "prefetch": self.prefetch, "policies": self.policies, "max_echo": self.max_echo,
                "seeds": self.seeds, "seed": self.seed, "problem": pconf,
                "steps_to_target": None if response is None else
                [{"batch_size": b, "echo": k, "fresh_batches": t} for b, k, t in response.measurements],
                "target": float(self.target) if pconf else None,
                "accelerator_price": self.accelerator_price, "worker_price": self.worker_price}


def check_inputs(*, batch_size, workers, prefetch, max_echo, policies, echoes, seeds, seed, target, processes,
                 accelerator_price, worker_price, problem, steps_to_target, curves, target_loss, method,
                 method_options) -> Inputs:
    """Every argument of `plan` but the timing's (`echosim.planner.timing.candidate_timing`),
    checked in the order of its signature; ValueError naming the first bad one."""
    from echosim.experiments.limits import MAX_WORKERS
    from echosim.planner.response import MAX_ECHO, check_batch_size

    Bs = [check_batch_size(B, "batch_size") for B in _int_list(batch_size, "batch_size")]
    Ws = _int_list(workers, "workers")
    if Ws[-1] > MAX_WORKERS:
        raise ValueError(f"workers: expected at most {MAX_WORKERS:,} loader workers (what the simulation takes), "
                         f"got {Ws[-1]:,}")
    prefetch = check_int("prefetch", prefetch, lo=1)
    max_echo = check_int("max_echo", max_echo, lo=1, hi=MAX_ECHO)
    policies = _policies(policies, form_b=steps_to_target is not None or curves is not None)
    if echoes is not None:
        echoes = [k for k in _int_list(echoes, "echo") if k > 1]
        if max(echoes, default=1) > MAX_ECHO:
            raise ValueError(f"echo: expected K <= {MAX_ECHO}, got {max(echoes)}")
    seeds = check_int("seeds", seeds, lo=1, hi=100)
    seed = check_int("seed", seed, lo=0, hi=2 ** 63 - 1)
    check_real("target (relative: loss <= (1 + target) F*)", target, lo=0.0, lo_open=True)  # kept as given
    processes = check_int("processes", processes, lo=1, hi=256)
    prices = [None if v is None else check_real(f"{name} (per hour)", v, lo=0.0)
              for name, v in (("accelerator_price", accelerator_price), ("worker_price", worker_price))]
    steps_to_target = _with_curves(steps_to_target, curves, target_loss)
    if (problem is None) == (steps_to_target is None):
        raise ValueError("problem: give exactly one of problem (an echosim problem, simulated) or "
                         "steps_to_target (measured steps to target at two or more batch sizes)")
    coupled = [p for p in policies if POLICIES[p].coupled]
    if coupled and problem is None:
        raise ValueError(f"policies: {coupled[0]!r} decides its caps from the losses, so it is planned on a simulated "
                         "problem (problem=..., form (a)), not from steps_to_target")
    optimizer = _method_arg(method, method_options, form_a=problem is not None)
    return Inputs(Bs, Ws, prefetch, max_echo, policies, echoes, seeds, seed, target, processes, *prices, problem,
                  steps_to_target, optimizer)


def _int_list(value, name: str, lo: int = 1) -> list[int]:
    """One integer or several, each >= `lo`, sorted without repeats."""
    vals = value if isinstance(value, (list, tuple, range, np.ndarray)) else [value]
    out = sorted({check_int(name, v, lo=lo) for v in vals})
    if not out:
        raise ValueError(f"{name}: expected at least one value")
    return out


def _policies(policies, form_b: bool) -> list[str]:
    """The planned policies asked for (default: every one the form can evaluate, "auto" on a
    simulated problem only), sync first if it was left out: every speedup is over it."""
    if policies is None:
        policies = [p for p in PLANNED if not (form_b and POLICIES[p].coupled)]
    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",") if p.strip()]
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in PLANNED]
    if bad or not policies:
        raise ValueError(f"policies: allowed {', '.join(PLANNED)}, got {', '.join(map(str, policies)) or 'none'}")
    if BASELINE not in policies:
        policies.insert(0, BASELINE)  # every speedup is measured against it
    return policies


def _with_curves(steps_to_target, curves, target_loss):
    """Form (b)'s measurements: `steps_to_target`, plus the steps read off `curves` at
    `target_loss` (`echosim.planner.curves`), which come together or not at all."""
    if (curves is None) != (target_loss is None):
        raise ValueError(f"{'target_loss' if curves is not None else 'curves'}: give curves and target_loss together "
                         "(the loss per fresh batch of your runs, and the loss to reach)")
    if curves is None:
        return steps_to_target
    from echosim.planner.curves import steps_from_curves
    from echosim.planner.response import measurements

    from_curves = steps_from_curves(curves, target_loss)
    if steps_to_target is None:
        return from_curves
    measurements(steps_to_target)  # checked as given, before merging
    merged = {k: list(np.atleast_1d(np.asarray(v, dtype=float))) for k, v in steps_to_target.items()}
    for k, v in from_curves.items():
        merged.setdefault(k, []).extend(v)
    return merged


def _method_arg(method, options, form_a: bool) -> dict:
    """The optimizer of form (a) as config keys; ValueError naming `method` or `method_options`."""
    from echosim.training.methods import get_method

    row = get_method(method)
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"method_options: expected a mapping of the method's hyper-parameters, got {options!r}")
    options = dict(options or {})
    if not form_a and (row.name != "echoed_gd" or options):
        raise ValueError("method: the optimizer is simulated in form (a) only (problem=...); with steps_to_target "
                         "the steps you measured already come from your own optimizer")
    if row.one_step:
        raise ValueError(f"method: {row.name} takes one step per fresh batch, so there is nothing to echo; "
                         "plan an echoed method (echoed_gd, echoed_heavy_ball, echoed_adam, ...)")
    unknown = sorted(set(options) - set(row.fields))
    if unknown:
        raise ValueError(f"method_options: {row.name} has {', '.join(row.fields) or 'no hyper-parameters'}, "
                         f"got {', '.join(map(repr, unknown))}")
    return {"method": row.name, **options}
