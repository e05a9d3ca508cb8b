"""Grid parsing: a config's raw tables → fixed values and axes (lists multiply, joint
keys vary together, learning-rate tables expand)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from echosim.experiments.schema import FIELDS, PAPER_LRS, SECTIONS, ConfigError, Field, _is_real, _show, lr_grid

# --------------------------------------------------------------------------- parsing


@dataclass
class _Axis:
    paths: tuple  # key paths set together
    values: list  # one tuple per grid point
    labels: list  # one tuple of display labels per grid point


class _Grid:
    """Collects fixed values and axes from the raw tables."""

    def __init__(self, base_dir):
        self.fixed: dict[str, Any] = {}
        self.fixed_labels: dict[str, str] = {}
        self.axes: list[_Axis] = []
        self.declared: dict[str, str] = {}
        self.base_dir = base_dir

    def _declare(self, path, where):
        if path in self.declared:
            raise ConfigError(f"{path}: set twice ({self.declared[path]} and {where})")
        self.declared[path] = where

    def add(self, path: str, fld: Field, value, label: str):
        self._declare(path, label)
        if fld.kind == "service":
            return self._add_service(path, value, label)
        if fld.kind == "lr":
            values = _lr_values(label, value)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.fixed[path], self.fixed_labels[path] = values[0], label
            else:
                self._axis((path,), [(v,) for v in values],
                           [(f"{label}[{i}]",) for i in range(len(values))], label)
            return
        if isinstance(value, list):
            if not fld.grid:
                raise ConfigError(f"{label}: cannot be a list (a sweep-wide setting); must be {fld.describe()}")
            checked = [fld.check(f"{label}[{i}]", v) for i, v in enumerate(value)]
            if path == "problem.path":
                checked = [self._absolute(v) for v in checked]
            self._axis((path,), [(v,) for v in checked], [(f"{label}[{i}]",) for i in range(len(value))], label)
        else:
            value = fld.check(label, value)
            if path == "problem.path":
                value = self._absolute(value)
            self.fixed[path], self.fixed_labels[path] = value, label

    def _absolute(self, p: str) -> str:
        q = Path(p).expanduser()
        return str(q if q.is_absolute() else self.base_dir / q)

    def _axis(self, paths, values, labels, label):
        if not values:
            raise ConfigError(f"{label}: an empty list gives no runs")
        self.axes.append(_Axis(tuple(paths), values, labels))

    def _add_service(self, path, value, label):
        if isinstance(value, list):
            if not value:
                raise ConfigError(f"{label}: an empty list gives no runs")
            for i, v in enumerate(value):
                _check_service_value(f"{label}[{i}]", v, allow_lists=False)
            vals = [(self._service_paths(copy.deepcopy(v)),) for v in value]
            self.axes.append(_Axis((path,), vals, [(f"{label}[{i}]",) for i in range(len(value))]))
            return
        _check_service_value(label, value, allow_lists=True)
        if not isinstance(value, dict):
            self.fixed[path], self.fixed_labels[path] = value, label
            return
        # a table: its list-valued keys are axes of their own
        template = {}
        for k, v in value.items():
            sub = f"{path}.{k}"
            if isinstance(v, list) and k != "times":
                if not v:
                    raise ConfigError(f"{label}.{k}: an empty list gives no runs")
                self.axes.append(_Axis((sub,), [(x,) for x in v], [(f"{label}.{k}[{i}]",) for i in range(len(v))]))
                template[k] = _AxisRef(sub)
            elif isinstance(v, dict) and any(isinstance(x, list) for x in v.values()):
                raise ConfigError(f"{label}.{k}: lists inside a nested table are not supported; "
                                  f"list whole alternatives instead ({label} = [{{...}}, {{...}}])")
            else:
                template[k] = v
        self.fixed[path], self.fixed_labels[path] = self._service_paths(template), label

    def _service_paths(self, d):
        if isinstance(d, dict) and d.get("kind") == "trace" and "path" in d and isinstance(d["path"], str):
            p = Path(d["path"])
            d["path"] = str(p if p.is_absolute() else (self.base_dir / p))
        return d


@dataclass(frozen=True)
class _AxisRef:
    path: str


def _check_service_value(label, v, allow_lists):
    if isinstance(v, dict):
        if not allow_lists:
            for k, x in v.items():
                if isinstance(x, list) and k != "times":
                    raise ConfigError(f"{label}.{k}: lists inside a list of alternatives are not supported; "
                                      "list the alternatives in full")
        return
    if not _is_real(v) or not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{label}: must be {FIELDS['pipeline']['arrival'].describe()}, got {_show(v)}")


def _lr_values(label, value) -> list[float]:
    fld = FIELDS["optimizer"]["lr"]
    if value == "paper":
        return list(PAPER_LRS)
    if value == "theory":
        return ["theory"]
    if isinstance(value, dict):
        allowed = {"start", "stop", "per_decade", "num"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ConfigError(f"{label}: unknown key(s) {unknown}; a learning-rate grid takes "
                              "start, stop and per_decade or num")
        for k in ("start", "stop"):
            if k not in value:
                raise ConfigError(f"{label}.{k}: required in a learning-rate grid table")
        try:
            return lr_grid(value["start"], value["stop"], value.get("per_decade"), value.get("num"))
        except ConfigError as exc:
            raise ConfigError(f"{label}: {str(exc).removeprefix('lr: ').removeprefix('lr.')}") from None
    if isinstance(value, list):
        if not value:
            raise ConfigError(f"{label}: an empty list gives no runs")
        return [fld.check(f"{label}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, str):
        raise ConfigError(f"{label}: must be {fld.describe()}, got {value!r}")
    return [fld.check(label, value)]


def _field_for(path: str, label: str) -> Field:
    section, _, key = path.partition(".")
    if section not in FIELDS:
        raise ConfigError(f"{label}: unknown section {section!r}; allowed: {', '.join(SECTIONS)}")
    if key not in FIELDS[section]:
        if section == "pipeline" and key == "echo":
            raise ConfigError(f"{label}: the echo factor K is optimizer.echo (used by pipeline.policy 'fixed')")
        raise ConfigError(f"{label}: unknown key {key!r}; allowed in [{section}]: {', '.join(FIELDS[section])}")
    return FIELDS[section][key]


def _joint(grid: _Grid, section: str | None, key: str, value):
    label = f'{section or "joint"}."{key}"'
    names = [k.strip() for k in key.split(",")]
    if any(not n for n in names) or len(names) < 2:
        raise ConfigError(f"{label}: a joint key names two or more keys separated by commas")
    paths = []
    for n in names:
        if "." in n:
            path = n
        elif section is None:
            raise ConfigError(f"{label}: in [joint] name keys by their full path, e.g. optimizer.batch_size")
        else:
            path = f"{section}.{n}"
        paths.append(path)
    fields = [_field_for(p, label) for p in paths]
    for p, f in zip(paths, fields):
        if not f.grid:
            raise ConfigError(f"{label}: {p} is a sweep-wide setting and cannot vary")
        grid._declare(p, label)
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{label}: must be a non-empty list of [{', '.join(names)}] lists")
    vals, labels = [], []
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != len(paths):
            raise ConfigError(f"{label}[{i}]: must be a list of {len(paths)} values ({', '.join(paths)})")
        checked = []
        for j, (p, f, v) in enumerate(zip(paths, fields, row)):
            el = f"{label}[{i}][{j}] ({p})"
            if f.kind == "service":
                _check_service_value(el, v, allow_lists=False)
                checked.append(grid._service_paths(copy.deepcopy(v)))
            elif f.kind == "lr":
                checked.append(f.check(el, v))
            else:
                if isinstance(v, list):
                    raise ConfigError(f"{el}: must be {f.describe()}, got a list")
                checked.append(f.check(el, v))
        vals.append(tuple(checked))
        labels.append(tuple(f"{label}[{i}][{j}]" for j in range(len(paths))))
    grid.axes.append(_Axis(tuple(paths), vals, labels))


