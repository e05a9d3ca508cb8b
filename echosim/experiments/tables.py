"""A sweep's merged tables and their analysis: its runs (from the run store or memory)
→ one row per run, one row per logged point, one row per tuned setting.

A sweep's directory (``--out``) holds ``summary.parquet`` (one row per run, with its
convergence time under the sweep's analysis settings), ``curves.parquet`` (one row
per logged point), ``tuned.parquet`` (`echosim.experiments.analysis.tune`) and
``manifest.json`` (written by `echosim.experiments.store`). Convergence is computed
here, when the tables are merged, so changing the target or the rule needs no re-run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from echosim.experiments.analysis import analysis_settings, run_convergence, tune
from echosim.experiments.store import CURVE_COLUMNS, Store, read_table, valid_run_id, write_table

__all__ = ["Results", "merge", "load"]


class Results(NamedTuple):
    """The tables of a results directory, as pandas DataFrames (plus the manifest dict)."""

    summary: object
    curves: object
    tuned: object
    manifest: dict


def merge(out, run_ids, settings: dict, payloads: dict | None = None, write: bool = True,
          curves_as: str = "pandas", store: Store | None = None) -> Results:
    """Merge the runs `run_ids` (in this order) into tables, written under `out`.

    `payloads` maps run id → payload already in memory (the others are read from the
    `store` or its failure records; a run with neither is left out and counted as missing).
    Convergence times are computed here with `settings` (the target, window, rule, hold,
    iterate: `echosim.experiments.analysis.analysis_settings`), so changing the target
    needs no re-run. With `write`, the tables are written to ``summary.parquet``,
    ``curves.parquet`` and ``tuned.parquet`` atomically. ``curves_as``: "pandas" (a
    DataFrame), "arrow" (a pyarrow Table, no conversion) or None (left out).
    """
    import pandas as pd
    import pyarrow as pa

    settings = analysis_settings(settings)
    payloads = payloads or {}
    store = store if store is not None else Store()
    stored = store.read([rid for rid in run_ids if rid not in payloads])
    target = {f"target.{k}": math.nan if settings[k] is None else float(settings[k])
              for k in ("rtol", "atol", "fraction")}
    target.update({"target.window": int(settings["window"]), "target.rule": settings["rule"],
                   "target.hold": int(settings["hold"]), "target.iterate": settings["iterate"]})
    rows, curve_parts = [], []
    for rid in run_ids:
        p = payloads.get(rid)
        if p is not None:
            summary, curves = p["summary"], p.get("curves")
        elif rid in stored:
            summary, curves = stored[rid]
        else:
            summary, curves = store.failure(rid), None
            if summary is None:
                continue
        row = dict(summary)
        row.update(run_convergence(row, curves, settings))
        row.update(target)
        rows.append(row)
        if curves is not None and summary.get("status") != "failed":
            curve_parts.append((len(rows) - 1, curves))
    summary_df = pd.DataFrame(rows)
    if len(summary_df):
        summary_df = _order_columns(_uniform_types(summary_df))
    tuned_df = tune(summary_df, by=settings["tune_by"]) if len(summary_df) else pd.DataFrame()
    curves_tbl = _curves_table(summary_df, curve_parts) if write or curves_as is not None else None
    if write:
        out = Path(out)
        write_table(pa.Table.from_pandas(summary_df, preserve_index=False), out / "summary.parquet")
        write_table(curves_tbl, out / "curves.parquet")
        write_table(pa.Table.from_pandas(tuned_df, preserve_index=False), out / "tuned.parquet")
    curves = {"pandas": _to_pandas, "arrow": lambda t: t, None: lambda t: None}[curves_as](curves_tbl)
    return Results(summary_df, curves, tuned_df, {})


_FIRST = ("run_id", "status", "error")


def _uniform_types(df):
    """Columns mixing strings and numbers (e.g. a grid over momentum 'nesterov' and 0.9)
    become strings, so that they fit one Parquet type."""
    for c in df.columns:
        if df[c].dtype == object:
            kinds = {type(v) for v in df[c] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if str in kinds and len(kinds) > 1:
                df[c] = [None if v is None else str(v) for v in df[c]]
    return df


def _order_columns(df):
    params = [c for c in df.columns if c.split(".")[0] in ("problem", "pipeline", "optimizer", "sweep") and "." in c]
    seeds = [c for c in ("repetition", "base_seed", "seed", "pipeline_seed") if c in df.columns]
    conv = [c for c in df.columns if c.startswith(("conv_", "target.")) or c == "converged"]
    version = [c for c in df.columns if c.startswith("version.")]
    first = [c for c in _FIRST if c in df.columns]
    rest = [c for c in df.columns if c not in set(params + seeds + conv + version + first)]
    return df[first + params + seeds + conv + rest + version]


def _curves_table(summary_df, parts):
    """The long table: curve columns plus every summary column but the analysis ones."""
    import pyarrow as pa

    if not parts:
        return pa.table({name: pa.array([], type=pa.int64() if name in ("batches", "steps", "samples")
                                        else pa.float64()) for name in CURVE_COLUMNS})
    index = np.concatenate([np.full(len(c["batches"]), i, dtype=np.int64) for i, c in parts])
    keep = [c for c in summary_df.columns
            if not (c.startswith(("conv_", "final_", "schedule.", "target."))
                    or c in ("converged", "elapsed_s", "error", "diverged_at"))]
    small = pa.Table.from_pandas(summary_df[keep], preserve_index=False)
    # strings repeat along a curve: dictionary-encode them on the one-row-per-run table,
    # then repeat every column with one `take`
    cols = [col.dictionary_encode() if pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
            else col for col in small.columns]
    params = pa.table(cols, names=keep).take(pa.array(index))
    arrays = list(params.columns)
    names = list(keep)
    for name in CURVE_COLUMNS:
        arrays.append(pa.array(np.concatenate([np.asarray(c[name]) for _, c in parts])))
        names.append(name)
    return pa.table(arrays, names=names)


def _to_pandas(table):
    return table.to_pandas()


def load(path, curves: bool = True) -> Results:
    """Read a sweep's results directory: (summary, curves, tuned) DataFrames and the manifest.

    If the merged tables are missing, stale (a sweep still running, or killed) or
    damaged (every page carries a checksum, verified here), the runs are merged on the
    fly from the store named in the manifest, with its analysis settings. String parameter columns of the curves table come back as
    pandas Categoricals (they repeat along each curve).
    """
    import pandas as pd

    d = Path(path)
    if not d.is_dir():
        raise ValueError(f"results path {str(path)!r} is not a directory (expected a sweep's --out)")
    manifest = {}
    mpath = d / "manifest.json"
    if mpath.exists():
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
        except ValueError:
            raise ValueError(f"{mpath}: not valid JSON") from None
    damaged = None
    if (d / "summary.parquet").exists() and manifest.get("complete", True):
        try:  # every page's checksum verified; a damaged table is merged again from the store below
            summary = read_table(d / "summary.parquet").to_pandas()
            tuned = read_table(d / "tuned.parquet").to_pandas() if (d / "tuned.parquet").exists() \
                else pd.DataFrame()
            curves_df = None
            if curves:
                curves_df = read_table(d / "curves.parquet").to_pandas() if (d / "curves.parquet").exists() \
                    else pd.DataFrame()
            return Results(summary, curves_df, tuned, manifest)
        except ValueError as exc:
            damaged = str(exc)
    run_ids = manifest.get("run_ids")
    if damaged:
        if run_ids is None:
            raise ValueError(f"{damaged}, and {str(path)!r} has no manifest to merge its runs again from the store")
        import warnings

        warnings.warn(f"{damaged}; its runs are merged again from the store", stacklevel=2)
    if not manifest or run_ids is None:
        raise ValueError(f"{str(path)!r} holds no echosim results (no summary.parquet, no manifest.json)")
    bad = [r for r in run_ids if not valid_run_id(r)]
    if bad:
        raise ValueError(f"{mpath}: run_ids must be 16 hex digits, got {bad[0]!r}")
    res = merge(d, run_ids, manifest.get("settings"), write=False, store=Store(manifest.get("store")))
    return Results(res.summary, res.curves if curves else None, res.tuned, manifest)
