"""The advisor: loader timing + step time + the problem's response to echoing →
candidates (sync, fixed K, greedy; batch sizes; loader workers) → wall-clock to target
for each, the best per batch size and overall, each with its reason.

`plan` validates every input before any work, takes the timing from specs or from the
records of the user's own run (`echosim.echoing`), then evaluates the candidates in one
of two ways:

(a) ``problem=`` an echosim problem: every candidate is simulated end to end through
    the sweep machinery (the loader and the step time in the pipeline, the learning
    rate tuned per candidate by wall-clock to target, several seeds).
(b) ``steps_to_target=`` measurements: steps to target without echoing at two or more
    batch sizes, and optionally with echoing at some (B, K) (a pilot); a T(K, B) model
    (`echosim.planner.response`) predicts the fresh batches each candidate needs, and the
    pipeline simulator turns them into wall-clock.

Times are in seconds throughout.
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from echosim.planner.timing import TimeModel, as_loader, as_time_model, format_duration

__all__ = ["plan", "Plan", "PLANNED", "FRAME_UNITS"]

PLANNED = ("sync", "fixed", "greedy", "auto")
"""The echo policies of `echosim.pipeline` that the planner offers as candidates."""
_BAND = (0.1, 0.9)
_TABLE_WIDTH = 100


# --------------------------------------------------------------------------- validation


def _int_list(value, name: str, lo: int = 1) -> list[int]:
    vals = value if isinstance(value, (list, tuple, range, np.ndarray)) else [value]
    out = []
    for v in vals:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"{name}: expected integers >= {lo}, got {v!r}")
        out.append(int(v))
    if not out:
        raise ValueError(f"{name}: expected at least one value")
    return sorted(set(out))


def _int_arg(value, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name}: expected an integer {f'in {lo}..{hi}' if hi is not None else f'>= {lo}'}, "
                         f"got {value!r}")
    return int(value)


def _price(value, name: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name}: expected a price per hour >= 0, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- the result


FRAME_UNITS = {
    "echo": ("echo_K", "steps per fresh batch (the mean K for greedy and auto)"),
    "mean_echo": ("mean_echo_K", "steps per fresh batch"),
    "batch_size": ("batch_size_B", "examples per fresh batch"),
    "workers": ("loader_workers", "processes"),
    "batches_to_target": ("fresh_batches_to_target", "fresh batches (median over seeds)"),
    "steps_to_target": ("steps_to_target", "optimizer steps (median over seeds)"),
    "wall_clock_to_target": ("wall_clock_to_target_s", "s (median)"),
    "wall_clock_low": ("wall_clock_low_s", "s (10% quantile)"),
    "wall_clock_high": ("wall_clock_high_s", "s (90% quantile)"),
    "baseline_wall_clock": ("sync_wall_clock_s", "s (sync at the same B and workers)"),
    "speedup": ("speedup_x", "times faster than sync at the same B and workers"),
    "speedup_ceiling": ("speedup_ceiling_x", "times faster than sync if every echoed step were worth a fresh one"),
    "utilization": ("accelerator_busy_fraction", "fraction of the time to target"),
    "throughput": ("throughput_per_s", "fresh batches per second"),
    "cost": ("cost_per_run", "price unit per run (prices are per hour)"),
    "lr": ("lr", "learning rate (tuned)"),
    "budget": ("budget_fresh_batches", "fresh batches simulated"),
    "converged": ("seeds_converged", "seeds that reached the target / seeds"),
}
"""`Plan.to_frame`'s column for each candidate key: (name, unit); other keys keep their name."""


@dataclass
class Plan:
    """What `plan` found: one row per candidate, the best one per batch size and overall, and why.

    ``candidates`` is a list of `echosim.planner.candidates.Planned` value objects (a
    `Candidate`, its `Outcome`, the comparison with sync), read like mappings with
    ``policy``, ``echo`` (K; the mean K̄ for greedy), ``batch_size``, ``workers``,
    ``batches_to_target``, ``steps_to_target``, ``wall_clock_to_target`` (seconds, median)
    with ``wall_clock_low``/``_high`` (10% and 90% quantiles) and ``wall_clock_seeds`` (per
    seed), ``speedup`` (over ``baseline_wall_clock``: sync at the same B and loader
    workers), ``speedup_ceiling`` (the theory's, `theory.rate_speedup_ceiling`: every
    echoed step worth a fresh one), ``utilization`` (accelerator busy fraction until the
    target), ``cost`` (if prices). ``best`` maps each batch size to its best candidate;
    ``recommended`` is the best overall.
    """

    candidates: list
    recommended: dict
    reason: str
    source: str
    inputs: dict
    notes: list = field(default_factory=list)
    best: dict = field(default_factory=dict)
    reasons: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)
    """Form (a): the simulated runs that failed (policy, echo, batch_size, lr, error), also
    told in `notes`; they count as never reaching the target."""

    # ---- output

    def to_dict(self) -> dict:
        def clean(v):
            if isinstance(v, (np.floating, np.integer)):
                v = v.item()
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, (list, tuple)):
                return [clean(x) for x in v]
            return v

        def short(c):
            return {"policy": c["policy"], "echo": clean(c["echo"]), "batch_size": c["batch_size"],
                    "workers": c["workers"]}

        return {"recommended": {**short(self.recommended), "reason": self.reason},
                "best_per_batch_size": {str(B): {**short(c), "reason": self.reasons.get(B, "")}
                                        for B, c in self.best.items()},
                "candidates": [{k: clean(v) for k, v in c.items()} for c in self.candidates],
                "source": self.source, "inputs": self.inputs, "notes": list(self.notes),
                "failed_runs": [{k: clean(v) for k, v in f.items()} for f in self.failed],
                "units": {"wall_clock_to_target": "s", "baseline_wall_clock": "s", "cost": "currency per run",
                          "utilization": "fraction", "speedup": "x over sync at the same B and workers"}}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def to_frame(self):
        """The candidates as a pandas DataFrame, one row each, its columns named with their
        units (`FRAME_UNITS`: ``wall_clock_to_target_s`` in seconds, ``speedup_x`` a ratio,
        ...); ``frame.attrs["units"]`` spells each unit out."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Plan.to_frame needs pandas: pip install 'echosim[sweep]'") from None
        rows = [{"candidate": self._name(c), **{FRAME_UNITS.get(k, (k, ""))[0]: v for k, v in c.items()},
                 "recommended": c is self.recommended, "best_at_batch_size": c is self.best.get(c["batch_size"])}
                for c in self.candidates]
        frame = pd.DataFrame(rows)
        frame.attrs["units"] = {name: unit for name, unit in FRAME_UNITS.values() if name in frame.columns}
        return frame

    def _rows(self):
        many_b = len({c["batch_size"] for c in self.candidates}) > 1
        many_w = len({c["workers"] for c in self.candidates}) > 1
        has_cost = any(c.get("cost") is not None for c in self.candidates)
        head = ["candidate"] + (["B"] if many_b else []) + (["W"] if many_w else []) + [
            "fresh", "steps", "wall-clock (10-90%)", "util", "speedup", "ceiling"] + (
            ["cost/run"] if has_cost else [])
        rows = []
        for c in self.candidates:
            mark = " *" if c is self.recommended else (" +" if c is self.best.get(c["batch_size"]) and many_b else "")
            row = [self._name(c) + mark] + ([str(c["batch_size"])] if many_b else []) + (
                [str(c["workers"])] if many_w else []) + [
                _num(c["batches_to_target"]), _num(c["steps_to_target"]), _band(c),
                f"{c['utilization']:.0%}" if math.isfinite(c["utilization"]) else "-",
                f"{c['speedup']:.2f}x" if math.isfinite(c["speedup"]) else "-",
                f"{c['speedup_ceiling']:.2f}x" if math.isfinite(c["speedup_ceiling"]) else "-"]
            if has_cost:
                row.append("-" if c.get("cost") is None or not math.isfinite(c["cost"]) else f"{c['cost']:.4g}")
            rows.append(row)
        return head, rows

    def table(self) -> str:
        """The candidates as aligned text (at most 100 columns), then the best per batch size
        and overall, and how the numbers were obtained."""
        head, rows = self._rows()
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
        table = [fmt.format(*head), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in rows]
        lines = ["fresh: fresh batches to target; wall-clock: to target, median and 10-90% band; util: accelerator "
                 "busy; speedup: over sync at the same B and loader workers; ceiling: the speedup if every echoed "
                 "step were worth a fresh one"]
        if len(self.best) > 1:
            for B, c in self.best.items():
                lines.append(f"best at B = {B}: {self._name(c)}: {self.reasons[B]}")
        lines.append(f"recommended{' overall' if len(self.best) > 1 else ''}: {self._name(self.recommended)} at "
                     f"B = {self.recommended['batch_size']}"
                     f"{', ' + str(self.recommended['workers']) + ' loader worker(s)' if len({c['workers'] for c in self.candidates}) > 1 else ''}"
                     f": {self.reason}")
        lines.append(f"how: {self.source}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(table + [""] + [_wrap(line) for line in lines])

    def _repr_html_(self) -> str:
        import html

        head, rows = self._rows()
        th = "".join(f"<th>{html.escape(h)}</th>" for h in head)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in r) + "</tr>" for r in rows)
        rec = html.escape(f"{self._name(self.recommended)} at B = {self.recommended['batch_size']}: {self.reason}")
        legend = html.escape("fresh: fresh batches to target; steps: optimizer steps to target; wall-clock: to "
                             "target, median (10-90% band) in the unit shown; util: accelerator busy; speedup: "
                             "over sync at the same B and loader workers; ceiling: the speedup if every echoed "
                             "step were worth a fresh one" + ("; cost/run: price unit per run (prices per hour)"
                                                              if "cost/run" in head else ""))
        return (f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"
                f"<p><small>{legend}</small></p>"
                f"<p><b>recommended</b>: {rec}</p><p><small>{html.escape(self.source)}</small></p>")

    def __repr__(self) -> str:
        r = self.recommended
        wall = r.get("wall_clock_to_target", math.nan)
        wall = format_duration(wall) if isinstance(wall, float) and math.isfinite(wall) else "never"
        sp = r.get("speedup", math.nan)
        sp = f"{sp:.2f}x" if isinstance(sp, float) and math.isfinite(sp) else "-"
        return (f"Plan(recommended={self._name(r)!r} at B={r['batch_size']}, wall_clock_to_target={wall!r}, "
                f"speedup={sp!r}, candidates={len(self.candidates)})")

    @staticmethod
    def _name(c) -> str:
        if c["policy"] == "sync":
            return "sync (no echo)"
        if c["policy"] == "fixed":
            return f"fixed K={_num(c['echo'])}"
        return f"{c['policy']} (mean K {c['echo']:.2g})"

    def plot_data(self) -> list[dict]:
        """Wall-clock to target against K, one series per (B, workers): {x, y, y_low, y_high, label}."""
        series = []
        keys = sorted({(c["batch_size"], c["workers"]) for c in self.candidates})
        for B, W in keys:
            cs = [c for c in self.candidates if (c["batch_size"], c["workers"]) == (B, W)
                  and c["policy"] in ("sync", "fixed")]
            cs.sort(key=lambda c: c["echo"])
            label = f"sync/fixed K, B={B}" + (f", {W} workers" if len(keys) > 1 else "")
            series.append({"x": [c["echo"] for c in cs], "y": [c["wall_clock_to_target"] for c in cs],
                           "y_low": [c["wall_clock_low"] for c in cs], "y_high": [c["wall_clock_high"] for c in cs],
                           "label": label, "kind": "line"})
            for c in self.candidates:
                if (c["batch_size"], c["workers"]) == (B, W) and c["policy"] in ("greedy", "auto"):
                    series.append({"x": [c["echo"]], "y": [c["wall_clock_to_target"]], "y_low": [c["wall_clock_low"]],
                                   "y_high": [c["wall_clock_high"]], "label": label.replace("sync/fixed K", c["policy"]),
                                   "kind": "point"})
        return series

    def plot(self, path=None):
        """Draw `plot_data` (median, 10–90% band) as a matplotlib Figure; saved to `path` (PNG, PDF or
        SVG) if given. The session's matplotlib backend is left as it is."""
        from matplotlib.figure import Figure

        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        for s in self.plot_data():
            x, y = np.asarray(s["x"], float), np.asarray(s["y"], float)
            lo, hi = np.asarray(s["y_low"], float), np.asarray(s["y_high"], float)
            if s["kind"] == "line":
                line, = ax.plot(x, y, "o-", label=s["label"] + " (median)")
                ax.fill_between(x, lo, hi, alpha=0.2, color=line.get_color(), label="10-90% band")
            else:
                ax.errorbar(x, y, yerr=[y - lo, hi - y], fmt="s", capsize=3, label=s["label"] + " (10-90%)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("echo factor K (mean K for greedy and auto)")
        ax.set_ylabel("wall-clock to target (s)")
        ax.set_title("echosim plan: wall-clock to target")
        ax.legend(fontsize=8)
        fig.tight_layout()
        if path is not None:  # atomically: a failed write leaves the previous figure as it was
            from pathlib import Path

            from echosim._files import atomic_file

            with atomic_file(path) as f:
                fig.savefig(f, format=Path(path).suffix.lstrip(".").lower() or None)
        return fig


def _num(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "never"
    v = float(v)
    return str(int(round(v))) if abs(v - round(v)) < 1e-9 or v >= 100 else f"{v:.3g}"


def _band(c) -> str:
    """'2.32 min (2.16-2.56)': the median with its 10-90% band in the median's unit."""
    wall = c["wall_clock_to_target"]
    if not math.isfinite(wall):
        return "never"
    text = format_duration(wall)
    value, unit = text.split(" ")
    scale = float(value) / wall if wall else 1.0
    lo, hi = c["wall_clock_low"] * scale, c["wall_clock_high"] * scale
    hi_txt = f"{hi:.3g}" if math.isfinite(hi) else "never"
    return f"{value} {unit} ({lo:.3g}-{hi_txt})"


def _wrap(line: str) -> str:
    """A prose line longer than the table width, wrapped with an indent."""
    import textwrap

    if len(line) <= _TABLE_WIDTH:
        return line
    return "\n".join(textwrap.wrap(line, _TABLE_WIDTH, subsequent_indent="  ", break_on_hyphens=False))


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class _Timing:
    """Where each candidate's loader and step times come from: specs (the same for every
    policy), or the records of runs through `echoing` (per policy and batch size)."""

    load: TimeModel | None = None
    step: TimeModel | None = None
    recorded: dict | None = None  # B -> [(mean echo, policy, loader dist or None, step dist, record index)]
    describe: str = ""

    def for_candidate(self, policy: str, echo: float, B: int):
        """(loader ServiceTime, step ServiceTime, note) for a candidate."""
        if self.recorded is None:
            return self.load.at(B), self.step.at(B), None
        groups = self.recorded[B]
        k = 1.0 if policy == "sync" else (float(echo) if policy == "fixed" else None)
        same = [g for g in groups if g[1] == policy and (k is None or abs(g[0] - k) < 1e-9)]
        pool = same or sorted(groups, key=lambda g: abs(math.log(g[0]) - math.log(k if k else groups[-1][0])))
        g = pool[0]
        loader = g[2] if g[2] is not None else next((h[2] for h in sorted(
            groups, key=lambda h: abs(math.log(h[0]) - math.log(g[0]))) if h[2] is not None), None)
        note = None if same else f"{_policy_text(policy, echo)} at B = {B}: timed from the {g[1]} run's records"
        return loader, g[3], note

    def mean_loader(self, B: int) -> float:
        if self.recorded is None:
            return self.load.mean_at(B)
        return min(g[2].mean for g in self.recorded[B] if g[2] is not None)

    def mean_step(self, B: int) -> float:
        if self.recorded is None:
            return self.step.mean_at(B)
        return min(g[3].mean for g in self.recorded[B])


def _policy_text(policy, echo) -> str:
    return {"sync": "sync", "greedy": "greedy", "auto": "auto"}.get(policy, f"fixed K={_num(echo)}")


def _timing(loader, step_time, records, Bs, Ws) -> _Timing:
    if records is None:
        if loader is None or step_time is None:
            raise ValueError(f"{'loader' if loader is None else 'step_time'}: required (a time per batch such as "
                             "'80ms' or 'gamma(mean=80ms, cv=0.5)'), unless records= gives both from a run")
        load = as_loader(loader)
        step = as_time_model(step_time, "step_time")
        for B in Bs:  # a fitted a + b·B must be positive at every candidate B
            load.at(B)
            step.at(B)
        return _Timing(load=load, step=step, describe=f"loader {load.describe()}; step {step.describe()}")
    if loader is not None or step_time is not None:
        raise ValueError("records: give either records (timing from your own run) or loader and step_time, not both")
    if Ws != [1]:
        raise ValueError("workers: records time your loader as it ran, with its own workers; to compare worker "
                         "counts, profile one worker alone (loader=) instead")
    from echosim.planner.recorded import recorded_timing

    recorded = recorded_timing(records, Bs)
    parts = []
    for B, groups in recorded.items():
        parts.append(f"B = {B}: " + "; ".join(
            f"{p} (mean K {k:.3g}): loader {format_duration(ld.mean) if ld is not None else 'ran ahead'}, "
            f"step {format_duration(st.mean)}" for k, p, ld, st, _ in groups))
    return _Timing(recorded=recorded, describe="in-run timing from the records: " + " | ".join(parts))


# --------------------------------------------------------------------------- plan


def _method_arg(method, options, form_a: bool) -> dict:
    """The optimizer of form (a) as config keys; ValueError naming `method` or `method_options`."""
    from echosim.training.methods import get_method

    row = get_method(method)
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"method_options: expected a mapping of the method's hyper-parameters, got {options!r}")
    options = dict(options or {})
    if not form_a and (row.name != "echoed_gd" or options):
        raise ValueError("method: the optimizer is simulated in form (a) only (problem=...); with steps_to_target "
                         "the steps you measured already come from your own optimizer")
    if row.one_step:
        raise ValueError(f"method: {row.name} takes one step per fresh batch, so there is nothing to echo; "
                         "plan an echoed method (echoed_gd, echoed_heavy_ball, echoed_adam, ...)")
    unknown = sorted(set(options) - set(row.fields))
    if unknown:
        raise ValueError(f"method_options: {row.name} has {', '.join(row.fields) or 'no hyper-parameters'}, "
                         f"got {', '.join(map(repr, unknown))}")
    return {"method": row.name, **options}


def plan(loader=None, step_time=None, *, batch_size, problem=None, steps_to_target=None, records=None,
         workers=1, prefetch: int = 2, policies=None, echoes=None, max_echo: int = 64, target: float = 0.002,
         seeds: int = 5, accelerator_price=None, worker_price=None, seed: int = 0, processes: int = 2,
         results=None, progress=None, method: str = "echoed_gd", method_options=None, curves=None,
         target_loss=None) -> Plan:
    """Should I echo, with which K, and what will it save me?

    Parameters
    ----------
    loader : text, number, ServiceTime, Trace, or mapping B -> profile
        Time one loader worker needs per fresh batch (seconds): ``"gamma(mean=80ms,
        cv=0.5)"``, ``"trace(times.csv, unit=ms)"``, a `Trace` from `echosim.profile`,
        or profiles at two or more batch sizes (time per batch = a + b·B is fitted). A
        profile taken apart from training is an optimistic bound on a shared host:
        prefer ``records``.
    step_time : text, number, ServiceTime, Trace, or mapping B -> time
        Time of one optimizer step (seconds), e.g. ``"10ms"``; at several batch sizes
        (``{64: "15ms", 512: "40ms"}``) a + b·B is fitted.
    batch_size : int or list of int
        B; several values give the best per B and overall. Each at most what a run of a
        sweep can hold (`echosim.experiments.limits.max_batch_size`).
    problem : str or dict, optional
        Form (a): ``"logistic"``, ``"least_squares"``, ``"dataset:NAME"`` or a
        ``[problem]`` table. T(K) is simulated with tuned learning rates.
    steps_to_target : mapping, optional
        Form (b): optimizer steps to the target, keys B (without echoing, at two or more
        B) or (B, K) (with echoing, e.g. from a pilot: ``{(1024, 4): 20}`` = 20 steps =
        5 fresh batches; at least K steps, 1 <= K <= 4096).
    records : Records or list of Records, optional
        Runs through `echosim.echoing` (any policies, e.g. a pilot from
        `echosim.pilot`): the loader and step times are taken from them, per policy, so
        the host's contention is in the numbers. Replaces ``loader`` and ``step_time``.
        In form (b) they also measure echoing (`echosim.planner.echo_signals`): the
        gradient-noise scale centres the echo model, and fixed-K runs against sync runs at
        the same B give K_eff (from paired next-batch progress, else from the loss curves).
    workers : int or list of int
        Loader workers W; several values compare echoing with adding workers.
    prefetch : int
        Prefetch buffer capacity C.
    policies : subset of ("sync", "fixed", "greedy", "auto")
        Default: all of them ("auto" with form (a) only).
        "auto" (form (a) only): greedy under an echo cap tuned from the losses, simulated
        with the controller of ``echoing(policy="auto")``, its caps decided in each run
        from that run's simulated first-step losses.
    echoes : list of int, optional
        K for "fixed" (default: powers of two bracketing R = t_load/(W t_step)).
    max_echo : int
        Bound on K_t under "greedy" and "auto".
    target : float
        Form (a): reach a loss <= (1 + target)·F* and stay there.
    seeds : int
        Repetitions (loader randomness, and form (a)'s data) behind the 10–90% bands.
    accelerator_price, worker_price : float, optional
        Price per hour of the accelerator and of one loader worker; adds a cost column
        and makes the recommendation the cheapest run instead of the fastest.
    seed : base seed.
    processes : worker processes for form (a)'s simulations.
    results : the run store for form (a)'s runs (default ``$ECHOSIM_STORE``, else
        ``echosim-results/store``): runs it holds, from any sweep or plan, are reused.
    progress : bool, optional
        Form (a): on stderr, a line naming each simulation step (which candidates, how many
        steps may follow) and its progress: a bar redrawn on a terminal, a line every 10 s
        elsewhere (logs, pipes), tqdm's widget in a notebook; default on, ``False`` silences it.
    curves : Records, list of Records, CSV path, or mapping, optional
        Form (b) from whole loss curves (`echosim.planner.curves`): the loss per fresh batch
        of runs at K = 1 (two or more batch sizes) and optionally with echoing; the steps
        to ``target_loss`` are read off each curve (reaches it and stays, trailing mean over
        10 fresh batches), every run a repeat. Adds to ``steps_to_target`` if both are given.
    target_loss : float, optional
        With ``curves``: the loss to reach.
    method, method_options : str, dict, optional
        Form (a): the optimizer simulated, a row of `echosim.training.methods.METHODS`
        (e.g. ``"echoed_heavy_ball"`` with ``{"momentum": 0.9}``, ``"echoed_adam"`` with
        ``{"beta2": 0.99}``), its hyper-parameters under their config keys (defaults:
        the method's). Form (b) takes the steps measured with your own optimizer.
    """
    # ---- validate everything first: nothing runs, nothing is written on bad input
    from echosim.experiments.limits import MAX_WORKERS
    from echosim.planner.response import MAX_ECHO, check_batch_size

    Bs = [check_batch_size(B, "batch_size") for B in _int_list(batch_size, "batch_size")]
    Ws = _int_list(workers, "workers")
    if Ws[-1] > MAX_WORKERS:
        raise ValueError(f"workers: expected at most {MAX_WORKERS:,} loader workers (what the simulation takes), "
                         f"got {Ws[-1]:,}")
    prefetch = _int_arg(prefetch, "prefetch", 1)
    max_echo = _int_arg(max_echo, "max_echo", 1, MAX_ECHO)
    if policies is None:  # every planned policy that the form can evaluate
        policies = [p for p in PLANNED if p != "auto" or (steps_to_target is None and curves is None)]
    if isinstance(policies, str):
        policies = [p.strip() for p in policies.split(",") if p.strip()]
    policies = list(dict.fromkeys(policies))
    bad = [p for p in policies if p not in PLANNED]
    if bad or not policies:
        raise ValueError(f"policies: allowed {', '.join(PLANNED)}, got {', '.join(map(str, policies)) or 'none'}")
    if "sync" not in policies:
        policies.insert(0, "sync")  # the baseline every speedup is measured against
    if echoes is not None:
        echoes = [k for k in _int_list(echoes, "echo") if k > 1]
        if max(echoes, default=1) > MAX_ECHO:
            raise ValueError(f"echo: expected K <= {MAX_ECHO}, got {max(echoes)}")
    seeds = _int_arg(seeds, "seeds", 1, 100)
    seed = _int_arg(seed, "seed", 0, 2 ** 63 - 1)
    if isinstance(target, bool) or not (isinstance(target, numbers.Real) and math.isfinite(target) and target > 0):
        raise ValueError(f"target: expected a relative tolerance > 0 (loss <= (1 + target) F*), got {target!r}")
    processes = _int_arg(processes, "processes", 1, 256)
    acc_price = _price(accelerator_price, "accelerator_price")
    wrk_price = _price(worker_price, "worker_price")
    if (curves is None) != (target_loss is None):
        raise ValueError(f"{'target_loss' if curves is not None else 'curves'}: give curves and target_loss together "
                         "(the loss per fresh batch of your runs, and the loss to reach)")
    if curves is not None:
        from echosim.planner.curves import steps_from_curves
        from echosim.planner.response import measurements

        from_curves = steps_from_curves(curves, target_loss)
        if steps_to_target is not None:
            measurements(steps_to_target)  # checked as given, before merging
            merged = {k: list(np.atleast_1d(np.asarray(v, dtype=float))) for k, v in steps_to_target.items()}
            for k, v in from_curves.items():
                merged.setdefault(k, []).extend(v)
            from_curves = merged
        steps_to_target = from_curves
    if (problem is None) == (steps_to_target is None):
        raise ValueError("problem: give exactly one of problem (an echosim problem, simulated) or "
                         "steps_to_target (measured steps to target at two or more batch sizes)")
    if "auto" in policies and problem is None:
        raise ValueError("policies: 'auto' decides its caps from the losses, so it is planned on a simulated problem "
                         "(problem=..., form (a)), not from steps_to_target")
    optimizer = _method_arg(method, method_options, form_a=problem is not None)
    timing = _timing(loader, step_time, records, Bs, Ws)
    response = pconf = None
    failed: list = []
    fail_note = None
    if steps_to_target is not None:
        from echosim.planner.response import fit_response

        from echosim.planner.echo_signals import echo_gains, measured_noise_scale

        response = fit_response(steps_to_target, seed=seed, noise_scale=measured_noise_scale(records),
                                echo_gains=echo_gains(records) or None)
    else:
        from echosim.planner.simulated import problem_config, validate_problem

        pconf = problem_config(problem)
        problem_obj = validate_problem(pconf, optimizer)
        for B in Bs:  # the problem's features set how large a batch its runs can hold
            check_batch_size(B, "batch_size", problem_obj.n_features, 8)

    # ---- candidates (value objects), each evaluated to an Outcome, then compared with sync
    from echosim.planner.candidates import candidates, compare

    specs = candidates(Bs, Ws, policies, echoes, max_echo,
                       lambda B, W: timing.mean_loader(B) / (W * timing.mean_step(B)))
    notes = []
    times = []
    for c in specs:
        loader_time, step_dist, note = timing.for_candidate(c.policy, c.echo, c.batch_size)
        times.append((loader_time, step_dist))
        if note and note not in notes:
            notes.append(note)
    ctx = {"prefetch": prefetch, "max_echo": max_echo, "seeds": seeds, "seed": int(seed), "optimizer": optimizer}
    if response is not None:
        from echosim.planner.modelled import evaluate

        outcomes = [evaluate(c, ld, st, response, ctx) for c, (ld, st) in zip(specs, times)]
        source = (f"form (b): fresh batches from the model {response.describe()}; wall-clock from {seeds} simulated "
                  "loader runs per candidate; band: 10-90% over the model's draws (its parameters and its own "
                  "measured error) and the runs")
        from echosim.planner.response import ACCURACY

        notes.append(f"accuracy of the T(K) model: {ACCURACY}")
    else:
        from echosim.planner.simulated import run_candidates

        show = True if progress is None else bool(progress)
        outcomes, source, more = run_candidates(specs, times, pconf, ctx, target, processes, results, show)
        notes.extend(more)
        from echosim.experiments.store import Store
        from echosim.planner.simulated import failures_note

        failed = list(ctx.get("failed_runs", {}).values())
        fail_note = failures_note(ctx.get("failed_runs", {}), Store(results).root)
        if fail_note:
            notes.insert(0, fail_note)
    notes.insert(0, f"timing: {timing.describe}")

    # ---- speedups (over sync at the same B and workers), ceilings (theory), costs
    priced = acc_price is not None or wrk_price is not None
    cands, clipped = compare(specs, outcomes, (acc_price, wrk_price) if priced else None)
    notes.extend(clipped)
    reachable = [c for c in cands if math.isfinite(c["wall_clock_to_target"])]
    if not reachable:
        raise ValueError(f"target: no candidate reaches the target (loss <= (1 + {target:g}) F*) within the budget; "
                         "loosen --target or try larger batch sizes" + (f"; {fail_note}" if failed else ""))
    best, reasons = {}, {}
    for B in Bs:
        mine = [c for c in reachable if c["batch_size"] == B]
        if mine:
            best[B], reasons[B] = _recommend(cands, mine, priced)
    rec, reason = _recommend(cands, reachable, priced)
    if response is not None and response.echo_source.startswith("prior only"):
        reasons = {B: _unmeasured(c, r, cands) for (B, c), r in zip(best.items(), reasons.values())}
        reason = _unmeasured(rec, reason, cands)
    inputs = {"timing": timing.describe, "batch_size": Bs, "workers": Ws,
              "prefetch": prefetch, "policies": policies, "max_echo": max_echo, "seeds": seeds,
              "seed": int(seed), "problem": pconf,
              "steps_to_target": None if response is None else
              [{"batch_size": b, "echo": k, "fresh_batches": t} for b, k, t in response.measurements],
              "target": float(target) if pconf else None,
              "accelerator_price": acc_price, "worker_price": wrk_price}
    return Plan(candidates=cands, recommended=rec, reason=reason, source=source, inputs=inputs, notes=notes,
                best=best, reasons=reasons, failed=failed)


def _unmeasured(rec, reason: str, cands) -> str:
    """With no echoed measurement, 'do not echo' is the prior's guess, not a finding: say what
    would settle it (a pilot at the most promising K, or paired progress in the loop)."""
    if rec["policy"] != "sync" or rec["R"] <= 1.0:
        return reason
    B, W = rec["batch_size"], rec["workers"]
    echo = [c for c in cands if c["policy"] == "fixed" and c["batch_size"] == B and c["workers"] == W
            and math.isfinite(c["wall_clock_to_target"])]
    K = _num(min(echo, key=lambda c: c["wall_clock_low"])["echo"]) if echo else "4"
    why = reason.split(": ", 1)[1] if reason.startswith("do not echo: ") else reason
    return (f"no echoing measured, so no verdict on echoing: without an echoed measurement the model's prior "
            f"predicts no gain ({why}); to decide, measure echoing at B = {B}, K = {K}: steps to target there, "
            "or a pilot (echosim.pilot) whose records carry paired next-batch progress (report(lagged_loss=...)) "
            "under K and under sync")


def _recommend(cands, reachable, priced: bool):
    """The best of `reachable` and why, by the rule the sweep's answer uses
    (`echosim.experiments.choice`): robust over the seeds, the fastest (cheapest with prices)
    within the noise, then the fewest accelerator steps."""
    from echosim.experiments.choice import TOLERANCE, choose

    key = (lambda c: c["cost"]) if priced else (lambda c: c["wall_clock_to_target"])

    def per_seed(c):  # the time (or cost) of each loader/data seed, scaled as the median
        seeds = np.asarray(c.get("wall_clock_seeds") or [c["wall_clock_to_target"]], dtype=float)
        return seeds * (key(c) / c["wall_clock_to_target"]) if priced and c["wall_clock_to_target"] > 0 else seeds

    choice = choose([per_seed(c) for c in reachable], [c["steps_to_target"] for c in reachable])
    rec, fastest = reachable[choice.index], reachable[choice.fastest_median]
    B, W, R = rec["batch_size"], rec["workers"], rec["R"]
    what = "cheapest" if priced else "fastest"
    shown = format_duration(key(fastest)) if not priced else f"{key(fastest):.3g}"
    if fastest is not rec and choice.why == "fewer steps":
        what = f"within the noise ({TOLERANCE:.0%} or the seeds' spread) of the {what} ({Plan._name(fastest)}, {shown}) with fewer steps"
    elif fastest is not rec:
        what = (f"{what} over the seeds ({Plan._name(fastest)} is {what} in the median, {shown}, but slower "
                "on a quarter of the seeds)")
    wall, band = _band(rec).split(" (")
    band = band.rstrip(")") + " " + wall.split(" ")[1]
    base = next(c for c in cands if c["policy"] == "sync" and c["batch_size"] == B and c["workers"] == W)
    if rec["policy"] == "sync":
        echo = [c for c in reachable if c["policy"] != "sync" and c["batch_size"] == B and c["workers"] == W]
        if R <= 1.0:
            why = (f"the loader keeps up (it needs {R:.2g}x a step per batch with {W} worker(s)), so the "
                   "accelerator never waits and echoing has nothing to fill")
        elif echo:
            b = min(echo, key=key)
            why = (f"the best echoing candidate ({Plan._name(b)}) reaches the target in "
                   f"{format_duration(b['wall_clock_to_target'])}, no better than without echoing: repeated "
                   "batches are worth little here (the run is noise-dominated)")
        else:
            why = "no echoing candidate reached the target"
        reason = f"do not echo: {why}; {wall} to target (10-90%: {band})"
    else:
        sp = rec["speedup"]
        reason = (f"{what}: {wall} to target (10-90%: {band}), {sp:.2f}x sooner than sync at the same B "
                  f"({format_duration(base['wall_clock_to_target'])})")
        if rec["policy"] == "fixed":
            K = rec["echo"]
            if K >= R:
                reason += (f"; the loader is R = {R:.2g}x slower than a step, and K = {_num(K)} >= R already fills "
                           "the accelerator's idle time (larger K costs wall-clock per batch)")
            else:
                reason += (f"; K = {_num(K)} < R = {R:.2g}: larger K would be free, but the fresh batches needed "
                           "stop falling (echoed steps are worth less than fresh ones)")
        elif rec["policy"] == "greedy":
            reason += (f"; greedy echoes exactly while the next batch loads (mean K = {rec['echo']:.2g}, at most "
                       f"{rec['max_echo']}; R = {R:.2g}), so it adapts to the loader's variability without choosing K")
        else:
            reason += (f"; auto echoes while the next batch loads under a cap it tunes from the first-step losses "
                       f"(mean K = {rec['echo']:.2g}, at most {rec['max_echo']}; R = {R:.2g}): "
                       "echoing(policy='auto') runs the same controller in your loop")
        if rec["speedup_ceiling"] > 0:
            reason += f"; the theory's ceiling for it is {rec['speedup_ceiling']:.2g}x"
        if rec["wall_clock_high"] >= base["wall_clock_to_target"]:
            reason += ("; but its 90% quantile is no better than the median without echoing, so the gain is "
                       "within the uncertainty (a pilot at this K would tell)")
    if priced:
        reason += f"; cost {rec['cost']:.4g} per run (sync: {base.get('cost', math.nan):.4g})"
    return rec, reason
