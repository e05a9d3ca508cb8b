"""How the torch job's learning rate and target were chosen: K = 1 (and optionally fixed K > 1) on a 2x grid.

    python benchmarks/torch_job/lr_scan.py                      # K = 1, lr 0.05..0.8, 3 seeds; about 3-5 min
    python benchmarks/torch_job/lr_scan.py --echo 1,8 --lrs 0.1,0.2
    python benchmarks/torch_job/lr_scan.py --smoke     # lr 0.2, K = 1, seed 0, 4 fresh batches, a temp cache

The job's own fresh batches (the same DataLoader and worker, the same seeds) are drawn
once per seed and kept; each learning rate then trains on them with a fixed K, no
echoing thread and no clock: for fixed K the trajectory depends only on the batches,
so these are the job's fixed-K validation curves. Printed per (lr, K): median over
seeds of T (reaches and stays <= each target), the first entry, the final loss, and
how often the loss went back above the target after first reaching it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import rules

harness = rules.harness


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lrs", default="0.05,0.1,0.2,0.4,0.8")
    ap.add_argument("--echo", default="1", help="fixed K values, comma-separated (default 1)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--targets", default="0.1,0.15,0.2")
    ap.add_argument("--budget", type=int, default=250)
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=None, help="also write the curves here (NPZ: val_loss per lr, K, seed)")
    harness.add_options(ap, smoke="lr 0.2, K = 1, seed 0, 4 fresh batches, target 1.0; the JPEG cache in a temp dir")
    a = ap.parse_args(argv)
    if a.smoke:
        a.lrs, a.echo, a.seeds, a.targets, a.budget = "0.2", "1", "0", "1.0", 4
    try:
        lrs = [float(x) for x in a.lrs.split(",")]
        Ks = [int(x) for x in a.echo.split(",")]
        seeds = [int(x) for x in a.seeds.split(",")]
        targets = [float(x) for x in a.targets.split(",")]
    except ValueError as exc:
        ap.error(str(exc))
    if min(Ks) < 1 or min(lrs) <= 0 or a.budget < 1:
        ap.error("--echo: K >= 1; --lrs: positive; --budget: >= 1")

    with harness.Session("torch_job/lr_scan", a, argv) as session, tempfile.TemporaryDirectory() as tmp:
        if a.smoke and a.cache is None:
            a.cache = str(Path(tmp) / "cache")
        session.results = scan(a, lrs, Ks, seeds, targets)
    return 0


def scan(a, lrs, Ks, seeds, targets) -> dict:
    """Train on the job's batches at every (lr, K, seed); prints the table; returns its rows."""
    import job

    cfg = replace(job.JobConfig(), budget=a.budget)
    root = job.build_cache(a.cache or job.default_cache(), cfg.image_size, cfg.jpeg_quality)
    X, y = job.validation_tensors(root, cfg)
    curves: dict = {}
    for seed in seeds:
        loader = job.make_loader(root, seed, cfg)
        batches = []
        try:
            for b in job.Epochs(loader):
                batches.append(b)
                if len(batches) == cfg.budget:
                    break
        finally:
            job.shutdown(loader)
        for lr in lrs:
            for K in Ks:
                c = replace(cfg, lr=lr)
                model = job.make_model(seed, c)
                step = job.make_step(model, c)
                vl = [job.evaluate(model, X, y)[0]]
                for b in batches:
                    for _ in range(K):
                        step(b)
                    vl.append(job.evaluate(model, X, y)[0])
                curves[(lr, K, seed)] = np.asarray(vl)
        print(f"seed {seed} done", file=sys.stderr, flush=True)

    if a.out:
        np.savez(a.out, **{f"lr{lr:g}_K{K}_seed{s}": v for (lr, K, s), v in curves.items()})
    print(f"## K = {Ks}, lr on {lrs}, seeds {seeds}, {cfg.budget} fresh batches of B = {cfg.batch_size}\n")
    head = "| lr | K | " + " | ".join(f"T({L:g}) | first({L:g}) | back above({L:g})" for L in targets) \
        + " | final loss |"
    print(head)
    print("|" + "|".join(" ---: " for _ in range(head.count("|") - 1)) + "|")
    rows = []
    for lr in lrs:
        for K in Ks:
            cells = []
            for L in targets:
                Ts = [rules.reaches_and_stays(curves[(lr, K, s)], L) for s in seeds]
                Fs = [rules.first_entry(curves[(lr, K, s)], L) for s in seeds]
                back = [int(np.sum(curves[(lr, K, s)][f:] > L)) if f is not None else None for s, f in zip(seeds, Fs)]
                med, med_first = rules.median_reached(Ts), rules.median_reached(Fs)
                per_seed = ", ".join("-" if t is None else str(t) for t in Ts)
                cells += [f"{'-' if med is None else f'{med:.0f}'} ({per_seed})",
                          "-" if med_first is None else f"{med_first:.0f}",
                          ", ".join("-" if b is None else str(b) for b in back)]
            final = np.median([curves[(lr, K, s)][-1] for s in seeds])
            rows.append({"lr": lr, "K": K, "cells": cells, "final_loss": final})
            print(f"| {lr:g} | {K} | " + " | ".join(cells) + f" | {final:.3f} |")
    return {"budget": cfg.budget, "targets": targets, "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
