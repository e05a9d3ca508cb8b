"""What `plan` returns: the `Plan` value object (the candidates, the best one per batch
size and overall, and why) and its views: a text table, JSON, a pandas frame, HTML for
notebooks, plot data and a figure. Nothing here computes a candidate; it only shows them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from echosim.pipeline.model import POLICIES
from echosim.planner.candidates import BASELINE
from echosim.planner.timing import format_count, format_duration

__all__ = ["FRAME_UNITS", "Plan"]

_TABLE_WIDTH = 100
"""The width of `Plan.table`'s prose lines."""


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
    "R": ("loader_to_step_R", "steps per mean loader time per batch, with W workers (t_load / (W t_step))"),
    "max_echo": ("max_echo_K", "cap on K_t (greedy, auto), steps per fresh batch"),
    "wall_clock_seeds": ("wall_clock_seeds_s", "s, one per seed"),
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
        rows = [{"candidate": candidate_name(c), **{FRAME_UNITS.get(k, (k, ""))[0]: v for k, v in c.items()},
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
            row = [candidate_name(c) + mark] + ([str(c["batch_size"])] if many_b else []) + (
                [str(c["workers"])] if many_w else []) + [
                format_count(c["batches_to_target"]), format_count(c["steps_to_target"]), format_band(c),
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
        fmt = "  ".join([f"{{:<{widths[0]}}}"] + [f"{{:>{w}}}" for w in widths[1:]])
        table = [fmt.format(*head), fmt.format(*["-" * w for w in widths])] + [fmt.format(*r) for r in rows]
        lines = [("fresh: fresh batches to target; wall-clock: to target, median and 10-90% band; util: accelerator "
                  "busy; speedup: over sync at the same B and loader workers; ceiling: the speedup if every echoed "
                  "step were worth a fresh one")]
        if len(self.best) > 1:
            for B, c in self.best.items():
                lines.append(f"best at B = {B}: {candidate_name(c)}: {self.reasons[B]}")
        lines.append(f"recommended{' overall' if len(self.best) > 1 else ''}: {candidate_name(self.recommended)} at "
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
        rec = html.escape(f"{candidate_name(self.recommended)} at B = {self.recommended['batch_size']}: {self.reason}")
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
        return (f"Plan(recommended={candidate_name(r)!r} at B={r['batch_size']}, wall_clock_to_target={wall!r}, "
                f"speedup={sp!r}, candidates={len(self.candidates)})")

    @staticmethod
    def name_of(c) -> str:
        """How the table names a candidate row: 'sync (no echo)', 'fixed K=4', 'greedy (mean K 3.1)'."""
        return candidate_name(c)

    def plot_data(self) -> list[dict]:
        """Wall-clock to target against K, one series per (B, workers): {x, y, y_low, y_high, label}."""
        series = []
        keys = sorted({(c["batch_size"], c["workers"]) for c in self.candidates})
        for B, W in keys:
            cs = [c for c in self.candidates if (c["batch_size"], c["workers"]) == (B, W)
                  and not POLICIES[c["policy"]].capped]
            cs.sort(key=lambda c: c["echo"])
            label = f"sync/fixed K, B={B}" + (f", {W} workers" if len(keys) > 1 else "")
            series.append({"x": [c["echo"] for c in cs], "y": [c["wall_clock_to_target"] for c in cs],
                           "y_low": [c["wall_clock_low"] for c in cs], "y_high": [c["wall_clock_high"] for c in cs],
                           "label": label, "kind": "line"})
            for c in self.candidates:
                if (c["batch_size"], c["workers"]) == (B, W) and POLICIES[c["policy"]].capped:
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


def candidate_name(c) -> str:
    """How a candidate row is named in the table and the reasons: 'sync (no echo)',
    'fixed K=4', 'greedy (mean K 3.1)'."""
    if c["policy"] == BASELINE:
        return f"{BASELINE} (no echo)"
    if POLICIES[c["policy"]].takes_echo:
        return f"{c['policy']} K={format_count(c['echo'])}"
    return f"{c['policy']} (mean K {c['echo']:.2g})"


def format_band(c) -> str:
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
