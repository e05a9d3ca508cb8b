"""Sweep configuration: a TOML file (or dict) ⇄ validated run specs, grid expansion, clear errors.

A config has four sections and an optional fifth:

    [problem]    what is optimised (LeastSquares, Logistic, Dataset)
    [pipeline]   the data pipeline that decides when batches arrive (optional)
    [optimizer]  method, learning rate, batch size B, echo factor K
    [sweep]      seeds, budget (fresh batches T or a wall-clock budget), target
    [joint]      parameters that vary together (optional)

Any scalar may be a list, and lists form a grid (benchopt's ``product_param``): the
runs are every combination, times ``sweep.repetitions`` seeds. A key of the form
``"a, b" = [[a1, b1], [a2, b2]]`` varies ``a`` and ``b`` jointly instead of crossing
them (benchopt's joint keys; ``[joint]`` takes full key paths such as
``"optimizer.batch_size, sweep.n_batches"``). Learning rates may also be
``"paper"`` (the 61 values 10^(-2 + i/20), 0.01 to 10) or a log-spaced table
``{start = 0.01, stop = 10, per_decade = 20}`` / ``{start, stop, num}``.

Every error is a `ConfigError` (a ValueError) whose message is one line naming the
key path, e.g. ``optimizer.lr[2]: must be a number >= 0, got -1``. The whole grid is
resolved, and every Problem, Optimizer and Pipeline constructed, before any run
starts. The full schema is in ``docs/sweep.md``.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import itertools
import math
import tomllib
import warnings
from pathlib import Path


from echosim.experiments.analysis import analysis_settings
from echosim.pipeline.model import POLICIES, check_echo
from echosim.training.methods import METHODS
from echosim.experiments.grid import _AxisRef, _field_for, _Grid, _joint
from echosim.experiments.limits import MAX_CONFIG_BYTES, check_run_count, check_run_size, check_useful, check_window
from echosim.pipeline.sizes import check_file_size, memory_limit, read_bounded
from echosim.experiments.schema import (
    _RUN_KEYS,
    _SETTING_KEYS,
    DEFAULT_TOML,
    FIELDS,
    SCHEMA,
    SECTIONS,
    TARGETS,
    ConfigError,
    ConfigWarning,
    _show,
)
from echosim.experiments.specs import (
    SweepConfig,
    jsonable,
    make_spec,
    build_optimizer,
    build_pipeline,
    build_problem,
    canonical_json,
    stable_hash,
)

__all__ = ["load_config", "parse_config", "default_config"]

# --------------------------------------------------------------------------- loading


def default_config(overrides=(), quick: bool = False, values=None) -> SweepConfig:
    """The embedded Figure-2-style sweep (``echosim/default_sweep.toml``)."""
    from importlib import resources

    text = resources.files("echosim").joinpath(DEFAULT_TOML).read_text(encoding="utf-8")
    return _from_text(text, source="<default>", base_dir=Path.cwd(), overrides=overrides, quick=quick, values=values)


def load_config(path=None, overrides=(), quick: bool = False, values=None) -> SweepConfig:
    """Read and validate a TOML config (None: the embedded default).

    `overrides` are ``"key.path=value"`` strings, the value in TOML syntax (a bare
    word is taken as a string), applied before validation. `values` maps key paths to
    Python values, or to (value, label) pairs whose label names the value's origin in
    error messages (the CLI's ``--echo`` passes its number so). With `quick`, the
    config's ``[quick]`` table (key paths → values, a small variant for CI and
    previews) is applied first.
    """
    if path is None:
        return default_config(overrides, quick, values)
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"cannot read config file {str(path)!r}: it is a directory")
    try:
        data = read_bounded(p, MAX_CONFIG_BYTES, "config file")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if b"\x00" in data:
        raise ConfigError(f"cannot read config file {str(path)!r}: it is not text (it holds NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {str(path)!r}: not UTF-8 text (byte {exc.start})") from None
    return _from_text(text, source=str(path), base_dir=p.resolve().parent, overrides=overrides, quick=quick,
                      values=values)


def _from_text(text, source, base_dir, overrides, quick=False, values=None):
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}") from None
    return parse_config(data, source=source, base_dir=base_dir, overrides=overrides, text=text, quick=quick,
                        values=values)


def _quick_overrides(table) -> list[str]:
    """The ``[quick]`` table as override strings: ``"section.key" = value`` entries."""
    if not isinstance(table, dict):
        raise ConfigError(f"quick: must be a table of key paths, got {_show(table)}")
    out = []
    for key, value in table.items():
        if "." not in key:
            raise ConfigError(f'quick."{key}": keys are dotted paths such as "optimizer.echo"')
        section, _, rest = key.partition(".")
        out.append((section, rest, value))
    return out


def _parse_override(item: str):
    """"key.path=value" → (["key", "path"], value); keys may be quoted as in TOML."""
    if not isinstance(item, str) or "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. optimizer.echo=[1,2,4]")
    key, _, raw = item.partition("=")
    try:
        node = tomllib.loads(f"{key.strip()} = 0")
    except tomllib.TOMLDecodeError:
        node = None
    parts = []
    while isinstance(node, dict) and len(node) == 1:
        k, node = next(iter(node.items()))
        parts.append(k)
    if node != 0 or len(parts) < 2:
        raise ConfigError(f"--set {item!r}: KEY must be a dotted path such as optimizer.lr "
                          '(quote a joint key: joint."optimizer.batch_size, sweep.n_batches")')
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return parts, value


def _apply_overrides(data: dict, overrides) -> None:
    for item in overrides:
        parts, value = _parse_override(item)
        node = data
        for k in parts[:-1]:
            nxt = node.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {item!r}: {k} is not a table")
            node = nxt
        node[parts[-1]] = value


def _apply_values(data: dict, values: dict) -> dict:
    """Set key paths to Python values; returns {path: label} for those given with a label."""
    labels = {}
    for path, value in values.items():
        section, _, key = path.partition(".")
        if not key or "." in key:
            raise ConfigError(f"{path}: expected a key path section.key")
        if isinstance(value, tuple):
            value, labels[path] = value
        table = data.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table [{section}], got {_show(table)}")
        table[key] = value
    return labels


def parse_config(data: dict, *, source: str = "<dict>", base_dir=None, overrides=(), text: str = "",
                 quick: bool = False, values=None) -> SweepConfig:
    """Validate a config dict (as from `tomllib`) and expand it into run specs.

    `overrides` and `values` as for `load_config`. Raises `ConfigError` naming the key
    path (or a value's label) on any problem; every run's Problem, Optimizer and
    Pipeline is constructed here, before anything runs.
    """
    data = copy.deepcopy(data)
    quick_table = data.pop("quick", None) if isinstance(data, dict) else None
    if quick and quick_table is None:
        raise ConfigError(f"quick: {source} has no [quick] table (key paths → values of a small variant, see "
                          "docs/sweep.md); run without --quick, or add one")
    if quick:
        for section, key, value in _quick_overrides(quick_table):
            target = data.get("joint") if section == "joint" else data.get(section)
            if not isinstance(target, dict) or key not in target:
                raise ConfigError(f'quick."{section}.{key}": the config has no {section}.{key} to replace')
            target[key] = value
    _apply_overrides(data, overrides)
    labels = _apply_values(data, values or {})
    base_dir = Path(base_dir) if base_dir is not None else Path.cwd()
    if not isinstance(data, dict):
        raise ConfigError("the config must be a table of sections")
    unknown = [k for k in data if k not in SECTIONS and k != "joint"]
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section; allowed: {', '.join(SECTIONS)}, joint")
    for s in ("problem", "optimizer", "sweep"):
        if s not in data:
            raise ConfigError(f"{s}: missing section [{s}]")
    grid = _Grid(base_dir)
    for section in SECTIONS:
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: must be a table [{section}], got {_show(table)}")
        for key, value in table.items():
            if "," in key:
                _joint(grid, section, key, value)
            else:
                path = f"{section}.{key}"
                grid.add(path, _field_for(path, path), value, labels.get(path, path))
    joint = data.get("joint", {})
    if not isinstance(joint, dict):
        raise ConfigError(f"joint: must be a table [joint], got {_show(joint)}")
    for key, value in joint.items():
        if "," not in key:
            raise ConfigError(f'joint."{key}": a joint key names two or more keys separated by commas')
        _joint(grid, None, key, value)

    settings = _settings(grid, source)
    given = tuple(f"{k}={v[0] if isinstance(v, tuple) else v!r}" for k, v in (values or {}).items())
    return _expand(grid, settings, source=source, text=text, overrides=tuple(overrides) + given)


def _settings(grid: _Grid, source: str) -> dict:
    s = {}
    for k in _SETTING_KEYS:
        fld = FIELDS["sweep"][k]
        s[k] = grid.fixed.get(f"sweep.{k}", fld.default)
    if s["name"] is None:
        s["name"] = Path(source).stem if not source.startswith("<") else source.strip("<>")
    given = [k for k in TARGETS if s[k] is not None]
    if len(given) > 1:
        raise ConfigError(f"sweep.{given[1]}: give one target: rtol (relative to F*), atol (excess risk) "
                          f"or fraction (of the initial excess risk), not {' and '.join(given)}")
    s.update(analysis_settings(s))  # the default target (rtol) where none is given
    if "sweep.hold" in grid.declared and s["rule"] != "hold":
        raise ConfigError(f"sweep.hold: applies only to sweep.rule = 'hold' (the rule here is {s['rule']!r})")
    has_T = "sweep.n_batches" in grid.declared
    has_budget = "sweep.time_budget" in grid.declared
    if has_T == has_budget:
        raise ConfigError("sweep.n_batches: set exactly one of sweep.n_batches (fresh batches T) "
                          "or sweep.time_budget (simulated wall-clock)")
    return s


# --------------------------------------------------------------------------- expansion


class _Usage:
    """Which declared keys applied to at least one run (the rest are errors)."""

    def __init__(self):
        self.used: set[str] = set()

    def use(self, path):
        self.used.add(path)


def _points(grid: _Grid):
    for combo in itertools.product(*[range(len(a.values)) for a in grid.axes]):
        point = dict(grid.fixed)
        labels = dict(grid.fixed_labels)
        for a, i in zip(grid.axes, combo):
            for p, v, lab in zip(a.paths, a.values[i], a.labels[i]):
                point[p] = v
                labels[p] = lab
        # fill service templates whose keys are axes
        for p, v in list(point.items()):
            if isinstance(v, dict):
                point[p] = {k: (point[x.path] if isinstance(x, _AxisRef) else x) for k, x in v.items()}
                for k, x in v.items():
                    if isinstance(x, _AxisRef):
                        labels[p] = labels[p] + f" ({k} from {labels[x.path]})"
        yield point, labels


def _expand(grid: _Grid, settings: dict, *, source, text, overrides) -> SweepConfig:
    usage = _Usage()
    caches: dict = {"problem": {}, "pipeline": {}, "useful": {}}
    runs, seen = [], set()
    check_run_count(math.prod(len(a.values) for a in grid.axes), settings["repetitions"],
                    [(" / ".join(a.paths), len(a.values)) for a in grid.axes])
    n_points = 0
    notes: dict[str, str] = {}
    most_points = 0.0
    for point, labels in _points(grid):
        n_points += 1
        base = _resolve(point, labels, usage, caches)
        check_run_size(base, lambda p, labels=labels: labels.get(p, p))
        ukey = canonical_json([base["pipeline"], base["echo"], base["run"]])  # not the lr or the method
        if ukey not in caches["useful"]:
            caches["useful"][ukey] = check_useful(base, lambda p, labels=labels: labels.get(p, p), notes)
        most_points = max(most_points, caches["useful"][ukey])
        for rep in range(settings["repetitions"]):
            spec = make_spec(base, rep, settings["seed"])
            if spec.run_id in seen:
                continue
            seen.add(spec.run_id)
            runs.append(spec)
    # keys that applied to no run at all
    for path, where in grid.declared.items():
        if path.startswith("sweep.") and path.split(".", 1)[1] in _SETTING_KEYS:
            continue
        if path not in usage.used and not any(u.startswith(path + ".") for u in usage.used):
            section, _, key = path.partition(".")
            fld = FIELDS.get(section, {}).get(key.split(".")[0])
            why = _applies_text(section, key, fld)
            raise ConfigError(f"{where}: applies to no run of this grid{why}")
    if settings["tune_by"] == "time" and any(r.pipeline is None for r in runs):
        raise ConfigError("sweep.tune_by: 'time' needs a [pipeline] section (simulated wall-clock)")
    check_window(settings["window"], most_points, notes)
    for text in notes.values():  # legal but pointless: said once, in one line
        warnings.warn(text, ConfigWarning, stacklevel=3)
    axes = tuple(dict.fromkeys(p for a in grid.axes for p in a.paths))
    chash = stable_hash({"schema": SCHEMA, "settings": settings, "runs": [r.run_id for r in runs]})
    return SweepConfig(runs=tuple(runs), settings=settings, axes=axes, source=source, text=text,
                       overrides=overrides, n_points=n_points, config_hash=chash)


def _applies_text(section, key, fld) -> str:
    if fld is None or not fld.applies:
        if section == "optimizer" and key == "echo":
            takes = " or ".join(repr(name) for name, p in POLICIES.items() if p.takes_echo)
            return f" (optimizer.echo applies to echoed methods without a pipeline or with pipeline.policy {takes})"
        return ""
    what = {"problem": "problem.kind", "optimizer": "optimizer.method", "pipeline": "pipeline.policy"}[section]
    return f" (it applies only when {what} is {' or '.join(repr(a) for a in fld.applies)})"


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


def _resolve(point, labels, usage, caches) -> dict:
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




