"""Issue 18's timing target on the PyTorch job: wall-clock to target planned from a pilot's
in-run records, against the wall-clock measured (torch-free: it only reads a run directory).

    python benchmarks/torch_job/run.py --out torch-job-out        # the runs (needs torch)
    python benchmarks/torch_job/plan_check.py torch-job-out       # this check, seconds
    python benchmarks/torch_job/plan_check.py torch-job-out --pilot 20 --json check.json

For each run of a planned policy P (K = 1, 2, 4, 8, greedy) at seed s, the pilot is the
records of that run's first ``--pilot`` fresh batches (`Records.head`), given to the
planner's timing from records, the code `plan(records=...)` runs: the loader and step
times of the pilot's P segment, a simulated pipeline under P, its time per fresh batch.
The prediction of the wall-clock to target is (the run's measured T) x (that time per
fresh batch); it is compared with the run's measured wall-clock to target. The same
prediction from the profiles taken alone (the block's ``profile-block<j>.json``: the
loader and the step timed apart, as the how-to's first step does) is shown for contrast.

This checks the timing half of a plan only: T is the run's own (the T half, fresh batches
to target, is checked by the validation suite). Where T <= the pilot, the pilot's
batches are the ones timed to the target; the time per fresh batch after the pilot
(to the end of the budget) is compared too, out of sample.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rules

PLANNED = {"K=1": ("sync", 1), "K=2": ("fixed", 2), "K=4": ("fixed", 4), "K=8": ("fixed", 8),
           "greedy": ("greedy", math.nan)}
"""The run labels checked and the planner's candidate for each: (policy, K)."""

DEFAULT_PILOT = 40
SIM_BATCHES = 2000   # fresh batches per simulated run, as the planner's probe
SIM_SEEDS = 5        # the planner's default repetitions


# ---- the planner's timing (its own code: `plan` takes the same path)

def timing_from_records(records, batch_size: int):
    """The planner's timing from records (any policies), at one batch size and one worker."""
    from echosim.planner.timing import candidate_timing

    return candidate_timing(None, None, records, [batch_size], [1])


def timing_from_profile(profile: dict, batch_size: int):
    """The planner's timing from a profile taken alone: the loader's and the step's times."""
    from echosim.pipeline.traces import Trace
    from echosim.planner.timing import candidate_timing

    loader = Trace(np.asarray(profile["loader_times"], dtype=float), "resample")
    step = Trace(np.asarray(profile["step_times"], dtype=float), "resample")
    return candidate_timing(loader, step, None, [batch_size], [1])


def predicted_interval(timing, label: str, batch_size: int, *, max_echo: int = 64, prefetch: int = 2,
                       n: int = SIM_BATCHES, seeds: int = SIM_SEEDS, seed: int = 0) -> float:
    """Seconds per fresh batch the planner predicts for the run labelled `label`: its
    candidate's pipeline (loader and step from `timing`), simulated for `n` fresh batches,
    the median over `seeds` runs of makespan / n."""
    from echosim.pipeline.schedule import simulate
    from echosim.planner.candidates import Candidate
    from echosim.planner.modelled import pipeline

    if label not in PLANNED:
        raise ValueError(f"label: expected one of {', '.join(PLANNED)}, got {label!r}")
    policy, echo = PLANNED[label]
    loader, step, _ = timing.for_candidate(policy, echo, batch_size)
    c = Candidate(policy, float(echo) if echo is not None else float("nan"), batch_size, 1, float("nan"),
                  max_echo if policy == "greedy" else None)
    p = pipeline(c, loader, step, prefetch)
    seqs = np.random.SeedSequence([seed, 18, batch_size]).spawn(seeds)
    return float(np.median([1.0 / simulate(p, n, seed=s).summary()["throughput"] for s in seqs]))


# ---- what the runs measured

def measured(arrays: dict, target: float, pilot: int) -> dict:
    """T, the wall-clock to target (s) and the time per fresh batch after the pilot (s) of one run."""
    t = rules.at_target(arrays, target)
    tt = np.asarray(arrays["train_time"], dtype=float)
    N = tt.size - 1
    after = (tt[N] - tt[pilot]) / (N - pilot) if N > pilot else math.nan
    return {"T": t["T"], "seconds": t["seconds"], "interval_after_pilot": float(after)}


def relative_error(predicted: float, actual: float) -> float:
    """predicted / actual - 1 (NaN where either is missing or actual is not positive)."""
    if predicted is None or actual is None or not (math.isfinite(predicted) and math.isfinite(actual)) \
            or actual <= 0:
        return math.nan
    return predicted / actual - 1.0


def check_runs(runs, profiles: dict, target: float, batch_size: int, *, pilot: int = DEFAULT_PILOT,
               max_echo: int = 64, **sim) -> list[dict]:
    """One row per run of a planned policy: measured T and wall-clock to target, the
    predictions from the pilot's records and from the block's profile, their errors.

    `runs` is a list of (record, arrays, Records) as the run directory holds them;
    `profiles` maps a block to its profile dict."""
    rows = []
    for record, arrays, recs in runs:
        label = record["label"]
        if label not in PLANNED:
            continue
        m = measured(arrays, target, pilot)
        head = recs.head(pilot)
        per_rec = predicted_interval(timing_from_records([head], batch_size), label, batch_size,
                                     max_echo=max_echo, **sim)
        prof = profiles.get(record["block"])
        per_prof = math.nan if prof is None else predicted_interval(
            timing_from_profile(prof, batch_size), label, batch_size, max_echo=max_echo, **sim)
        T = m["T"]
        wall_rec = math.nan if T is None else T * per_rec
        wall_prof = math.nan if T is None else T * per_prof
        rows.append({"label": label, "seed": record["seed"], "block": record["block"], "T": T,
                     "measured_s": m["seconds"], "pilot_s_per_batch": per_rec, "profile_s_per_batch": per_prof,
                     "planned_s": wall_rec, "profiled_s": wall_prof,
                     "error_records": relative_error(wall_rec, m["seconds"]),
                     "error_profile": relative_error(wall_prof, m["seconds"]),
                     "measured_s_per_batch_after_pilot": m["interval_after_pilot"],
                     "error_after_pilot": relative_error(per_rec, m["interval_after_pilot"]),
                     "error_profile_after_pilot": relative_error(per_prof, m["interval_after_pilot"])})
    return rows


ERRORS = ("error_records", "error_profile", "error_after_pilot", "error_profile_after_pilot")


def error_summary(rows: list[dict]) -> list[dict]:
    """Per policy (in PLANNED's order) and overall: median and max |error| of each error column."""
    out = []
    groups = [(lab, [r for r in rows if r["label"] == lab]) for lab in PLANNED] + [("all", list(rows))]
    for lab, rs in groups:
        if not rs:
            continue
        row = {"label": lab, "runs": len(rs)}
        for k in ERRORS:
            a = np.abs([r[k] for r in rs], dtype=float)
            a = a[np.isfinite(a)]
            row[f"{k}_median"] = float(np.median(a)) if a.size else math.nan
            row[f"{k}_max"] = float(np.max(a)) if a.size else math.nan
        out.append(row)
    return out


def _pct(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:.0f}%"


def _pct_signed(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{100 * x:+.0f}%"


def _s(x, spec=".2f") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def format_tables(rows: list[dict], summary: list[dict], pilot: int) -> str:
    """The summary table (per policy and overall) and every run (Markdown)."""
    lines = [(f"| policy | runs | wall-clock to target, from the pilot's records ({pilot} fresh batches): median "
             "\\|error\\| | max | from the profiles alone: median | max | time per fresh batch after the pilot, "
             "from its records: median | max | from the profiles: median | max |"),
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(f"| {s['label']} | {s['runs']} | " + " | ".join(
            _pct(s[f"{k}_{q}"]) for k in ERRORS for q in ("median", "max")) + " |")
    lines += ["", ("| policy | seed | T | measured s to T | planned from records s (error) | from profiles s (error) "
              "| ms per fresh batch: pilot's plan / profile's plan / measured after the pilot |"),
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['seed']} | {r['T'] if r['T'] is not None else 'not reached'} | "
            f"{_s(r['measured_s'])} | {_s(r['planned_s'])} ({_pct_signed(r['error_records'])}) | "
            f"{_s(r['profiled_s'])} ({_pct_signed(r['error_profile'])}) | "
            f"{_s(1e3 * r['pilot_s_per_batch'], '.0f')} / {_s(1e3 * r['profile_s_per_batch'], '.0f')} / "
            f"{_s(1e3 * r['measured_s_per_batch_after_pilot'], '.0f')} |")
    return "\n".join(lines)


def load_dir(out: Path):
    """(job, runs as (record, arrays, Records), profiles by block) of a run directory."""
    from echosim.loop.records import load_records

    job = json.loads((out / "job.json").read_text(encoding="utf-8"))
    runs = []
    for record, arrays in rules.load_runs(out):
        path = out / f"{record['name']}.records.npz"
        if record["label"] in PLANNED and path.exists():
            runs.append((record, arrays, load_records(path)))
    profiles = {}
    for p in sorted(out.glob("profile-block*.json")):
        prof = json.loads(p.read_text(encoding="utf-8"))
        profiles[prof["block"]] = prof
    return job, runs, profiles


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", help="a run directory of torch_job/run.py (--out)")
    ap.add_argument("--pilot", type=int, default=DEFAULT_PILOT,
                    help=f"fresh batches of each run taken as its pilot (default {DEFAULT_PILOT})")
    ap.add_argument("--target", type=float, default=None, help="validation-loss target (default: the job's)")
    ap.add_argument("--json", default=None, help="write the rows and the summary to this JSON file")
    a = ap.parse_args(argv)
    out = Path(a.runs)
    if not (out / "job.json").exists():
        ap.error(f"runs: no job.json in {out} (expected the --out directory of torch_job/run.py)")
    if a.pilot < 2:
        ap.error(f"--pilot: expected an integer >= 2 (fresh batches), got {a.pilot}")
    if a.target is not None and not a.target > 0:
        ap.error(f"--target: expected a positive loss, got {a.target}")
    job, runs, profiles = load_dir(out)
    if not runs:
        ap.error(f"runs: no run of {', '.join(PLANNED)} with its records in {out}")
    cfg = job["config"]
    target = a.target if a.target is not None else job["target"]
    rows = check_runs(runs, profiles, target, cfg["batch_size"], pilot=a.pilot, max_echo=cfg["max_echo"])
    summary = error_summary(rows)
    with rules.harness.Session("torch_job/plan_check", None, argv) as session:
        print(f"Target: validation loss <= {target:g} (reached and kept); pilot: the first {a.pilot} fresh batches "
              f"of each run; {len(rows)} runs.\n")
        print(format_tables(rows, summary, a.pilot))
        if a.json:  # the rows and the summary, with the session's environment and load
            rules.write_json(a.json, {**session.document(), "target": target, "pilot": a.pilot, "rows": rows,
                                      "summary": summary})
    return 0


if __name__ == "__main__":
    sys.exit(main())
