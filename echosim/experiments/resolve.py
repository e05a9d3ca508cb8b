"""One grid point of a sweep config → the resolved dicts of one run, every object checked.

`resolve_point` takes a point (key path → value, after grid expansion in
`echosim.experiments.config`) and returns its problem, optimizer, pipeline, echo
factor K and run budget as plain dicts, with defaults filled in from the schema's
`FIELDS` and only the keys that apply to the point's kind, method and policy. On the
way it builds the Problem, the Optimizer and the Pipeline once (cached across points
that share them) so that a bad value is a `ConfigError` naming its key before any run
starts: a data file is read for its digest, service times are sampled once to refuse
ones that overflow, and ``lr = "theory"`` becomes the step size the method's bound is
tuned with. It records which declared keys applied (``usage``): the config refuses
the rest.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import math
from pathlib import Path

from echosim.experiments.schema import _RUN_KEYS, FIELDS, ConfigError
from echosim.experiments.specs import (
    build_optimizer,
    build_pipeline,
    build_problem,
    canonical_json,
    jsonable,
)
from echosim.pipeline.model import POLICIES, check_echo
from echosim.pipeline.sizes import check_file_size, memory_limit
from echosim.training.methods import METHODS

__all__ = ["resolve_point"]


def _get(point, usage, section, key, default, applies_to=None):
    path = f"{section}.{key}"
    fld = FIELDS[section][key]
    if fld.applies and applies_to not in fld.applies:
        return None, False
    if path in point:
        usage.use(path)
        return point[path], True
    return default, False


def _section(point, usage, section: str, selector, skip=(), where: str = "") -> dict:
    """The resolved keys of one section that apply to `selector` (a policy or a method)."""
    out = {}
    for key, fld in FIELDS[section].items():
        if key in skip:
            continue
        value, _ = _get(point, usage, section, key, fld.default_for(selector), selector)
        if fld.applies and selector not in fld.applies:
            continue
        if value is None and fld.required:
            raise ConfigError(f"{section}.{key}: required{where} ({fld.describe()})")
        out[key] = value
    return out


def resolve_point(point, labels, usage, caches) -> dict:
    """Point (path → value) → resolved dicts plus the constructed objects' checks."""
    lab = lambda p: labels.get(p, p)  # noqa: E731

    # ---- problem
    kind = point.get("problem.kind")
    if kind is None:
        raise ConfigError("problem.kind: required; " + FIELDS["problem"]["kind"].describe())
    usage.use("problem.kind")
    problem = {"kind": kind}
    for key, fld in FIELDS["problem"].items():
        if key == "kind":
            continue
        default = fld.default_for(kind)
        value, _ = _get(point, usage, "problem", key, default, kind)
        if fld.applies and kind not in fld.applies:
            continue
        if value is None:
            if fld.required:
                raise ConfigError(f"problem.{key}: required for kind {kind!r} ({fld.describe()})")
            continue
        problem[key] = value
    if kind == "dataset":
        problem = _resolve_dataset(problem, lab)
    pkey = canonical_json(problem)
    if pkey not in caches["problem"]:
        try:
            with _numerics() if kind != "dataset" else contextlib.nullcontext():  # data sets warn their own way
                caches["problem"][pkey] = build_problem(problem)
        except (ValueError, ImportError, ArithmeticError) as exc:  # ImportError: an extra is missing
            where = ", ".join(sorted({lab(p) for p in point if p.startswith("problem.")}))
            raise ConfigError(f"problem ({where}): {_reason(exc)}") from None
    problem_obj = caches["problem"][pkey]

    # ---- pipeline
    has_pipeline = any(p.startswith("pipeline.") for p in point)
    pipeline = None
    policy = None
    if has_pipeline:
        policy = point.get("pipeline.policy", FIELDS["pipeline"]["policy"].default)
        pipeline = _section(point, usage, "pipeline", policy, where=" in [pipeline]")

    # ---- optimizer
    method = point.get("optimizer.method", FIELDS["optimizer"]["method"].default)
    if "optimizer.method" in point:
        usage.use("optimizer.method")
    row = METHODS[method]
    optimizer = {"method": method, **_section(point, usage, "optimizer", method, skip=("method", "echo"))}
    # ---- the echo factor K: owned by the schedule's echo policy (a fixed pipeline, or K
    # steps per batch), checked here once by its owner's check_echo
    prow = None if policy is None else POLICIES.get(policy)
    echo_applies = not row.one_step and (pipeline is None or (prow is not None and prow.takes_echo))
    echo = None
    if echo_applies:
        K = point.get("optimizer.echo", 1.0)
        if "optimizer.echo" in point:
            usage.use("optimizer.echo")
        try:
            K = check_echo(K, lab("optimizer.echo"), integer=pipeline is None)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        echo = int(K) if K == math.floor(K) else K
    elif row.one_step and prow is not None and not prow.one_step_per_batch:
        raise ConfigError(f"{lab('optimizer.method')}: {method} takes one step per fresh batch, but "
                          f"{lab('pipeline.policy')} = {policy!r} does not; use policy 'sync' or 'fixed'")
    elif prow is None or not prow.capped:
        echo = 1
    try:
        with _numerics():
            build_optimizer(dict(optimizer, lr=0.0) if optimizer["lr"] == "theory" else optimizer).check_batch_size(
                optimizer["batch_size"])
    except (ValueError, ArithmeticError) as exc:
        where = ", ".join(sorted({lab(p) for p in point if p.startswith("optimizer.")}))
        raise ConfigError(f"optimizer ({where}): {exc}") from None

    # ---- the pipeline object (needs K)
    if pipeline is not None:
        key = canonical_json([pipeline, echo, optimizer["batch_size"]])
        if key not in caches["pipeline"]:  # the same for every learning rate and method
            caches["pipeline"][key] = _resolve_pipeline(pipeline, echo, point, lab, optimizer["batch_size"])
        pipeline = copy.deepcopy(caches["pipeline"][key])

    # ---- run budget
    run = {}
    for key in _RUN_KEYS:
        fld = FIELDS["sweep"][key]
        value, _ = _get(point, usage, "sweep", key, fld.default)
        if value is not None:
            run[key] = value
    if prow is not None and prow.coupled:
        for key in ("time_budget", "max_steps"):
            if key in run:
                raise ConfigError(f"{lab('sweep.' + key)}: pipeline.policy {policy!r} is simulated with the run "
                                  "(its caps depend on the losses) for sweep.n_batches fresh batches; give "
                                  f"sweep.n_batches instead of sweep.{key}")
    if "time_budget" in run and pipeline is None:
        raise ConfigError(f"{lab('sweep.time_budget')}: a time budget needs a [pipeline] section "
                          "(simulated wall-clock); use sweep.n_batches without one")
    if "log_points" in run and "sweep.log_every" in point:
        raise ConfigError(f"{lab('sweep.log_points')}: give log_points or log_every, not both")
    if optimizer["lr"] == "theory":
        optimizer.update(_theory_step(problem_obj, optimizer, echo, run, lab))
    return {"problem": problem, "optimizer": optimizer, "pipeline": pipeline, "echo": echo, "run": run,
            "labels": labels, "problem_obj": problem_obj}


def _theory_step(problem, optimizer: dict, echo, run: dict, lab) -> dict:
    """lr = "theory": the step size (and prox weight) the method's bound is tuned with,
    for the problem's constants, B, K and the horizon T = n_batches."""
    import theory

    where = lab("optimizer.lr")
    if "n_batches" not in run or echo is None:
        raise ConfigError(f"{where}: 'theory' needs sweep.n_batches (the horizon T) and a fixed K "
                          "(not pipeline.policy 'greedy')")
    c = problem.constants()
    if not all(math.isfinite(c[k]) and c[k] > 0 for k in ("beta", "rho", "D")):
        raise ConfigError(f"{where}: 'theory' needs finite constants β, ρ, D > 0; this problem has {c}")
    kw = dict(beta=c["beta"], rho=c["rho"], D=c["D"], B=optimizer["batch_size"], T=run["n_batches"], K=float(echo))
    rule = METHODS[optimizer["method"]].lr_rule
    if rule is None:
        raise ConfigError(f"{where}: 'theory' is the step size a method's bound is tuned with; "
                          f"{optimizer['method']} has no bound (no theorem of the paper covers it): give a number")
    if rule == "echoed_prox_param":  # the prox bound tunes the weight λ and the inner step together
        lam, inner = (float(v) for v in theory.echoed_prox_param(**kw))
        return {"lr": inner, "lam": lam, "lr_rule": "theory"}
    return {"lr": float(getattr(theory, rule)(**kw)), "lr_rule": "theory"}


def _resolve_pipeline(pipeline, K, point, lab, batch_size: int) -> dict:
    from echosim.pipeline.batch_time import BatchTime, is_batch_time
    from echosim.pipeline.service_times import as_service_time

    out = {}
    services = {}
    for key in ("arrival", "step_time"):
        try:
            spec = pipeline[key]
            if is_batch_time(spec):  # t_up(B) = a + b·B: this run's B fixes the service time
                if key != "arrival":
                    raise ValueError("kind 'affine' applies to the loader (pipeline.arrival) only")
                spec = BatchTime.from_dict(spec).at(batch_size)
            with _numerics():
                svc = _usable_service(as_service_time(spec))
        except (ValueError, ArithmeticError) as exc:
            raise ConfigError(f"{lab('pipeline.' + key)}: {_reason(exc)}") from None
        services[key] = svc
    for key, value in pipeline.items():
        if key in services:
            out[key] = _service_dict(services[key])
            out[key + "_name"] = repr(services[key])
            out[key + "_mean"] = float(services[key].mean)
        else:
            out[key] = value
    try:
        with _numerics():
            build_pipeline(out, K)
    except (ValueError, ArithmeticError) as exc:
        where = ", ".join(sorted({lab(p) for p in point if p.startswith("pipeline.")}))
        raise ConfigError(f"pipeline ({where}): {_reason(exc)}") from None
    return out


def _numerics():
    """Validation raises on floating-point overflow instead of warning (then failing later)."""
    import numpy as np

    return np.errstate(over="raise", invalid="raise", divide="raise")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ArithmeticError):
        return f"its numbers overflow ({' '.join(str(exc).split()) or type(exc).__name__}); use smaller values"
    return str(exc)


def _usable_service(svc):
    """`svc` if its mean is finite and its draws are finite numbers; ValueError otherwise.

    Parameters can each be finite and still overflow together (a gamma with cv = 1e300,
    a log-normal whose variance is beyond any float): that is refused here, not in
    every run. An infinite variance (Pareto with alpha <= 2) is fine.
    """
    import numpy as np

    mean, var = float(svc.mean), float(svc.variance)
    if not (math.isfinite(mean) and mean > 0) or math.isnan(var):
        raise ValueError(f"{svc!r} has mean {mean:g} and variance {var:g}; both must be numbers (the mean finite)")
    draws = np.asarray(svc.sample(np.random.default_rng(0), 64), dtype=np.float64)
    if not np.isfinite(draws).all():
        raise ValueError(f"{svc!r} draws times that are not finite numbers; use smaller parameters")
    return svc


def _service_dict(svc) -> dict:
    d = svc.to_dict()
    return {k: jsonable(v) for k, v in d.items()}


def _resolve_dataset(problem: dict, lab) -> dict:
    if ("name" in problem) == ("path" in problem):
        raise ConfigError("problem.path: a dataset needs exactly one of problem.name (a named data set: "
                          "breast_cancer, digits, iris, wine, covertype, mnist) or problem.path (a file)")
    out = dict(problem)
    if "name" in problem:
        if "format" in problem or "positive" in problem:
            key = "format" if "format" in problem else "positive"
            raise ConfigError(f"{lab('problem.' + key)}: applies only to a data file (problem.path)")
        return out
    p = Path(problem["path"])
    label = lab("problem.path")
    try:  # a regular file that fits in memory (not /dev/zero, a pipe or a directory)
        check_file_size(p, memory_limit(), "data file")
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()[:16]
    except ValueError as exc:
        raise ConfigError(f"{label}: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read data file {str(p)!r}: {exc.strerror or exc}") from None
    if "format" not in out:
        name = p.name.lower()
        out["format"] = ("npz" if name.endswith(".npz") else
                         "svmlight" if any(t in name for t in (".svm", ".svmlight", ".libsvm")) else "csv")
    out["digest"] = digest
    return out
