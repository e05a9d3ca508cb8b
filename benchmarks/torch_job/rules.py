"""The torch job's rules, without torch: the target rule, the run order, the record format, the summary.

Everything here is plain Python and NumPy, so `tests/benchmarks/test_torch_job_rules.py`
checks it on an install without torch, and a run's files can be read and summarised
again (with another target) anywhere.

- Target: a run "reaches the target" at the first fresh batch T after which the
  validation loss stays <= L* until the end of the budget (`reaches_and_stays`); the
  first fresh batch at or below L* (`first_entry`) is kept beside it for comparison.
- Order: for seed number j, every policy once, the list rotated by j
  (`interleaved_order`), so drift of the shared machine hits every policy alike.
- Records: one JSON file (scalars, config, echoing's summary) and one NPZ file (the
  arrays) per (policy, seed), named by `run_name`; `save_run` / `load_run`.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the shared harness
import harness

FORMAT = "echosim-torch-job/1"
"""Written into every record; bump it when a key changes meaning."""

DEFAULT_POLICIES = (1, 2, 4, 8, "greedy", "auto")

RUN_ARRAYS = {
    # per fresh batch n = 0..N (n = 0: before training)
    "val_loss": "validation loss (mean cross-entropy) after fresh batch n",
    "val_acc": "validation accuracy after fresh batch n",
    "train_time": "training clock (s) at the end of fresh batch n's last step, snapshot pauses excluded",
    "steps_cum": "optimizer steps taken up to the end of fresh batch n",
    # per fresh batch n = 1..N
    "echo": "K_n: steps on fresh batch n",
    # per step
    "step_time": "wall-clock of each optimizer step (s): forward, backward, update, loss.item()",
    "step_loss": "training loss of each step (before its update)",
    "step_fresh": "the fresh batch (1..N) each step used",
    # echoing's own records, per fresh batch it handed over (N + 1: the loop stops on batch N + 1)
    "load_time": "Records.load_time: the background thread's next() on the loader (s)",
    "load_censored": "Records.load_censored: the thread had been held by a full buffer (load_time a lower bound)",
    "wait_time": "Records.wait_time: the loop's wait for each fresh batch (s)",
    "cap": "Records.cap: the most steps the batch could get (K, max_echo, or auto's cap)",
}
"""The arrays of a run's NPZ file. echoing's complete `Records` are saved beside it
(``<name>.records.npz``, read by ``echosim.loop.records.load_records``)."""

RUN_KEYS = ("format", "name", "policy", "label", "seed", "block", "position", "config", "versions",
            "loadavg_start", "loadavg_end", "fresh_batches", "steps", "snapshot_seconds", "elapsed_seconds",
            "echoing_summary")
"""Keys every run's JSON file holds."""


# ---- policies and order

def parse_policy(text: str):
    """'4' -> 4 (fixed K); any other word ('greedy', 'sync', 'auto') is passed to `echoing` as is."""
    text = text.strip()
    if not text:
        raise ValueError("policy: expected an integer K >= 1 or a name such as 'greedy', got ''")
    try:
        k = int(text)
    except ValueError:
        return text
    if k < 1:
        raise ValueError(f"policy: K must be >= 1, got {text!r}")
    return k


def policy_label(policy) -> str:
    """'K=4' for a fixed echo factor, the name otherwise ('sync' is K=1)."""
    if isinstance(policy, numbers.Integral) and not isinstance(policy, bool):
        return f"K={int(policy)}"
    return "K=1" if policy == "sync" else str(policy)


def interleaved_order(policies: Sequence, seeds: Sequence[int]) -> list[tuple[int, object]]:
    """(seed, policy) pairs: block j runs seed j with every policy, the list rotated by j.

    >>> interleaved_order([1, 2, "greedy"], [0, 1])
    [(0, 1), (0, 2), (0, 'greedy'), (1, 2), (1, 'greedy'), (1, 1)]
    """
    policies = list(policies)
    if not policies:
        raise ValueError("policies: expected at least one policy")
    if len({policy_label(p) for p in policies}) != len(policies):
        raise ValueError(f"policies: each policy once, got {policies!r}")
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds: expected distinct seeds, at least one, got {list(seeds)!r}")
    out = []
    for j, seed in enumerate(seeds):
        r = j % len(policies)
        out.extend((seed, p) for p in policies[r:] + policies[:r])
    return out


def run_name(policy, seed: int) -> str:
    """File stem of one run: 'K=4-seed2' -> 'K4-seed2' (no '=' in file names)."""
    return f"{policy_label(policy).replace('=', '')}-seed{int(seed)}"


# ---- the target rule

def reaches_and_stays(values: Sequence[float], target: float) -> int | None:
    """The first index n from which every value is <= target to the end; None if the last is above.

    Indices are fresh batches (values[0] is before training). A NaN counts as above.

    >>> reaches_and_stays([2.0, 0.9, 1.1, 0.8, 0.7], 1.0)
    3
    >>> reaches_and_stays([2.0, 0.9, 1.1], 1.0) is None
    True
    """
    v = np.asarray(values, dtype=float)
    above = ~(v <= target)
    if v.size == 0 or above[-1]:
        return None
    idx = np.flatnonzero(above)
    return int(idx[-1] + 1) if idx.size else 0


def first_entry(values: Sequence[float], target: float) -> int | None:
    """The first index n with values[n] <= target; None if there is none.

    >>> first_entry([2.0, 0.9, 1.1, 0.8], 1.0)
    1
    """
    idx = np.flatnonzero(np.asarray(values, dtype=float) <= target)
    return int(idx[0]) if idx.size else None


def at_target(arrays: dict, target: float) -> dict:
    """T (reaches and stays), the first entry, and steps and training seconds at T, of one run."""
    vl = arrays["val_loss"]
    T = reaches_and_stays(vl, target)
    T1 = first_entry(vl, target)
    return {"T": T, "T_first": T1,
            "steps": None if T is None else int(arrays["steps_cum"][T]),
            "seconds": None if T is None else float(arrays["train_time"][T]),
            "seconds_first": None if T1 is None else float(arrays["train_time"][T1])}


# ---- records

def save_run(out: Path | str, record: dict, arrays: dict) -> Path:
    """Write `<name>.json` and `<name>.npz` into `out` (each atomically: a temp file, then rename)."""
    missing = [k for k in RUN_KEYS if k not in record]
    if missing:
        raise ValueError(f"record: missing keys {missing}")
    missing = [k for k in RUN_ARRAYS if k not in arrays]
    if missing:
        raise ValueError(f"arrays: missing {missing}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    name = record["name"]
    tmp = out / f".{name}.npz.tmp"
    with open(tmp, "wb") as f:
        np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()})
    os.replace(tmp, out / f"{name}.npz")
    write_json(out / f"{name}.json", record)
    return out / f"{name}.json"


def write_json(path: Path | str, obj) -> None:
    """JSON with NaN and infinities as null, written atomically (`harness.write_json`)."""
    harness.write_json(path, obj, infinite="null")


def load_run(path: Path | str) -> tuple[dict, dict]:
    """(record, arrays) of one run from its JSON path (the NPZ beside it)."""
    path = Path(path)
    record = json.loads(path.read_text(encoding="utf-8"))
    if record.get("format") != FORMAT:
        raise ValueError(f"{path}: format {record.get('format')!r}, expected {FORMAT!r}")
    with np.load(path.with_suffix(".npz")) as z:
        arrays = {k: z[k] for k in z.files}
    return record, arrays


def load_runs(out: Path | str) -> list[tuple[dict, dict]]:
    """Every run in `out`, in the order they were run."""
    runs = [load_run(p) for p in sorted(Path(out).glob("*-seed*.json"))]
    return sorted(runs, key=lambda r: (r[0]["block"], r[0]["position"]))


# ---- the summary

def median_reached(xs: Iterable) -> float | None:
    """Median with None as 'not reached' (+inf): None when more than half are not reached."""
    v = np.array([np.inf if x is None else float(x) for x in xs], dtype=float)
    if v.size == 0:
        return None
    m = float(np.median(v))
    return m if math.isfinite(m) else None


def in_run_load(arrays: dict) -> float:
    """Mean of echoing's uncensored load times past the first (the first includes starting the
    pass; a censored one is only a lower bound: the loader's worker had run ahead)."""
    lt = np.asarray(arrays["load_time"], dtype=float)[1:]
    keep = ~np.asarray(arrays["load_censored"], dtype=bool)[1:]
    return float(lt[keep].mean()) if keep.any() else float("nan")


def censored_fraction(arrays: dict) -> float:
    """The fraction of load times (past the first) that are lower bounds only."""
    c = np.asarray(arrays["load_censored"], dtype=bool)[1:]
    return float(c.mean()) if c.size else float("nan")


def in_run_step(arrays: dict) -> float:
    """Mean step time over the run."""
    st = np.asarray(arrays["step_time"], dtype=float)
    return float(st.mean()) if st.size else float("nan")


def per_run_rows(runs: list[tuple[dict, dict]], target: float, profiles: dict | None = None) -> list[dict]:
    """One row per run: T, T first entry, steps and seconds at T, mean K_t, in-run and profiled times."""
    profiles = profiles or {}
    rows = []
    for rec, arr in runs:
        t = at_target(arr, target)
        prof = profiles.get(rec["block"], {})
        rows.append({"label": rec["label"], "seed": rec["seed"], "block": rec["block"], "position": rec["position"],
                     **t, "mean_K": float(np.mean(arr["echo"])) if len(arr["echo"]) else float("nan"),
                     "fresh_batches": rec["fresh_batches"], "final_val_loss": float(arr["val_loss"][-1]),
                     "interval": float(arr["train_time"][-1]) / max(len(arr["echo"]), 1),
                     "load_in_run": in_run_load(arr), "load_censored": censored_fraction(arr),
                     "load_profiled": prof.get("loader_mean", float("nan")),
                     "step_in_run": in_run_step(arr), "step_profiled": prof.get("step_mean", float("nan")),
                     "loadavg_start": rec["loadavg_start"][0], "loadavg_end": rec["loadavg_end"][0],
                     "elapsed": rec["elapsed_seconds"]})
    return rows


def summary_rows(rows: list[dict]) -> list[dict]:
    """Per policy (in first-seen order): medians over seeds of the per-run rows."""
    labels = list(dict.fromkeys(r["label"] for r in rows))
    out = []
    for lab in labels:
        rs = [r for r in rows if r["label"] == lab]
        out.append({"label": lab, "seeds": len(rs), "reached": sum(r["T"] is not None for r in rs),
                    **{k: median_reached(r[k] for r in rs) for k in ("T", "T_first", "steps", "seconds",
                                                                      "seconds_first")},
                    **{k: float(np.nanmedian([r[k] for r in rs])) if any(np.isfinite(r[k]) for r in rs)
                       else float("nan")
                       for k in ("mean_K", "interval", "load_in_run", "load_censored", "load_profiled", "step_in_run",
                                 "step_profiled")}})
    return out


def _fmt(x, spec: str, none: str = "not reached") -> str:
    if x is None:
        return none
    if isinstance(x, float) and not math.isfinite(x):
        return "-"
    return format(x, spec)


def _rule(head: str, text_columns: int) -> str:
    """The Markdown rule under `head`: the first `text_columns` left-aligned, the rest right-aligned."""
    n = head.count("|") - 1
    return "|" + "|".join(" --- " if i < text_columns else " ---: " for i in range(n)) + "|"


def format_summary(rows: list[dict], target: float, budget: int) -> str:
    """The summary table (Markdown): per policy, medians over seeds."""
    head = ("| policy | reached | T (stays) | T (first entry) | steps to T | wall-clock to T (s) | mean K_t "
            "| ms per fresh batch | loader ms/batch in-run | profiled | step ms in-run | profiled |")
    lines = [(f"Target: validation loss <= {target:g}, reached and kept to the end of {budget} fresh batches "
             "(medians over seeds; 'not reached' when more than half of the seeds did not)."), "",
             head, _rule(head, 1)]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['reached']}/{r['seeds']} | {_fmt(r['T'], '.0f')} | {_fmt(r['T_first'], '.0f')} "
            f"| {_fmt(r['steps'], '.0f')} | {_fmt(r['seconds'], '.2f')} | {_fmt(r['mean_K'], '.2f')} "
            f"| {_fmt(1e3 * r['interval'], '.0f')} "
            f"| {_fmt(1e3 * r['load_in_run'], '.1f')} | {_fmt(1e3 * r['load_profiled'], '.1f')} "
            f"| {_fmt(1e3 * r['step_in_run'], '.2f')} | {_fmt(1e3 * r['step_profiled'], '.2f')} |")
    return "\n".join(lines)


def format_runs(rows: list[dict]) -> str:
    """Every run, in the order run (Markdown)."""
    head = ("| block | # | policy | seed | T | T first | steps to T | s to T | mean K_t | final loss "
            "| loader ms (censored) | step ms | load avg start-end |")
    lines = [head, _rule(head, 4)]
    for r in rows:
        lines.append(
            f"| {r['block']} | {r['position']} | {r['label']} | {r['seed']} | {_fmt(r['T'], 'd', '-')} "
            f"| {_fmt(r['T_first'], 'd', '-')} | {_fmt(r['steps'], 'd', '-')} | {_fmt(r['seconds'], '.2f', '-')} "
            f"| {r['mean_K']:.2f} | {r['final_val_loss']:.3f} "
            f"| {_fmt(1e3 * r['load_in_run'], '.1f')} ({r['load_censored']:.0%}) "
            f"| {1e3 * r['step_in_run']:.2f} | {r['loadavg_start']:.2f}-{r['loadavg_end']:.2f} |")
    return "\n".join(lines)
