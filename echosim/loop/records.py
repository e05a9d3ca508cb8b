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
import os
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
_FOLDED_FIELDS = ("folded_start", "folded_busy", "folded_first_loss", "folded_last_loss")
_FORMAT = "echosim-records-3"
_FORMATS = ("echosim-records-1", "echosim-records-2", _FORMAT)  # 1 had no signals, 2 no folded batches
_OPTIONAL = ("small_batch", *SIGNAL_FIELDS)  # absent from older formats
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
        The fresh batch step j used. The per-step arrays hold the steps of fresh batches
        ``kept_from`` on (all of them unless a long run folded its older steps, see below).
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
    kept_from : int
        The first fresh batch whose steps are kept one by one (0: every step is). A long
        run through `echoing` keeps its last ``keep_steps`` steps in full and folds the
        steps of older fresh batches into the four per-batch totals below, so that its
        records stay in bounded memory (`echosim.loop.echoing`, "Memory").
    folded_start, folded_busy, folded_first_loss, folded_last_loss : float64[kept_from]
        Per folded fresh batch: when its first step began, the sum of its step times, and
        the losses of its first and last steps (NaN where none was reported).
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
    kept_from: int = 0
    folded_start: np.ndarray | None = field(default=None, repr=False)
    folded_busy: np.ndarray | None = field(default=None, repr=False)
    folded_first_loss: np.ndarray | None = field(default=None, repr=False)
    folded_last_loss: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self):
        _check_meta(self.policy, self.echo, self.batch_size, self.decisions)
        object.__setattr__(self, "decisions", tuple(self.decisions))
        if not isinstance(self.clock, str):
            raise ValueError(f"records: clock: expected the clock's name (a str), got {type(self.clock).__name__}")
        T = _array("load_time", self.load_time, "f").size
        if self.small_batch is None:
            object.__setattr__(self, "small_batch", np.zeros(T, dtype=np.int64))
        for name in SIGNAL_FIELDS:
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(T, np.nan))
        kf = self.kept_from
        if isinstance(kf, bool) or not isinstance(kf, numbers.Integral) or not 0 <= kf <= T:
            raise ValueError(f"records: kept_from: expected an integer from 0 to the number of fresh batches "
                             f"({T}), got {kf!r:.40}")
        object.__setattr__(self, "kept_from", int(kf))
        for name in _FOLDED_FIELDS:
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(kf, np.nan) if kf else np.empty(0))
        for name in _BATCH_FIELDS + _STEP_FIELDS + _FOLDED_FIELDS:
            object.__setattr__(self, name, _array(name, getattr(self, name), _KINDS[name]))
        T = _common_size(self, _BATCH_FIELDS)
        for name in _BATCH_FIELDS:
            if getattr(self, name).shape != (T,):
                raise ValueError(f"records: {name}: expected one entry per fresh batch ({T}), "
                                 f"got {getattr(self, name).size}")
        for name in _FOLDED_FIELDS:
            if getattr(self, name).shape != (kf,):
                raise ValueError(f"records: {name}: expected one entry per folded fresh batch (kept_from = {kf}), "
                                 f"got {getattr(self, name).size}")
        N = _common_size(self, _STEP_FIELDS)
        for name in _STEP_FIELDS:
            if getattr(self, name).shape != (N,):
                raise ValueError(f"records: {name}: expected one entry per step ({N}), "
                                 f"got {getattr(self, name).size}")
        _check_ranges(self)

    # ---- sizes and derived per-batch views

    @property
    def n_batches(self) -> int:
        return int(self.load_time.size)

    @property
    def n_steps(self) -> int:
        """Steps in all (those folded included)."""
        return int(self.steps_per_batch.sum())

    @property
    def first_step(self) -> np.ndarray:
        """Index (in the per-step arrays) of the first step of each fresh batch whose steps are kept
        (``kept_from`` on)."""
        kept = self.steps_per_batch[self.kept_from:]
        return np.concatenate([[0], np.cumsum(kept)[:-1]]).astype(np.int64) if kept.size else np.empty(0, np.int64)

    def _kept_last_step(self) -> np.ndarray:
        return np.cumsum(self.steps_per_batch[self.kept_from:]) - 1

    @property
    def first_loss(self) -> np.ndarray:
        """The loss of each fresh batch's first step: measured before the model trained on that
        batch, an unbiased estimate of the population loss at that point (NaN where not reported).
        In multi-epoch training a batch's examples were seen in earlier epochs, so from the second
        epoch on it estimates the training loss instead."""
        if self.n_steps == 0:
            return np.empty(0)
        return np.concatenate([self.folded_first_loss, self.loss[self.first_step]])

    @property
    def start(self) -> np.ndarray:
        """When each fresh batch's first step began, on the loop's clock."""
        if self.n_steps == 0:
            return np.empty(0)
        return np.concatenate([self.folded_start, self.step_start[self.first_step]])

    @property
    def end(self) -> np.ndarray:
        """When each fresh batch's last step ended, on the loop's clock (NaN if still running). For a
        folded batch: when the loop asked for the next one (its start less its wait), which
        exceeds the end by the wrapper's own time between the two (microseconds)."""
        if self.n_steps == 0:
            return np.empty(0)
        last = self._kept_last_step()
        kf = self.kept_from
        folded = self.start[1:kf + 1] - self.wait_time[1:kf + 1]
        if kf == self.n_batches:  # the last batch folded (a head of folded batches): its steps' total
            folded = np.append(folded, self.folded_start[-1] + self.folded_busy[-1])
        return np.concatenate([folded, self.step_start[last] + self.step_time[last]])

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
        out = self.first_loss - np.concatenate([self.folded_last_loss, self.loss[self._kept_last_step()]])
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
        kf = min(self.kept_from, n)
        return Records(self.policy, self.echo, self.batch_size, clock=self.clock,
                       decisions=tuple(d for d in self.decisions if d.get("batch", -1) < n),
                       **{k: getattr(self, k)[:n].copy() for k in _BATCH_FIELDS},
                       **{k: getattr(self, k)[keep].copy() for k in _STEP_FIELDS},
                       kept_from=kf, **{k: getattr(self, k)[:kf].copy() for k in _FOLDED_FIELDS})

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
        kf = self.kept_from
        busy = float(np.nansum(self.step_time[self.step_batch >= first]) + np.sum(self.folded_busy[first:]))
        timed = np.isfinite(self.step_time)
        n_timed = int(timed.sum()) + int(self.steps_per_batch[:kf].sum())
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
                "mean_step_time_s": (float(np.sum(self.step_time[timed]) + np.sum(self.folded_busy)) / n_timed
                                     if n_timed else math.nan),
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
            first = int(self.steps_per_batch[:self.kept_from].sum())  # the steps folded before the kept ones
            cols = {"step": np.arange(first, first + self.step_batch.size),
                    **{k: getattr(self, k) for k in _STEP_FIELDS}}
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
        fails, or is killed, leaves the previous file as it was; the temp files of earlier saves
        to the same path whose writer was killed are removed."""
        from echosim._files import atomic_file

        path = Path(path)
        meta = {"format": _FORMAT, "policy": self.policy, "echo": self.echo, "batch_size": self.batch_size,
                "decisions": list(self.decisions), "kept_from": self.kept_from, "clock": self.clock}
        arrays = {k: getattr(self, k) for k in _BATCH_FIELDS + _STEP_FIELDS + _FOLDED_FIELDS}
        try:
            with atomic_file(path) as fh:
                np.savez(fh, meta=np.array(json.dumps(meta, allow_nan=True)), **arrays)
        except OSError as exc:
            raise ValueError(f"records: could not write {str(path)!r} ({exc.strerror or exc})") from None
        _clean_stale_temp(path)
        return str(path)

    def __repr__(self) -> str:
        s = self.summary()
        more = ""
        if self.n_batches:
            wait = _fraction(s["wait_fraction"]) if self.n_batches > 1 else "-"  # no steady state yet
            more = (f", mean_echo={s['mean_echo']:.3g}, elapsed={_seconds(s['elapsed_s'])!r}, "
                    f"wait={wait!r}")
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
                ("waiting (steady state)", _fraction(s["wait_fraction"]) + " of the time"
                 if self.n_batches > 1 else "- (the first batch is start-up)"),
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


_POLICIES = ("sync", "fixed", "greedy", "auto")
MAX_SECONDS = 1e9
"""The longest time a record may hold (about 31 years): beyond it a time is a unit mistake."""
# dtype kinds accepted per field: "f" real numbers (ints allowed), "i" integers, "b" booleans
_KINDS = {**{k: "f" for k in ("load_time", "wait_time", "step_start", "step_time", "loss", *SIGNAL_FIELDS)},
          **{k: "i" for k in ("steps_per_batch", "cap", "epoch", "step_batch", "small_batch")},
          **{k: "f" for k in _FOLDED_FIELDS}, "load_censored": "b"}


def _array(name: str, value, kind: str) -> np.ndarray:
    """`value` as a 1-d array of the field's kind (float64, int64 or bool); ValueError naming the field."""
    a = np.asarray(value) if not isinstance(value, np.ndarray) else value
    ok = {"f": "fiu", "i": "iu", "b": "b"}[kind]
    if a.dtype.kind not in ok:
        what = {"f": "real numbers", "i": "integers", "b": "booleans"}[kind]
        raise ValueError(f"records: {name}: expected {what}, got an array of {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"records: {name}: expected a 1-d array, got shape {a.shape}")
    if kind == "f" and a.dtype != np.float64:
        a = a.astype(np.float64)
    elif kind == "i" and a.dtype != np.int64:
        if a.dtype.kind == "u" and a.size and int(a.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"records: {name}: values beyond int64")
        a = a.astype(np.int64)
    return a


def _common_size(r, names) -> int:
    """The length most of the fields `names` share (so that the odd one out is the one named)."""
    sizes = [getattr(r, k).size for k in names]
    return max(sizes, key=lambda n: (sizes.count(n), -sizes.index(n)))


def _check_meta(policy, echo, batch_size, decisions) -> None:
    if not isinstance(policy, str) or policy not in _POLICIES:
        raise ValueError(f"records: policy: expected one of {', '.join(_POLICIES)}, got {policy!r:.60}")
    if policy in ("sync", "fixed"):
        if isinstance(echo, bool) or not isinstance(echo, numbers.Integral) or echo < 1 \
                or (policy == "sync" and echo != 1):
            want = "1" if policy == "sync" else "an integer K >= 1"
            raise ValueError(f"records: echo: expected {want} for policy {policy!r}, got {echo!r:.60}")
    elif echo is not None:
        raise ValueError(f"records: echo: expected None for policy {policy!r} (its echo varies), got {echo!r:.60}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral)
                                   or batch_size < 1):
        raise ValueError(f"records: batch_size: expected an integer >= 1 or None, got {batch_size!r:.60}")
    if not isinstance(decisions, (list, tuple)) or not all(isinstance(d, dict) for d in decisions):
        raise ValueError(f"records: decisions: expected a list of dicts, got {type(decisions).__name__}")


def _check_ranges(r: "Records") -> None:
    """The values of each field: times finite and >= 0, counts in range, steps consistent."""
    def bad(name, what, values):
        i = int(np.flatnonzero(values)[0])
        raise ValueError(f"records: {name}: {what}, got {getattr(r, name)[i].item()!r} at index {i}")

    for name in ("load_time", "wait_time", "step_start", "folded_start", "folded_busy"):
        a = getattr(r, name)
        ok = (a >= 0) & (a <= MAX_SECONDS)  # False for NaN
        if not ok.all():
            bad(name, f"expected times in seconds from 0 to {MAX_SECONDS:g}", ~ok)
    st = r.step_time
    if ((st < 0) | (st > MAX_SECONDS)).any():
        bad("step_time", f"expected times in seconds from 0 to {MAX_SECONDS:g} (NaN for a step still running)",
            (st < 0) | (st > MAX_SECONDS))
    for name in ("grad_sq_small", "grad_sq_full"):
        a = getattr(r, name)
        if (np.isinf(a) | (a < 0)).any():
            bad(name, "expected squared norms >= 0 (NaN where none was reported)", np.isinf(a) | (a < 0))
    for name, lo in (("steps_per_batch", 0), ("cap", 1), ("epoch", 0), ("small_batch", 0)):
        a = getattr(r, name)
        if (a < lo).any():
            bad(name, f"expected integers >= {lo}", a < lo)
    if r.n_batches > 1 and (np.diff(r.epoch) < 0).any():
        bad("epoch", "expected epochs in order (never decreasing)", np.append(False, np.diff(r.epoch) < 0))
    if r.batch_size is not None and (r.small_batch >= r.batch_size).any():
        bad("small_batch", f"expected b < the batch size {r.batch_size}", r.small_batch >= r.batch_size)
    kf = r.kept_from
    N = r.step_batch.size
    total = int(r.steps_per_batch[kf:].sum())
    if total != N:
        raise ValueError(f"records: steps_per_batch sums to {total} over the fresh batches from kept_from = {kf}, "
                         f"but there are {N} steps")
    if N and not np.array_equal(r.step_batch, np.repeat(np.arange(kf, r.n_batches, dtype=np.int64),
                                                         r.steps_per_batch[kf:])):
        raise ValueError("records: step_batch: expected each step's fresh batch, in order, as steps_per_batch "
                         "counts them")


def _clean_stale_temp(path: Path) -> None:
    """Remove the temp files of earlier saves to `path` whose writer is gone (killed mid-write)."""
    from echosim._files import temp_pid, writer_gone

    try:
        for p in path.parent.glob(f".{path.name}.*.tmp"):
            pid = temp_pid(p.name)
            if pid is not None and pid != os.getpid() and writer_gone(p, pid):
                p.unlink(missing_ok=True)
    except OSError:  # a directory we cannot list or a file we cannot remove: leave them
        pass


def _pandas():
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_frame needs pandas: pip install 'echosim[sweep]'") from None
    return pd


def load_records(path) -> Records:
    """Read records written by `Records.save`. Every field is checked (its type, range and
    length, the policy's name); anything else raises one ValueError naming the file and the
    field."""
    where = repr(str(path))
    try:
        path = Path(path)
    except TypeError:
        raise ValueError(f"records: expected a file name, got {type(path).__name__}") from None
    if not path.exists():
        raise ValueError(f"records: file {where} does not exist")
    if path.is_dir():
        raise ValueError(f"records: {where} is a directory, not a records file")
    try:
        z = np.load(path, allow_pickle=False)
        if not hasattr(z, "files"):
            raise ValueError(f"records: {where} is a single NumPy array (.npy), not an echosim records "
                             "file (.npz from Records.save)")
        with z:
            files = set(z.files)
            if "meta" not in files:
                raise ValueError(f"records: {where} is not an echosim records file (no meta field)")
            missing = [k for k in _BATCH_FIELDS + _STEP_FIELDS if k not in files and k not in _OPTIONAL]
            if missing:
                raise ValueError(f"records: {where}: field {missing[0]} is missing")
            meta_array = z["meta"]
            arrays = {k: z[k] for k in _BATCH_FIELDS + _STEP_FIELDS + _FOLDED_FIELDS if k in files}
    except ValueError as exc:
        if str(exc).startswith("records: "):
            raise
        raise ValueError(f"records: {where} is not an echosim records file ({_why(exc)})") from None
    except MemoryError:
        raise ValueError(f"records: {where}: too large to read into memory") from None
    except Exception as exc:  # noqa: BLE001 - a damaged zip or array: BadZipFile, EOFError, zlib.error, ...
        raise ValueError(f"records: {where} is not an echosim records file ({_why(exc)})") from None
    if meta_array.shape != () or meta_array.dtype.kind != "U":
        raise ValueError(f"records: {where}: meta: expected JSON text, got an array of {meta_array.dtype} "
                         f"and shape {meta_array.shape}")
    try:
        meta = json.loads(str(meta_array))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"records: {where}: meta: not valid JSON ({_why(exc)})") from None
    if not isinstance(meta, dict) or meta.get("format") not in _FORMATS:
        raise ValueError(f"records: {where} is not an echosim records file (format "
                         f"{meta.get('format') if isinstance(meta, dict) else None!r:.60})")
    for key in ("policy", "echo", "batch_size"):
        if key not in meta:
            raise ValueError(f"records: {where}: meta: field {key} is missing")
    try:
        return Records(meta["policy"], meta["echo"], meta["batch_size"], kept_from=meta.get("kept_from", 0),
                       clock=str(meta.get("clock", "")),
                       decisions=tuple(meta.get("decisions", ())) if isinstance(meta.get("decisions", ()), list)
                       else meta.get("decisions"), **arrays)
    except ValueError as exc:
        raise ValueError(f"records: {where}: {str(exc).removeprefix('records: ')}") from None


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:120]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
