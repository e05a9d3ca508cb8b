"""`Records`: what one training run through `echosim.echoing` measured, per fresh batch
and per step, as plain arrays, to plan from, save, and read back.

The times are the loop's own (seconds, on its clock with paused time taken out), so a
plan made from them carries the host's real contention: the loader and the step slow
each other down on a shared host, which a profile taken apart does not see.

Examples
--------
>>> import echosim
>>> it = echosim.echoing(range(4), 2)
>>> for batch in it:
...     it.report(1.0 / (1 + batch))
>>> r = it.records()
>>> r.n_batches, r.n_steps, r.steps_per_batch.tolist()
(4, 8, [2, 2, 2, 2])
>>> r.first_loss.tolist()
[1.0, 0.5, 0.3333333333333333, 0.25]
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Records", "load_records", "SIGNAL_FIELDS"]

SIGNAL_FIELDS = ("lagged_before", "lagged_after", "probe", "grad_sq_small", "grad_sq_full")
"""The optional signals, one float per fresh batch (NaN where the loop did not report one)."""
_BATCH_FIELDS = ("load_time", "load_censored", "wait_time", "steps_per_batch", "cap", "epoch", "small_batch",
                 *SIGNAL_FIELDS)
_STEP_FIELDS = ("step_batch", "step_start", "step_time", "loss")
_FORMAT = "echosim-records-2"
_FORMATS = ("echosim-records-1", _FORMAT)  # version 1 had no signals
_OPTIONAL = ("small_batch", *SIGNAL_FIELDS)
FRAME_UNITS = {
    "load_time": ("load_time_s", "seconds"), "wait_time": ("wait_time_s", "seconds"),
    "steps_per_batch": ("steps_per_batch", "steps (K_t)"), "cap": ("cap_steps", "steps"),
    "small_batch": ("small_batch_examples", "examples"), "start": ("start_s", "seconds on the loop's clock"),
    "end": ("end_s", "seconds on the loop's clock"), "step_start": ("step_start_s", "seconds on the loop's clock"),
    "step_time": ("step_time_s", "seconds"), "loss": ("loss", "the loss's own unit"),
    "first_loss": ("first_loss", "the loss's own unit"), "probe": ("probe_loss", "the loss's own unit"),
    "lagged_before": ("lagged_before_loss", "the loss's own unit"),
    "lagged_after": ("lagged_after_loss", "the loss's own unit"),
    "grad_sq_small": ("grad_sq_small", "squared gradient norm"), "grad_sq_full": ("grad_sq_full", "squared gradient norm"),
}
"""`Records.to_frame`'s column names, with their units: field -> (column, unit)."""


@dataclass(frozen=True, eq=False)
class Records:
    """Per fresh batch t and per step j of one run through `echoing` (times in seconds).

    Attributes
    ----------
    policy : "sync", "fixed", "greedy" or "auto"
    echo : K for "fixed" (1 for "sync"), else None
    batch_size : B if known (given to `echoing`, or read off the batches), else None
    load_time : float64[T]
        The iterable's time to produce batch t (measured in the background thread).
    load_censored : bool[T]
        True where the background thread had been held by a full buffer just before
        producing batch t: a loader with its own workers may have run ahead meanwhile,
        so ``load_time[t]`` is only a lower bound of its time per batch.
    wait_time : float64[T]
        How long the loop waited for batch t (0 when it was ready).
    steps_per_batch : int64[T]
        K_t, the steps that used batch t.
    cap : int64[T]
        The most steps batch t could get: K for "fixed", ``max_echo`` for "greedy", the
        cap "auto" chose.
    epoch : int64[T]
        The pass over the iterable that batch t came from (0, 1, ...).
    step_batch : int64[N]
        The fresh batch step j used.
    step_start : float64[N]
        When step j began (the batch was handed to the loop), on the loop's clock:
        seconds since the first request, with paused time (`echoing.paused`) taken out.
    step_time : float64[N]
        The loop's time for step j: from handing the batch over to the next request
        (NaN for a step still running when the records were taken).
    loss : float64[N]
        The loss reported for step j (`echoing.report`), NaN where none was.
    small_batch : int64[T]
        b of the gradient-noise signal (0 where none was reported).
    lagged_before, lagged_after : float64[T]
        Batch t's loss at the weights batch t-1 started from, and at the weights batch t
        began with (the first step's loss unless reported apart): their difference is the
        paired progress of batch t-1 (`paired_progress`).
    probe : float64[T]
        A held-out loss reported on batch t's steps.
    grad_sq_small, grad_sq_full : float64[T]
        Squared gradient norms on the first ``small_batch`` examples and on the batch.
    decisions : tuple of dict
        "auto" only: every decision and the estimates it acted on.
    clock : str
        The loop's clock: ``"time.perf_counter"`` by default; ``"time.perf_counter after
        torch.cuda.synchronize()"`` when `echoing` synchronised the device before each
        reading (its ``sync=``); without one, an asynchronous device's step times are
        the times to launch its work. Empty for records written before it was kept.
    """

    policy: str
    echo: int | None
    batch_size: int | None
    load_time: np.ndarray = field(repr=False)
    load_censored: np.ndarray = field(repr=False)
    wait_time: np.ndarray = field(repr=False)
    steps_per_batch: np.ndarray = field(repr=False)
    cap: np.ndarray = field(repr=False)
    epoch: np.ndarray = field(repr=False)
    step_batch: np.ndarray = field(repr=False)
    step_start: np.ndarray = field(repr=False)
    step_time: np.ndarray = field(repr=False)
    loss: np.ndarray = field(repr=False)
    decisions: tuple = field(default=(), repr=False)
    small_batch: np.ndarray | None = field(default=None, repr=False)
    lagged_before: np.ndarray | None = field(default=None, repr=False)
    lagged_after: np.ndarray | None = field(default=None, repr=False)
    probe: np.ndarray | None = field(default=None, repr=False)
    grad_sq_small: np.ndarray | None = field(default=None, repr=False)
    grad_sq_full: np.ndarray | None = field(default=None, repr=False)
    clock: str = field(default="", repr=False)

    def __post_init__(self):
        T = self.load_time.size
        if self.small_batch is None:
            object.__setattr__(self, "small_batch", np.zeros(T, dtype=np.int64))
        for name in SIGNAL_FIELDS:
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(T, np.nan))
        for name in _BATCH_FIELDS:
            if getattr(self, name).shape != (T,):
                raise ValueError(f"records: {name} must have one entry per fresh batch ({T}), "
                                 f"got shape {getattr(self, name).shape}")
        N = self.step_batch.size
        for name in _STEP_FIELDS:
            if getattr(self, name).shape != (N,):
                raise ValueError(f"records: {name} must have one entry per step ({N}), "
                                 f"got shape {getattr(self, name).shape}")
        if int(self.steps_per_batch.sum()) != N:
            raise ValueError(f"records: steps_per_batch sums to {int(self.steps_per_batch.sum())}, "
                             f"but there are {N} steps")

    # ---- sizes and derived per-batch views

    @property
    def n_batches(self) -> int:
        return int(self.load_time.size)

    @property
    def n_steps(self) -> int:
        return int(self.step_batch.size)

    @property
    def first_step(self) -> np.ndarray:
        """Index of each fresh batch's first step."""
        return np.concatenate([[0], np.cumsum(self.steps_per_batch)[:-1]]).astype(np.int64)

    @property
    def first_loss(self) -> np.ndarray:
        """The loss of each fresh batch's first step: measured before the model trained on that
        batch, an unbiased estimate of the population loss at that point (NaN where not reported).
        In multi-epoch training a batch's examples were seen in earlier epochs, so from the second
        epoch on it estimates the training loss instead."""
        if self.n_steps == 0:
            return np.empty(0)
        return self.loss[self.first_step]

    @property
    def start(self) -> np.ndarray:
        """When each fresh batch's first step began, on the loop's clock."""
        return self.step_start[self.first_step] if self.n_steps else np.empty(0)

    @property
    def end(self) -> np.ndarray:
        """When each fresh batch's last step ended, on the loop's clock (NaN if still running)."""
        if self.n_steps == 0:
            return np.empty(0)
        last = np.cumsum(self.steps_per_batch) - 1
        return self.step_start[last] + self.step_time[last]

    @property
    def paired_progress(self) -> np.ndarray:
        """p_t, the progress batch t's steps made on batch t+1 (unseen when measured):
        ``lagged_before[t+1] - lagged_after[t+1]``; NaN where not reported (and for the last)."""
        p = np.full(self.n_batches, np.nan)
        if self.n_batches > 1:
            p[:-1] = self.lagged_before[1:] - self.lagged_after[1:]
        return p

    @property
    def seen_progress(self) -> np.ndarray:
        """Batch t's first-step loss minus its last step's loss: the progress its own steps made
        on it (all but the last step; NaN for one step or where not reported)."""
        if self.n_steps == 0:
            return np.empty(0)
        last = np.cumsum(self.steps_per_batch) - 1
        out = self.first_loss - self.loss[last]
        out[self.steps_per_batch < 2] = np.nan
        return out

    def noise_scale(self, memory: int = 32) -> np.ndarray:
        """The gradient-noise scale B_noise = tr(Sigma)/|G|^2 after each fresh batch, smoothed over
        about `memory` measurements (`echosim.loop.signals.noise_scale`); NaN before any."""
        from echosim.loop.signals import noise_scale

        if self.batch_size is None:
            return np.full(self.n_batches, np.nan)
        return noise_scale(self.batch_size, self.small_batch, self.grad_sq_small, self.grad_sq_full, memory)

    def head(self, n: int) -> "Records":
        """The records of the first `n` fresh batches and their steps (all of them if the run
        had fewer): a run's opening as a pilot, to plan from what was known at that point.
        The decisions kept are those taken before fresh batch `n`."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"n: expected an integer >= 1 (fresh batches to keep), got {n!r}")
        n = min(int(n), self.n_batches)
        keep = self.step_batch < n
        return Records(self.policy, self.echo, self.batch_size, clock=self.clock,
                       decisions=tuple(d for d in self.decisions if d.get("batch", -1) < n),
                       **{k: getattr(self, k)[:n].copy() for k in _BATCH_FIELDS},
                       **{k: getattr(self, k)[keep].copy() for k in _STEP_FIELDS})

    def steady(self) -> slice:
        """The fresh batches in steady state: all but the first (its wait is start-up)."""
        return slice(1 if self.n_batches > 1 else 0, self.n_batches)

    # ---- summaries

    def summary(self) -> dict:
        """Totals and means, each key with its unit: seconds (``_s``), per second (``_per_s``)
        or a fraction. ``utilization`` is the loop's busy fraction in steady state (every batch
        but the first): step time over step time plus waits; NaN for an empty run."""
        n, N = self.n_batches, self.n_steps
        first = 1 if n > 1 else 0
        busy = float(np.nansum(self.step_time[self.step_batch >= first]))
        wait = float(np.sum(self.wait_time[first:]))
        span = busy + wait
        ends = self.end
        elapsed = float(np.nanmax(np.append(ends, self.start))) if N else 0.0
        return {"policy": self.policy, "batches": n, "steps": N,
                "mean_echo": N / n if n else math.nan,
                "elapsed_s": elapsed,
                "fresh_batches_per_s": (n - first) / span if n > 1 and span > 0 else math.nan,
                "wait_fraction": wait / span if span > 0 else math.nan,
                "utilization": busy / span if span > 0 else math.nan,
                "mean_load_time_s": float(np.mean(self.load_time)) if n else math.nan,
                "mean_step_time_s": float(np.nanmean(self.step_time)) if np.isfinite(self.step_time).any()
                else math.nan,
                "censored_fraction": float(np.mean(self.load_censored)) if n else math.nan,
                "epochs": int(self.epoch[-1]) + 1 if n else 0}

    def verdict(self, plan=None):
        """One line: how input-bound this run was and, given a `Plan` made from these records,
        what echoing is predicted to save (`echosim.verdict` makes the plan for you)."""
        from echosim.loop.verdict import judge

        return judge(self, plan)

    def trace(self, mode: str = "resample", *, uncensored: bool = True):
        """The loader's measured time per batch as a `Trace` (seconds). Times recorded while the
        loader could run ahead of the loop (``load_censored``) are left out by default."""
        from echosim.pipeline.traces import Trace

        times = self.load_time[~self.load_censored] if uncensored else self.load_time
        times = times[times > 0]
        if times.size == 0:
            raise ValueError("records: no uncensored load time to make a trace of (the loader always ran "
                             "ahead of the loop: under fixed K the loop, not the loader, set the pace)")
        return Trace(np.asarray(times, dtype=float), mode)

    def to_frame(self, per: str = "batch"):
        """The records as a pandas DataFrame, one row per fresh batch (``per="batch"``) or per
        step (``per="step"``), its columns named with their units (`FRAME_UNITS`:
        ``load_time_s`` in seconds, ...); ``frame.attrs["units"]`` spells each unit out and
        ``frame.attrs["clock"]`` names the loop's clock."""
        pd = _pandas()
        if per == "batch":
            cols = {"batch": np.arange(self.n_batches), **{k: getattr(self, k) for k in _BATCH_FIELDS},
                    "start": self.start, "end": self.end, "first_loss": self.first_loss}
        elif per == "step":
            cols = {"step": np.arange(self.n_steps), **{k: getattr(self, k) for k in _STEP_FIELDS}}
        else:
            raise ValueError(f"per: expected 'batch' or 'step', got {per!r}")
        frame = pd.DataFrame({FRAME_UNITS.get(k, (k, ""))[0]: v for k, v in cols.items()})
        frame.attrs["units"] = {FRAME_UNITS[k][0]: FRAME_UNITS[k][1] for k in cols if k in FRAME_UNITS}
        frame.attrs["clock"] = self.clock
        return frame

    # ---- files (NumPy's .npz; the metadata as JSON text inside, no pickles)

    def save(self, path) -> str:
        """Write the records to ``path`` (``.npz``); `load_records` reads them back. The file is
        written whole or not at all (a temp file beside it, then renamed over it): a save that
        fails, or is killed, leaves the previous file as it was."""
        from echosim._files import atomic_file

        path = Path(path)
        meta = {"format": _FORMAT, "policy": self.policy, "echo": self.echo, "batch_size": self.batch_size,
                "decisions": list(self.decisions), "clock": self.clock}
        arrays = {k: getattr(self, k) for k in _BATCH_FIELDS + _STEP_FIELDS}
        try:
            with atomic_file(path) as fh:
                np.savez(fh, meta=np.array(json.dumps(meta, allow_nan=True)), **arrays)
        except OSError as exc:
            raise ValueError(f"records: could not write {str(path)!r} ({exc.strerror or exc})") from None
        return str(path)

    def __repr__(self) -> str:
        s = self.summary()
        more = ""
        if self.n_batches:
            more = (f", mean_echo={s['mean_echo']:.3g}, elapsed={_seconds(s['elapsed_s'])!r}, "
                    f"wait={_fraction(s['wait_fraction'])!r}")
        return (f"Records(policy={self.policy!r}, echo={self.echo!r}, batch_size={self.batch_size!r}, "
                f"batches={self.n_batches}, steps={self.n_steps}{more})")

    def _repr_html_(self) -> str:
        """A notebook's view: the summary with its units, and the verdict."""
        import html

        s = self.summary()
        rows = [("policy", self.policy + ("" if self.echo is None else f" (K = {self.echo})")),
                ("batch size B", "-" if self.batch_size is None else str(self.batch_size)),
                ("fresh batches / steps", f"{self.n_batches} / {self.n_steps} (mean K {s['mean_echo']:.3g})"
                 if self.n_batches else "0 / 0"),
                ("epochs", str(s["epochs"])), ("elapsed", _seconds(s["elapsed_s"])),
                ("mean load time", _seconds(s["mean_load_time_s"]) + " per batch"),
                ("mean step time", _seconds(s["mean_step_time_s"])),
                ("waiting (steady state)", _fraction(s["wait_fraction"]) + " of the time"),
                ("fresh batches per second", f"{s['fresh_batches_per_s']:.3g}/s"
                 if math.isfinite(s["fresh_batches_per_s"]) else "-"),
                ("clock", self.clock or "-")]
        trs = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                      f"{html.escape(v)}</td></tr>" for k, v in rows)
        verdict = html.escape(self.verdict().line.split("; what echoing saves")[0]) if self.n_batches else ""
        return (f"<table><caption>echosim Records</caption><tbody>{trs}</tbody></table>"
                + (f"<p><small>{verdict}</small></p>" if verdict else ""))


def _seconds(x: float) -> str:
    """A duration with its unit (s, ms or µs), '-' if not measured."""
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "-"
    if abs(x) >= 1.0:
        return f"{x:.3g} s"
    if abs(x) >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    return f"{x * 1e6:.3g} µs"


def _fraction(x: float) -> str:
    return f"{x:.0%}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_frame needs pandas: pip install 'echosim[sweep]'") from None
    return pd


def load_records(path) -> Records:
    """Read records written by `Records.save`; ValueError naming the file if it is not one."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in _BATCH_FIELDS + _STEP_FIELDS if k in z.files or k not in _OPTIONAL}
    except FileNotFoundError:
        raise ValueError(f"records: file {str(path)!r} does not exist") from None
    except (OSError, KeyError, ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"records: {str(path)!r} is not an echosim records file ({type(exc).__name__})") from None
    if not isinstance(meta, dict) or meta.get("format") not in _FORMATS:
        raise ValueError(f"records: {str(path)!r} is not an echosim records file (format "
                         f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    bs = meta.get("batch_size")
    if bs is not None and (isinstance(bs, bool) or not isinstance(bs, numbers.Integral)):
        raise ValueError(f"records: {str(path)!r} has a bad batch_size {bs!r}")
    return Records(meta["policy"], meta.get("echo"), bs, decisions=tuple(meta.get("decisions", ())),
                   clock=str(meta.get("clock", "")), **arrays)
