"""A real PyTorch job through `echosim.echoing`: fresh batches and wall-clock to a validation-loss target.

    pip install torch --index-url https://download.pytorch.org/whl/cpu   # the CPU build
    pip install -e .[torch]                           # pillow, scikit-learn
    python benchmarks/torch_job/run.py                # 6 policies x 3 seeds; 19 min on 2 cores at load 6-9
    python benchmarks/torch_job/run.py --quick        # a smoke run, about 1-2 min
    python benchmarks/torch_job/run.py --summarize torch-job-out --target 0.25   # re-read, another target
    python benchmarks/torch_job/run.py --smoke        # K = 1 and 2, seed 0, 4 fresh batches, into temp dirs

The job: sklearn's digits upscaled to 32x32 and stored once as JPEG files; a DataLoader
worker process opens, decodes and augments each image with Pillow (random rotation,
scale and shift); 1,438 training images in batches of 128 (11 fresh batches per epoch:
multi-epoch training), 359 validation images decoded once; an MLP 1024-256-10 trained
with plain SGD at one learning rate for every policy (0.2: K = 1's best, lr_scan.py); one
torch thread. Target: validation loss <= 0.15, reached and kept to the end of the budget.

Per block (one seed): the loader profiled alone (`echosim.profile`) and the step alone,
then every policy (rotated order) for the same budget of fresh batches. Each run's
parameters are copied after every fresh batch (the training clock pauses for the copy)
and evaluated on the validation set after the run. Everything lands in --out (per run a
JSON, an NPZ and echoing's Records; one JSON per profile; summary.json and summary.md);
the summary table is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rules

harness = rules.harness

DEFAULT_OUT = "torch-job-out"
DEFAULT_TARGET = 0.15


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--cache", default=None, help="JPEG cache directory (default ~/.cache/echosim/torch_job)")
    ap.add_argument("--policies", default=",".join(map(str, rules.DEFAULT_POLICIES)),
                    help="comma-separated: integers K and any policy echoing accepts (default 1,2,4,8,greedy,auto)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    ap.add_argument("--budget", type=int, default=None, help="fresh batches per run (default 250; --quick 60)")
    ap.add_argument("--target", type=float, default=DEFAULT_TARGET,
                    help=f"validation-loss target L* (default {DEFAULT_TARGET})")
    ap.add_argument("--batch-size", type=int, default=None, help="B (default 128)")
    ap.add_argument("--lr", type=float, default=None, help="SGD learning rate, every policy (default 0.2)")
    ap.add_argument("--hidden", type=int, default=None, help="MLP hidden width (default 256)")
    ap.add_argument("--max-echo", type=int, default=None, help="echoing's cap under greedy (default 64)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: seed 0 only, 60 fresh batches")
    ap.add_argument("--summarize", metavar="DIR", default=None,
                    help="only read the runs in DIR and print the summary (no torch needed)")
    harness.add_options(ap, smoke="K = 1 and 2, seed 0, 4 fresh batches, profiles of 4; --out and --cache in temp dirs if not given")
    a = ap.parse_args(argv)
    if a.smoke:
        a.quick, a.policies, a.budget = True, "1,2", a.budget or 4
    try:
        a.policies = [rules.parse_policy(p) for p in a.policies.split(",")]
    except ValueError as exc:
        ap.error(f"--policies: {exc}")
    try:
        a.seeds = [int(s) for s in a.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds: expected comma-separated integers, got {a.seeds!r}")
    try:
        rules.interleaved_order(a.policies, a.seeds)
    except ValueError as exc:
        ap.error(str(exc))
    if a.quick:
        a.seeds = a.seeds[:1]
        a.budget = a.budget or 60
    for name in ("budget", "batch_size", "hidden", "max_echo"):
        v = getattr(a, name)
        if v is not None and v < 1:
            ap.error(f"--{name.replace('_', '-')}: expected an integer >= 1, got {v}")
    if a.lr is not None and not a.lr > 0:
        ap.error(f"--lr: expected a positive number, got {a.lr}")
    if not a.target > 0:
        ap.error(f"--target: expected a positive loss, got {a.target}")
    if a.summarize is None:
        import echosim

        for p in a.policies:  # echoing's own check, before any work
            try:
                echosim.echoing([], p).close()
            except ValueError as exc:
                ap.error(f"--policies: {exc}")
    elif not list(Path(a.summarize).glob("*-seed*.json")):
        ap.error(f"--summarize: no runs in {a.summarize}")
    return a


def summarize(out: Path, target: float) -> str:
    """Read every run and profile in `out`; the per-policy table and the per-run table (Markdown)."""
    runs = rules.load_runs(out)
    profiles = {}
    for p in sorted(out.glob("profile-block*.json")):
        import json

        prof = json.loads(p.read_text(encoding="utf-8"))
        profiles[prof["block"]] = prof
    budget = runs[0][0]["fresh_batches"]
    per_run = rules.per_run_rows(runs, target, profiles)
    table = rules.summary_rows(per_run)
    rules.write_json(out / "summary.json", {"target": target, "budget": budget, "policies": table, "runs": per_run})
    text = (rules.format_summary(table, target, budget) + "\n\nEvery run, in the order run:\n\n"
            + rules.format_runs(per_run) + "\n")
    (out / "summary.md").write_text(text, encoding="utf-8")
    return text


def main(argv=None) -> int:
    a = _args(argv)
    if a.summarize:
        print(summarize(Path(a.summarize), a.target))
        return 0
    import tempfile

    with harness.Session("torch_job/run", a, argv) as session, tempfile.TemporaryDirectory(prefix="torch-job-") as tmp:
        if a.smoke:
            a.out = a.out if a.out != DEFAULT_OUT else str(Path(tmp) / "out")
            a.cache = a.cache or str(Path(tmp) / "cache")
        session.results = run(a)
    return 0


def run(a) -> dict:
    """Every block and run; prints progress and the summary; returns the summary's rows."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from dataclasses import asdict, replace

    import job
    import numpy as np

    cfg = job.JobConfig()
    over = {k: v for k, v in (("budget", a.budget), ("batch_size", a.batch_size), ("lr", a.lr),
                              ("hidden", a.hidden), ("max_echo", a.max_echo)) if v is not None}
    cfg = replace(cfg, **over)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    root = job.build_cache(a.cache or job.default_cache(), cfg.image_size, cfg.jpeg_quality)
    val = job.validation_tensors(root, cfg)
    order = rules.interleaved_order(a.policies, a.seeds)
    t_start, load_start = time.perf_counter(), harness.load()
    print(f"## torch job: {len(a.policies)} policies x {len(a.seeds)} seeds, budget {cfg.budget} fresh batches, "
          f"B={cfg.batch_size}, lr={cfg.lr}, target {a.target:g}", flush=True)
    rules.write_json(out / "job.json", {"config": asdict(cfg), "target": a.target, "policies": a.policies,
                                        "seeds": a.seeds, "order": order, "versions": job.versions(),
                                        "loadavg_start": list(load_start)})
    for block, seed in enumerate(a.seeds):
        l0 = harness.load()
        prof = job.profile_block(seed, cfg, root, **({"loader_batches": 4, "steps": 4} if a.smoke else {}))
        prof.update(block=block, loadavg_start=list(l0), loadavg_end=list(harness.load()))
        rules.write_json(out / f"profile-block{block}.json", prof)
        print(f"block {block} (seed {seed}): profiled alone: loader {1e3 * prof['loader_mean']:.1f} ms/batch, "
              f"step {1e3 * prof['step_mean']:.2f} ms; load {l0[0]:.2f}", flush=True)
        for position, (s, policy) in enumerate(p for p in order if p[0] == seed):
            record, arrays, records = job.train(policy, seed, cfg, root, val, block=block, position=position)
            rules.save_run(out, record, arrays)
            records.save(out / f"{record['name']}.records.npz")
            t = rules.at_target(arrays, a.target)
            print(f"  {record['label']:>7} seed {seed}: T {t['T']}, first entry {t['T_first']}, "
                  f"{record['steps']} steps, mean K {np.mean(arrays['echo']):.2f}, "
                  f"final loss {arrays['val_loss'][-1]:.3f}, {record['elapsed_seconds']:.1f} s; "
                  f"load {record['loadavg_start'][0]:.2f}-{record['loadavg_end'][0]:.2f}", flush=True)
    print(f"\nwall-clock {time.perf_counter() - t_start:.0f} s\n", flush=True)
    print(summarize(out, a.target))
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"out": str(out), "target": a.target, "policies": summary["policies"], "runs": summary["runs"]}


if __name__ == "__main__":
    sys.exit(main())
