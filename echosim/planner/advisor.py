"""The advisor: loader timing + step time + the problem's response to echoing →
candidates (sync, fixed K, greedy; batch sizes; loader workers) → wall-clock to target
for each, the best per batch size and overall, each with its reason.

`plan` is the planner's flow, each step in its own module: check every input before any
work (`echosim.planner.inputs`); take each candidate's timing from specs or from the
records of the user's own run (`echosim.planner.timing`); enumerate the candidates and
compare each with sync (`echosim.planner.candidates`); evaluate them in one of two ways
(below); choose the best per batch size and overall, with reasons
(`echosim.planner.recommend`); return them as a `Plan` (`echosim.planner.result`).

(a) ``problem=`` an echosim problem: every candidate is simulated end to end through
    the sweep machinery (the loader and the step time in the pipeline, the learning
    rate tuned per candidate by wall-clock to target, several seeds).
(b) ``steps_to_target=`` measurements: steps to target without echoing at two or more
    batch sizes, and optionally with echoing at some (B, K) (a pilot); a T(K, B) model
    (`echosim.planner.response`) predicts the fresh batches each candidate needs, and the
    pipeline simulator turns them into wall-clock.

Times are in seconds throughout.
"""

from __future__ import annotations

import math

import numpy as np

from echosim.planner.candidates import candidates, compare
from echosim.planner.inputs import PLANNED, check_inputs
from echosim.planner.recommend import recommend
from echosim.planner.result import FRAME_UNITS, Plan
from echosim.planner.timing import candidate_timing

__all__ = ["plan", "Plan", "PLANNED", "FRAME_UNITS"]


def plan(loader=None, step_time=None, *, batch_size, problem=None, steps_to_target=None, records=None,
         workers=1, prefetch: int = 2, policies=None, echoes=None, max_echo: int = 64, target: float = 0.002,
         seeds: int = 5, accelerator_price=None, worker_price=None, seed: int = 0, processes: int = 2,
         results=None, progress=None, method: str = "echoed_gd", method_options=None, curves=None,
         target_loss=None) -> Plan:
    """Should I echo, with which K, and what will it save me?

    Parameters
    ----------
    loader : text, number, ServiceTime, Trace, or mapping B -> profile
        Time one loader worker needs per fresh batch (seconds): ``"gamma(mean=80ms,
        cv=0.5)"``, ``"trace(times.csv, unit=ms)"``, a `Trace` from `echosim.profile`,
        or profiles at two or more batch sizes (time per batch = a + b·B is fitted). A
        profile taken apart from training is an optimistic bound on a shared host:
        prefer ``records``.
    step_time : text, number, ServiceTime, Trace, or mapping B -> time
        Time of one optimizer step (seconds), e.g. ``"10ms"``; at several batch sizes
        (``{64: "15ms", 512: "40ms"}``) a + b·B is fitted.
    batch_size : int or list of int
        B; several values give the best per B and overall. Each at most what a run of a
        sweep can hold (`echosim.experiments.limits.max_batch_size`).
    problem : str or dict, optional
        Form (a): ``"logistic"``, ``"least_squares"``, ``"dataset:NAME"`` or a
        ``[problem]`` table. T(K) is simulated with tuned learning rates.
    steps_to_target : mapping, optional
        Form (b): optimizer steps to the target, keys B (without echoing, at two or more
        B) or (B, K) (with echoing, e.g. from a pilot: ``{(1024, 4): 20}`` = 20 steps =
        5 fresh batches; at least K steps, 1 <= K <= 4096).
        Measured at one learning rate, as the plan is for it: no gain is credited beyond
        the largest K measured with echoing here or in ``records``
        (`echosim.planner.response.fit_response`, ``lr="fixed"``).
    records : Records or list of Records, optional
        Runs through `echosim.echoing` (any policies, e.g. a pilot from
        `echosim.pilot`): the loader and step times are taken from them, per policy, so
        the host's contention is in the numbers. Replaces ``loader`` and ``step_time``.
        In form (b) they also measure echoing (`echosim.planner.echo_signals`): the
        gradient-noise scale centres the echo model, and fixed-K runs against sync runs at
        the same B give K_eff (from paired next-batch progress, else from the loss curves).
    workers : int or list of int
        Loader workers W; several values compare echoing with adding workers.
    prefetch : int
        Prefetch buffer capacity C.
    policies : subset of ("sync", "fixed", "greedy", "auto")
        Default: all of them ("auto" with form (a) only).
        "auto" (form (a) only): greedy under an echo cap tuned from the losses, simulated
        with the controller of ``echoing(policy="auto")``, its caps decided in each run
        from that run's simulated first-step losses.
    echoes : list of int, optional
        K for "fixed" (default: powers of two bracketing R = t_load/(W t_step)).
    max_echo : int
        Bound on K_t under "greedy" and "auto"; in form (b), at most the largest K measured
        with echoing (at one learning rate a larger K_t is a step nobody measured).
    target : float
        Form (a): reach a loss <= (1 + target)·F* and stay there.
    seeds : int
        Repetitions (loader randomness, and form (a)'s data) behind the 10–90% bands.
    accelerator_price, worker_price : float, optional
        Price per hour of the accelerator and of one loader worker; adds a cost column
        and makes the recommendation the cheapest run instead of the fastest.
    seed : base seed.
    processes : worker processes for form (a)'s simulations.
    results : the run store for form (a)'s runs (default ``$ECHOSIM_STORE``, else
        ``echosim-results/store``): runs it holds, from any sweep or plan, are reused.
    progress : bool, optional
        Form (a): on stderr, a line naming each simulation step (which candidates, how many
        steps may follow) and its progress: a bar redrawn on a terminal, a line every 10 s
        elsewhere (logs, pipes), tqdm's widget in a notebook; default on, ``False`` silences it.
    curves : Records, list of Records, CSV path, or mapping, optional
        Form (b) from whole loss curves (`echosim.planner.curves`): the loss per fresh batch
        of runs at K = 1 (two or more batch sizes) and optionally with echoing; the steps
        to ``target_loss`` are read off each curve (reaches it and stays, trailing mean over
        10 fresh batches), every run a repeat. Adds to ``steps_to_target`` if both are given.
    target_loss : float, optional
        With ``curves``: the loss to reach.
    method, method_options : str, dict, optional
        Form (a): the optimizer simulated, a row of `echosim.training.methods.METHODS`
        (e.g. ``"echoed_heavy_ball"`` with ``{"momentum": 0.9}``, ``"echoed_adam"`` with
        ``{"beta2": 0.99}``), its hyper-parameters under their config keys (defaults:
        the method's). Form (b) takes the steps measured with your own optimizer.
    """
    args = check_inputs(batch_size=batch_size, workers=workers, prefetch=prefetch, max_echo=max_echo,
                        policies=policies, echoes=echoes, seeds=seeds, seed=seed, target=target,
                        processes=processes, accelerator_price=accelerator_price, worker_price=worker_price,
                        problem=problem, steps_to_target=steps_to_target, curves=curves, target_loss=target_loss,
                        method=method, method_options=method_options)
    timing = candidate_timing(loader, step_time, records, args.batch_sizes, args.workers)
    response, pconf, problem_obj = _response(args, records)  # nothing has run yet: every input is checked by here

    max_echo, cap_note = _max_echo(args.max_echo, response)
    specs = candidates(args.batch_sizes, args.workers, args.policies, args.echoes, max_echo, timing.ratio)
    times, timing_notes = timing.for_candidates(specs)
    outcomes, source, notes, failed, fail_note = _evaluate(specs, times, args, response, (pconf, problem_obj),
                                                           results, progress)
    cands, clipped = compare(specs, outcomes, (args.accelerator_price, args.worker_price) if args.priced else None)
    if not any(math.isfinite(c["wall_clock_to_target"]) for c in cands):
        raise ValueError(f"target: no candidate reaches the target (loss <= (1 + {args.target:g}) F*) within the "
                         "budget; loosen --target or try larger batch sizes" + (f"; {fail_note}" if failed else ""))
    measured = response is None or not response.echo_source.startswith("prior only")
    best, reasons, rec, reason = recommend(cands, args.batch_sizes, args.priced, measured_echo=measured,
                                           k_max=response.k_max if response is not None else math.inf)
    notes = [f"timing: {timing.describe}", *([fail_note] if fail_note else []), *timing_notes, *notes, *clipped,
             *([cap_note] if cap_note else []), *_rising(response)]
    return Plan(candidates=cands, recommended=rec, reason=reason, source=source,
                inputs=args.record(timing.describe, pconf, response), notes=notes, best=best, reasons=reasons,
                failed=failed)


def _rising(response) -> list[str]:
    """A note where the K = 1 measurements need more fresh batches at a larger B, which
    T(1, B) = S + E/B (never rising with B) cannot fit: single runs that noisy, or a target
    the runs barely hold."""
    if response is None:
        return []
    by_b: dict = {}
    for B, K, T in response.measurements:
        if K == 1:
            by_b.setdefault(B, []).append(T)
    Bs = sorted(by_b)
    T = [float(np.median(by_b[B])) for B in Bs]
    up = [(Bs[i], T[i], Bs[j], T[j]) for i in range(len(Bs)) for j in range(i + 1, len(Bs)) if T[j] > T[i]]
    if not up:
        return []
    b1, t1, b2, t2 = max(up, key=lambda u: u[3] / u[1])
    return [f"your steps to target without echoing rise with the batch size ({t1:.4g} fresh batches at B = {b1}, "
            f"{t2:.4g} at B = {b2}), which T(1, B) = S + E/B cannot fit (it never rises with B): single runs that far "
            "apart are noise, or a target the runs barely hold; repeat the runs (each value a list) or loosen the "
            "target"]


def _max_echo(max_echo: int, response) -> tuple[int, str | None]:
    """Greedy's cap: `max_echo`, or, at one learning rate, the largest K measured with echoing
    if smaller (a larger K_t would be a step nobody measured, and at a fixed step a larger K
    can cost fresh batches); with the note that says so."""
    if response is None or not response.k_max < max_echo:
        return max_echo, None
    k = int(response.k_max)
    return k, (f"greedy is capped at K = {k} (max_echo), the largest K measured with echoing: at one learning rate "
               f"a larger K_t is a larger step nobody measured, which can cost fresh batches; pilot a larger K to "
               "raise the cap")


def _response(args, records):
    """Form (b): the T(K, B) model fitted to the measurements (centred by the records' noise
    scale and echo gains, if any) for a loop that keeps its learning rate whatever K
    (``lr="fixed"``: no gain credited beyond the largest K measured), and no problem. Form (a): no model, and the problem's
    ``[problem]`` table with the problem built from it, once (its features bound the batch
    sizes its runs can hold; its smoothness sets the learning-rate grid)."""
    if args.steps_to_target is not None:
        from echosim.planner.echo_signals import echo_gains, measured_noise_scale
        from echosim.planner.response import fit_response

        return fit_response(args.steps_to_target, seed=args.seed, noise_scale=measured_noise_scale(records),
                            echo_gains=echo_gains(records) or None, lr="fixed"), None, None
    from echosim.planner.response import check_batch_size
    from echosim.planner.simulated import problem_config, validate_problem

    pconf = problem_config(args.problem)
    problem_obj = validate_problem(pconf, args.optimizer)
    for B in args.batch_sizes:
        check_batch_size(B, "batch_size", problem_obj.n_features, 8)
    return None, pconf, problem_obj


def _evaluate(specs, times, args, response, problem, results, progress):
    """Each candidate's `Outcome`: from the fitted model (form (b), `echosim.planner.modelled`)
    or simulated end to end (form (a), `echosim.planner.simulated`). Returns the outcomes, how
    they were obtained, notes, and form (a)'s failed runs with the note that tells them.
    `problem`: form (a)'s ([problem] table, built problem)."""
    ctx = {"prefetch": args.prefetch, "max_echo": args.max_echo, "seeds": args.seeds, "seed": args.seed,
           "optimizer": args.optimizer}
    if response is not None:
        from echosim.planner.modelled import evaluate
        from echosim.planner.response import ACCURACY

        outcomes = [evaluate(c, ld, st, response, ctx) for c, (ld, st) in zip(specs, times)]
        source = (f"form (b): fresh batches from the model {response.describe()}; wall-clock from {args.seeds} "
                  "simulated loader runs per candidate; band: 10-90% over the model's draws (its parameters and "
                  "its own measured error) and the runs")
        return outcomes, source, [f"accuracy of the T(K) model: {ACCURACY}"], [], None
    from echosim.experiments.store import Store
    from echosim.planner.simulated import failures_note, run_candidates

    show = True if progress is None else bool(progress)
    ctx["problem"] = problem[1]
    outcomes, source, notes = run_candidates(specs, times, problem[0], ctx, args.target, args.processes, results, show)
    failed_runs = ctx.get("failed_runs", {})
    return outcomes, source, notes, list(failed_runs.values()), failures_note(failed_runs, Store(results).root)
