"""Form (a) of the planner's input: the problem's response to echoing simulated on an
echosim problem, through the sweep machinery (one config, learning rate tuned per
setting, budgets extended until the baseline reaches the target).

`problem_config` turns a preset name (``"logistic"``, ``"least_squares"``,
``"dataset:breast_cancer"``) or a ``[problem]`` dict into a resolved problem table;
`lr_grid_for` picks a learning-rate grid from the problem's smoothness, `method_lr_grid`
the grid of a method (its row's own, or that one). `compile_first` compiles every kernel
the plan uses before its first sweep; `processes_for` runs each sweep in this process
unless it is large and the host has idle cores.
"""

from __future__ import annotations

import math
import sys
import tempfile

import numpy as np

__all__ = ["PROBLEMS", "problem_config", "lr_grid_for", "method_lr_grid", "run_config", "initial_budget",
           "processes_for", "compile_first"]

PROBLEMS = {
    # ill-conditioned (eigenvalues i^-2, condition number 100), so curvature, not only noise, sets T
    "logistic": {"kind": "logistic", "dim": 10, "design": "gaussian", "decay": 2.0, "w_star_norm": 3.0},
    "least_squares": {"kind": "least_squares", "dim": 10, "design": "gaussian", "decay": 2.0,
                      "w_star_norm": 1.0, "noise_std": 0.5},
}
"""Preset problems of ``--problem``; ``dataset:NAME`` adds any named data set of echosim.datasets."""


def problem_config(problem) -> dict:
    """A ``[problem]`` table from a preset name, ``dataset:NAME`` or a dict (validated later)."""
    if isinstance(problem, dict):
        return dict(problem)
    if isinstance(problem, str):
        if problem in PROBLEMS:
            return dict(PROBLEMS[problem])
        if problem.startswith("dataset:") and len(problem) > len("dataset:"):
            return {"kind": "dataset", "name": problem.split(":", 1)[1]}
    raise ValueError(f"problem: expected one of {', '.join(PROBLEMS)}, 'dataset:NAME' (e.g. "
                     f"dataset:breast_cancer) or a [problem] table, got {problem!r}")


def lr_grid_for(problem_obj, decades: float = 3.5, per_decade: int = 4) -> dict:
    """A log grid from 8/β down `decades` decades.

    β is the problem's smoothness: for a finite data set with a margin loss the exact
    bound on the Hessian, λ_max(XᵀX/n)·c + l2 (c the loss row's ``curvature``: 1/4 for
    the logistic loss, 1 for the squared loss), otherwise the worst-case constant of
    ``problem.constants()``. The curvature the iterates meet is smaller still (for
    logistic losses by σ'(margin)), so the largest stable step lies above 2/β, and the
    grid reaches a little beyond it.
    """
    from echosim.training.losses import LOSSES

    beta = float(problem_obj.constants()["beta"])
    X = getattr(problem_obj, "X", None)
    row = LOSSES.get(getattr(problem_obj, "loss", None))
    if X is not None and row is not None and row.margin:
        lam = float(np.linalg.eigvalsh(X.T @ X / X.shape[0]).max())
        beta = lam * row.curvature + float(getattr(problem_obj, "l2", 0.0))
    stop = 8.0 / beta
    return {"start": stop / 10 ** decades, "stop": stop, "per_decade": per_decade}


def method_lr_grid(method: str, problem_obj) -> dict:
    """The planner's learning-rate grid for `method`: its row's own ``lr_grid`` (methods whose
    step 1/β does not set, such as Adam's), else `lr_grid_for` the problem."""
    from echosim.training.methods import get_method

    grid = get_method(method).lr_grid
    if grid is None:
        return lr_grid_for(problem_obj)
    start, stop, per_decade = grid
    return {"start": start, "stop": stop, "per_decade": per_decade}


def run_config(data: dict, workers: int, store_dir=None, progress=False, desc: str | None = None):
    """Parse and run a sweep config dict; its tables go to a temporary directory, its
    runs to the run store (`store_dir`, default the shared one: finished runs are reused).
    `desc` names its progress bar."""
    from echosim.experiments.config import parse_config
    from echosim.experiments.sweep import run_sweep

    conf = parse_config(data, source="<plan>")
    with tempfile.TemporaryDirectory(prefix="echosim-plan-") as d:
        return conf, run_sweep(conf, out=d, workers=workers, progress=bool(progress), store_dir=store_dir, desc=desc)


def _say(text: str) -> None:
    """One line on stderr before a wait: what is simulated next."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # pragma: no cover - stderr gone
        pass


def _candidate_words(cands) -> str:
    """"sync, fixed K=2/4/8, greedy, auto": the candidates of one sweep, in a few words."""
    from echosim.pipeline.model import POLICIES

    fixed = [str(int(c["echo"])) for c in cands if POLICIES[c["policy"]].takes_echo]
    out = []
    for c in cands:
        if POLICIES[c["policy"]].takes_echo:
            if fixed:
                out.append(f"{c['policy']} K=" + "/".join(fixed))
                fixed = []
        else:
            out.append(c["policy"])
    return ", ".join(out)


PARALLEL_WORK = 1e9
"""Kernel work (fresh batches · B · d · K, summed over a sweep's runs; about 0.4 s on one
core here) below which the planner runs a sweep in its own process: forking workers, each
drawing its own batches, costs more than it saves."""


def processes_for(processes: int, work: float) -> int:
    """Worker processes for one of the planner's sweeps: 1 for less than `PARALLEL_WORK`,
    else at most `processes`, the cores, and the cores the 1-minute load average leaves
    idle plus this process's own (as ``make --load-average`` does): on a busy host, extra
    processes only add their start-up. Results do not depend on it (see
    `echosim.experiments.sweep`)."""
    import os

    from echosim.experiments.executors import default_workers

    if processes <= 1 or work < PARALLEL_WORK:
        return 1
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):  # pragma: no cover - no load average here
        return processes
    cores = default_workers()
    return max(1, min(processes, cores, int(cores - load) + 1))


def _sweep_work(cs, n_batches: int, B: int, dim: int, n_lr: int, seeds: int) -> float:
    """`PARALLEL_WORK`'s units for candidates `cs` run `n_batches` fresh batches at each of
    `n_lr` learning rates and `seeds` seeds (K of greedy and auto: the ratio R, at most max_echo)."""
    from echosim.pipeline.model import POLICIES

    def k(c):
        p = POLICIES[c["policy"]]
        if p.takes_echo:
            return float(c["echo"])
        return min(float(c.get("R", 1.0)), float(c.get("max_echo") or 1)) if p.capped else 1.0

    return n_batches * B * dim * n_lr * seeds * sum(k(c) for c in cs)


_MAX_BUDGET = 64_000
"""Fresh batches beyond which the sync baseline's budget is no longer doubled (form (a))."""


def initial_budget(B: int) -> int:
    """Fresh batches the sync baseline's first runs get at batch size B (form (a) doubles
    it until the baseline reaches the target, up to `_MAX_BUDGET`)."""
    return int(max(40, min(4000, 6000 / math.sqrt(B))))


def compile_first(pconf: dict, optimizer: dict, pipeline: dict, policies, max_echo: int, processes: int,
                  announce=None) -> None:
    """Compile (or load from Numba's cache) every kernel the plan's sweeps will use, before
    the first: the optimizer's (one per layout, and the one recording first-step losses
    for a coupled policy such as "auto"), the batch draws and the pipeline simulator
    (`echosim.experiments.executors.warm_up` on a copy of the plan's config, parsed, never
    run). With `processes` ≥ 2 a helper process compiles the last two into Numba's cache
    while this one compiles the optimizer's, whatever the load (neither repeats the
    other's work); the sweeps then find every kernel compiled, and each runs in as many
    processes as pays (`processes_for`)."""
    import warnings

    from echosim.experiments.config import parse_config
    from echosim.experiments.executors import warm_up
    from echosim.pipeline.model import POLICIES

    policies = list(dict.fromkeys(policies))
    pipe = dict(pipeline)
    if any(POLICIES[q].capped for q in policies):
        pipe["max_echo"] = max_echo
    data = {"problem": pconf, "pipeline": pipe, "optimizer": {"lr": 1.0, "batch_size": 1, **optimizer},
            "sweep": {"n_batches": _MAX_BUDGET, "window": 1},  # parsed, never run
            "joint": {"pipeline.policy, optimizer.echo": [[q, 2 if POLICIES[q].takes_echo else 1] for q in policies]}}
    try:
        with warnings.catch_warnings():  # the sweeps say whatever applies to their own runs
            warnings.simplefilter("ignore")
            conf = parse_config(data, source="<plan>")
    except ValueError:  # a setting only the sweeps can word well: they compile what they use, as without this
        return
    warm_up(conf, max(1, int(processes)), announce=announce)


def _probe(pconf: dict, optimizer: dict | None = None):
    from echosim.experiments.config import parse_config
    from echosim.experiments.specs import build_problem

    conf = parse_config({"problem": pconf, "optimizer": {"lr": 1.0, "batch_size": 1, **(optimizer or {})},
                         "sweep": {"n_batches": 1, "window": 1}}, source="<plan>")
    return build_problem(conf.runs[0].problem)


def validate_problem(pconf: dict, optimizer: dict | None = None):
    """Build the problem once (ValueError naming the bad ``problem.*`` or ``optimizer.*``
    key); returns it."""
    return _probe(pconf, optimizer)


def _quantile(x, q: float) -> float:
    """np.quantile that lets +inf (never reached) through instead of giving NaN."""
    x = np.asarray(x, dtype=float)
    big = np.finfo(float).max / 4
    v = float(np.quantile(np.where(np.isinf(x), big, x), q))
    return math.inf if v >= big / 2 else v


def _service_table(dist) -> dict:
    from echosim.experiments.specs import jsonable

    return jsonable(dist.to_dict())


def _collect_failures(summary, failed: dict) -> None:
    """Add the failed runs of a sweep's summary to `failed` (run id -> policy, K, B, lr, error)."""
    if summary is None or not len(summary) or "status" not in summary:
        return
    for _, r in summary[summary["status"] == "failed"].iterrows():
        failed[r["run_id"]] = {"policy": r.get("pipeline.policy"), "echo": r.get("optimizer.echo"),
                               "batch_size": r.get("optimizer.batch_size"), "lr": r.get("optimizer.lr"),
                               "error": str(r.get("error") or "")}


def failures_note(failed: dict, store_root) -> str | None:
    """One sentence for the runs that failed inside a plan, or None."""
    if not failed:
        return None
    first = next(iter(failed.values()))
    by = {}
    for f in failed.values():
        by[f["policy"]] = by.get(f["policy"], 0) + 1
    which = ", ".join(f"{n} {p}" for p, n in by.items())
    return (f"{len(failed)} simulated run(s) failed ({which}; first: {first['policy']} at B = {first['batch_size']}, "
            f"lr {first['lr']:.3g}: {first['error']}); they count as never reaching the target, and their records "
            f"are in {store_root}/failed (re-run the same command to retry them)")


def run_candidates(specs, times, pconf, ctx, target, processes, results, progress=None):
    """Form (a) of `echosim.planner.plan`: simulate every candidate end to end.

    Per (B, workers, timing): a sweep whose runs are every candidate policy × a
    learning-rate grid × ``seeds`` repetitions, behind the candidate's loader and step
    times, tuned by wall-clock to target. The target is the user's: the loss reaches
    (1 + target)·F* and stays there to the end of the run. The budget of fresh batches
    is first found on the sync baseline (doubled until it reaches the target), then the
    same rule, 1.5× the baseline's T, is given to every candidate. `specs` are
    `echosim.planner.candidates.Candidate`s, `times` their (loader, step) service times,
    ``ctx["problem"]`` the problem built from `pconf` (built here if absent); returns
    (one `Outcome` per candidate, source text, notes).
    """
    from echosim.pipeline.model import POLICIES
    from echosim.planner.candidates import BASELINE, Outcome

    # read-only views of the candidates with their timing; the results go to `found`
    cands = [{**c.as_dict(), "loader_time": ld, "step_time_dist": st, "_i": i}
             for i, (c, (ld, st)) in enumerate(zip(specs, times))]
    found: list = [None] * len(cands)
    from echosim.experiments.sweep import require_extras

    require_extras()  # before saying what is simulated next
    optimizer = dict(ctx.get("optimizer") or {})
    failed = ctx.setdefault("failed_runs", {})  # run id -> what failed, over every sweep below
    problem_obj = ctx.get("problem")  # built by the caller when it checked the inputs
    if problem_obj is None:
        problem_obj = _probe(pconf, optimizer)
    lr = method_lr_grid(optimizer.get("method", "echoed_gd"), problem_obj)
    window = 1
    notes = []
    settings = {"name": "plan", "seed": ctx["seed"], "repetitions": ctx["seeds"], "rtol": float(target),
                "window": window, "iterate": "last", "tune_by": "time", "rule": "stable"}

    def timing_key(c):
        return (c["batch_size"], c["workers"], repr(c["loader_time"]), repr(c["step_time_dist"]))

    groups = list(dict.fromkeys(timing_key(c) for c in cands))
    many_w = len({g[1] for g in groups}) > 1
    first = cands[0]
    compile_first(pconf, optimizer, {"arrival": _service_table(first["loader_time"]),
                                     "step_time": _service_table(first["step_time_dist"]),
                                     "workers": first["workers"], "prefetch": ctx["prefetch"]},
                  [BASELINE] + [c["policy"] for c in cands], ctx["max_echo"], processes,
                  announce=sys.stderr if progress else None)
    for gi, gkey in enumerate(groups, 1):
        mine = [c for c in cands if timing_key(c) == gkey]
        B, W = gkey[0], gkey[1]
        where = f"B={B}" + (f" W={W}" if many_w else "")
        group = f"group {gi} of {len(groups)} (B = {B}, {W} loader worker{'s' if W > 1 else ''})"
        pipe = {"arrival": _service_table(mine[0]["loader_time"]), "step_time": _service_table(mine[0]["step_time_dist"]),
                "workers": W, "prefetch": ctx["prefetch"]}
        if not any(c["policy"] == BASELINE for c in mine):  # every timing group needs its own baseline budget
            mine_base = [{"policy": BASELINE, "echo": 1}]
        else:
            mine_base = [c for c in mine if c["policy"] == BASELINE]

        def sweep(cs, n_batches, desc):
            pol = [c["policy"] for c in cs]
            p = dict(pipe)
            if any(POLICIES[q].capped for q in pol):
                p["max_echo"] = ctx["max_echo"]
            data = {"problem": pconf, "pipeline": p,
                    "optimizer": {"lr": lr, "batch_size": B, **optimizer},
                    "sweep": dict(settings, n_batches=n_batches)}
            if any(POLICIES[q].takes_echo for q in pol):
                data["joint"] = {"pipeline.policy, optimizer.echo": [[c["policy"], int(c["echo"]) if
                                                                     POLICIES[c["policy"]].takes_echo else 1]
                                                                    for c in cs]}
            else:
                p["policy"] = list(dict.fromkeys(pol))
            n_lr = round((math.log10(lr["stop"]) - math.log10(lr["start"])) * lr["per_decade"]) + 1
            work = _sweep_work(cs, n_batches, data["optimizer"]["batch_size"], problem_obj.n_features, n_lr,
                               ctx["seeds"])
            rep = run_config(data, processes_for(processes, work), results, progress, desc)[1]
            _collect_failures(rep.summary, failed)
            return rep

        budget = initial_budget(B)
        search = 0
        while True:
            search += 1
            left = int(math.log2(_MAX_BUDGET / budget)) if budget * 2 <= _MAX_BUDGET else 0
            if progress:
                _say(f"plan, {group}: sync alone for {budget} fresh batches, to find the budget (step {search}; "
                     f"at most {left} more doubling{'s' if left != 1 else ''}, then the {len(mine)} candidates: "
                     f"{_candidate_words(mine)})")
            rep = sweep(mine_base, budget, f"plan {gi}/{len(groups)} {where}: sync, budget {budget}")
            r = rep.tuned.iloc[0]
            if r["n_converged"] * 2 > r["n_seeds"] and math.isfinite(r["conv_time"]):
                T1 = float(r["conv_batches"])
                break
            if budget * 2 > _MAX_BUDGET:
                T1 = math.inf
                break
            budget *= 2
        if math.isfinite(T1):
            n_budget = int(math.ceil(1.5 * T1)) + 5
            if progress:
                _say(f"plan, {group}: the {len(mine)} candidates ({_candidate_words(mine)}) for {n_budget} fresh "
                     f"batches each, last step of this group")
            rep = sweep(mine, n_budget, f"plan {gi}/{len(groups)} {where}: {len(mine)} candidates")
        else:
            n_budget = budget
            notes.append(f"B = {B}, {W} worker(s): without echoing the target is not reached within "
                         f"{budget} fresh batches")
        summary, tuned = rep.summary, rep.tuned
        for c in mine:
            sel_t = tuned["pipeline.policy"] == c["policy"]
            sel_s = summary["pipeline.policy"] == c["policy"]
            if POLICIES[c["policy"]].takes_echo:
                sel_t &= tuned["optimizer.echo"] == c["echo"]
                sel_s &= summary["optimizer.echo"] == c["echo"]
            if not sel_t.any():  # sync-only budget search failed: the fixed/greedy runs never ran
                found[c["_i"]] = dict(mean_echo=math.nan, batches_to_target=math.inf, steps_to_target=math.inf,
                                      wall_clock_to_target=math.inf, wall_clock_low=math.inf,
                                      wall_clock_high=math.inf, utilization=math.nan, throughput=math.nan,
                                      lr=math.nan)
                continue
            t = tuned[sel_t].iloc[0]
            lr_star = t["optimizer.lr"]
            rows = summary[sel_s & (summary["optimizer.lr"] == lr_star)] if math.isfinite(lr_star) else summary[sel_s]
            conv_t = rows["conv_time"].to_numpy(float)
            conv_t = np.where(np.isnan(conv_t), np.inf, conv_t)
            conv_b = rows["conv_batches"].to_numpy(float)
            conv_k = rows["conv_steps"].to_numpy(float)
            ok = np.isfinite(conv_t)
            kbar = float(np.median(rows["schedule.mean_echo"]))
            if ok.any() and POLICIES[c["policy"]].capped:
                kbar = float(np.median(conv_k[ok] / conv_b[ok]))
            res = {}
            if c["policy"] == "auto":  # the caps it chose, in the first seed's run at the tuned lr
                res["caps"] = c["caps"] = str(rows["auto.caps"].iloc[0]) if "auto.caps" in rows and len(rows) else ""
            found[c["_i"]] = res
            res.update(mean_echo=kbar, lr=float(lr_star),
                     lr_edge=str(t["lr_edge"]), converged=f"{int(ok.sum())}/{len(rows)}",
                     batches_to_target=float(np.median(conv_b)) if math.isfinite(lr_star) else math.inf,
                     steps_to_target=float(np.median(conv_k)) if math.isfinite(lr_star) else math.inf,
                     wall_clock_to_target=float(np.median(conv_t)) if math.isfinite(lr_star) else math.inf,
                     wall_clock_low=_quantile(conv_t, 0.1), wall_clock_high=_quantile(conv_t, 0.9),
                     wall_clock_seeds=[float(x) for x in conv_t],
                     utilization=float(np.median(conv_k[ok] * c["step_time_dist"].mean / conv_t[ok]))
                     if ok.any() else math.nan,
                     throughput=float(np.median(rows["schedule.throughput"])), budget=n_budget)
            name = f"{c['policy']}{' K=' + str(c['echo']) if POLICIES[c['policy']].takes_echo else ''} at B = {B}"
            if math.isfinite(T1) and ok.sum() * 2 <= len(rows):
                notes.append(f"{name}: reached the target and stayed there on {int(ok.sum())} of {len(rows)} "
                             f"seeds within the budget of {n_budget} fresh batches (1.5x sync's)")
            if t["lr_edge"]:
                notes.append(f"{name}: the tuned learning rate is the {t['lr_edge']}est of the grid "
                             f"({lr['start']:.3g}...{lr['stop']:.3g}); its time to target may be pessimistic")
    if any(c["policy"] == "auto" for c in cands):
        notes.append("auto: simulated with the controller echoing(policy='auto') runs in a real loop "
                     "(echosim.control.auto.AutoEcho), each run's caps decided from its own simulated first-step "
                     "losses and loader times (caps over fresh batches, first seed: "
                     + "; ".join(f"B = {c['batch_size']}: {c.get('caps') or '-'}" for c in cands
                                 if c["policy"] == "auto") + ")")
    name = pconf.get("name", pconf["kind"])
    how = "" if optimizer.get("method", "echoed_gd") == "echoed_gd" else " with " + ", ".join(
        f"{k} {v}" for k, v in optimizer.items()).replace("method ", "")
    source = (f"form (a): every candidate simulated on the {name} problem (echosim){how}, learning rate tuned per "
              f"candidate by wall-clock to target over {lr['start']:.3g}...{lr['stop']:.3g} "
              f"({lr['per_decade']} per decade), {ctx['seeds']} seeds; target: the loss reaches "
              f"(1 + {target:g}) F* and stays there to the end of the budget (1.5x sync's fresh batches to "
              "target, the same for every candidate); band: 10-90% over seeds (loader times and data)")
    missing = dict(mean_echo=math.nan, batches_to_target=math.inf, steps_to_target=math.inf,
                   wall_clock_to_target=math.inf, wall_clock_low=math.inf, wall_clock_high=math.inf)
    return [Outcome.from_fields(f if f is not None else missing) for f in found], source, notes
