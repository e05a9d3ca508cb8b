"""Form (b) of the planner: a candidate's wall-clock to target from the fitted T(K, B)
model (`echosim.planner.response`) and the pipeline simulator, over the model's draws and
the loader's seeds."""

from __future__ import annotations

import math

import numpy as np

from echosim.planner.candidates import Candidate, Outcome

__all__ = ["evaluate", "pipeline", "quantile", "BAND"]

BAND = (0.1, 0.9)
"""The quantiles of the wall-clock band."""


def pipeline(c: Candidate, loader, step, prefetch: int):
    """The pipeline of a candidate (`echosim.pipeline.model.Pipeline`) with its loader and step times."""
    from echosim.pipeline.model import POLICIES, Pipeline

    row = POLICIES[c.policy]
    kw = {"echo": float(c.echo)} if row.takes_echo else {}
    if row.capped:
        kw["max_echo"] = c.max_echo
    return Pipeline(loader, workers=c.workers, prefetch=prefetch, step_time=step, policy=c.policy, **kw)


def evaluate(c: Candidate, loader, step, response, ctx) -> Outcome:
    """Form (b): T from the fitted model (greedy: from its simulated K_t batch by batch);
    wall-clock from the pipeline, over the model's draws and the loader's seeds."""
    from echosim.pipeline.model import POLICIES
    from echosim.pipeline.schedule import simulate

    n_probe = 2000
    p = pipeline(c, loader, step, ctx["prefetch"])
    B = c.batch_size
    seqs = np.random.SeedSequence([ctx["seed"], 7, B, c.workers]).spawn(ctx["seeds"])
    probe = simulate(p, n_probe, seed=seqs[0])
    sm = probe.summary()
    kbar = float(sm["mean_echo"])
    if POLICIES[c.policy].capped:  # K_t follows the loader: T from the simulated K_t, batch by batch
        T_draws = response.predict_schedule(np.resize(probe.steps_per_batch, 200_000), B, draws=True)
        T_med = response.predict_schedule(np.resize(probe.steps_per_batch, 200_000), B)
    else:
        T_draws = response.predict_draws(c.echo, B)
        T_med = max(1.0, response.predict(c.echo, B))
    finite = T_draws[np.isfinite(T_draws)]
    n_sim = int(min(max(np.quantile(finite, 0.95) if finite.size else T_med, T_med), 200_000)) + 2
    walls, steps, utils, med = [], [], [], []
    draws = T_draws[:: max(1, len(T_draws) // 100)]
    for s in seqs:
        sch = simulate(p, n_sim, seed=s)
        last_step = np.concatenate([np.flatnonzero(np.diff(sch.step_batch)), [sch.n_steps - 1]])
        end = sch.step_end[last_step]  # end of batch t's last step
        cum = np.cumsum(sch.steps_per_batch)
        rate = sch.n_batches / sch.makespan
        busy = np.cumsum(sch.step_end - sch.step_start)[last_step]
        for T in np.append(draws, T_med):
            if not math.isfinite(T):
                walls.append(math.inf)
                steps.append(math.inf)
                continue
            t = int(math.ceil(T))
            if t <= sch.n_batches:
                w, k, b = float(end[t - 1]), float(cum[t - 1]), float(busy[t - 1])
            else:  # beyond the simulated horizon: extend at the steady rate
                w = float(end[-1]) + (t - sch.n_batches) / rate
                k = float(cum[-1]) * t / sch.n_batches
                b = float(busy[-1]) * t / sch.n_batches
            walls.append(w)
            steps.append(k)
            utils.append(b / w)
        med.append((walls[-1], steps[-1]))
    walls = np.array(walls)
    return Outcome(mean_echo=kbar,
                   batches_to_target=float(math.ceil(T_med)) if math.isfinite(T_med) else math.inf,
                   steps_to_target=float(np.median([m[1] for m in med])),
                   wall_clock_to_target=float(np.median([m[0] for m in med])),
                   wall_clock_low=quantile(walls, BAND[0]), wall_clock_high=quantile(walls, BAND[1]),
                   wall_clock_seeds=tuple(float(m[0]) for m in med),
                   utilization=float(np.median(utils)) if utils else math.nan,
                   throughput=float(sm["throughput"]))


def quantile(x, q: float) -> float:
    """np.quantile that lets +inf (never reached) through instead of giving NaN."""
    x = np.asarray(x, dtype=float)
    big = np.finfo(float).max / 4
    v = float(np.quantile(np.where(np.isinf(x), big, x), q))
    return math.inf if v >= big / 2 else v
