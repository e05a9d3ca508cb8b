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
resolved (each point by `echosim.experiments.resolve`), and every Problem, Optimizer
and Pipeline constructed, before any run starts. The full schema is in ``docs/sweep.md``.
"""

from __future__ import annotations

import copy
import itertools
import math
import tomllib
import warnings
from pathlib import Path


from echosim.experiments.analysis import analysis_settings
from echosim.pipeline.model import POLICIES
from echosim.experiments.grid import _AxisRef, _field_for, _Grid, _joint
from echosim.experiments.limits import MAX_CONFIG_BYTES, check_run_count, check_run_size, check_useful, check_window
from echosim.experiments.resolve import resolve_point
from echosim.pipeline.sizes import read_bounded
from echosim.experiments.schema import (
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
from echosim.experiments.specs import SweepConfig, canonical_json, make_spec, stable_hash

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
        base = resolve_point(point, labels, usage, caches)
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
