"""The validation suite of ``echoing(policy="auto")`` (issue 26): wall-clock to target in
real loops through ``echosim.echoing``, auto against sync, K = 2, 4, 8 and greedy (run on
demand; CI runs only --smoke).

    python benchmarks/bench_auto_suite.py --out suite.json                 # every case: 5 seeds (torch 3)
    python benchmarks/bench_auto_suite.py --quick --out quick.json         # a smoke run: 1 seed, tiny budgets
    python benchmarks/bench_auto_suite.py --cases numpy,scripted --seeds 3 # groups or names, comma-separated
    python benchmarks/bench_auto_suite.py --signals --out signals.json     # report lagged losses and probes
    python benchmarks/bench_auto_suite.py --scan --cases mlp-digits --lrs 0.1,0.2,0.5,1,2   # K = 1 lr scan
    python benchmarks/bench_auto_suite.py --smoke                          # 2 cases, sync and auto, no sleeps

The cases (B, lr, R, target, budget and the measured time of one run are in the table below):

1. bench_auto.py's least-squares cases (``ls-pays``, ``ls-plateau``, ``ls-moves``) and
2. its logistic cases (``logistic-pays``, ``logistic-plateau``, ``logistic-moves``): its
   problems, lrs, targets (excess risk), budgets and timing (16 ms loader, 2 ms step, R = 8),
   imported from it, not copied.
3. ``mlp-digits``: a non-convex model on a real table: an MLP 64-32-10 (tanh) in plain
   NumPy, plain SGD, on scikit-learn's digits (shipped with it; no download); target a
   validation cross-entropy.
4. ``torch-digits-momentum`` and 5. ``torch-shapes-adam``: small CNNs in PyTorch on images
   stored as PNG (digits upscaled to 20x20) and JPEG (procedurally drawn shapes over
   textures), decoded and augmented by Pillow in a DataLoader worker process, multi-epoch;
   ``SGD(momentum=0.9)`` and ``Adam``; target a validation cross-entropy
   (`auto_suite/torch_cases.py`). Skipped, with a note, without torch.
6. scripted streams (`auto_suite/scripted.py`): the model is a scalar progress state; an
   echoed step is worth a fixed fraction of a fresh one; ``stream-pays-lowsnr``,
   ``stream-plateau``, ``stream-hurts``, ``stream-ar1``.

Measured (3 seeds, 2 shared cores at load 1-7, 2026-12-02): the whole suite 35 min at 3
seeds, so about 45 min at the default 5 (torch 3); ``--quick`` about 2 min. One run:

    case                   model / data / optimizer                          B     lr     R  target          budget  one run (s)
    ls-pays                bench_auto's least squares, plain SGD             1024  0.2    8  excess 5e-3      200    3.3 (K=8 3.8)
    ls-plateau             same                                              32    0.3    8  excess 0.019     300    4.9 (K=8 5.2)
    ls-moves               same                                              1024  0.2    8  excess 1e-3      300    4.9 (K=8 5.2)
    logistic-pays          bench_auto's logistic table, plain SGD            2048  1.0    8  excess 7e-3      200    3.3 (K=8 3.5)
    logistic-plateau       same                                              32    1.0    8  excess 0.034     250    4.1 (K=8 4.3)
    logistic-moves         same                                              1024  1.0    8  excess 3e-3      300    4.9 (K=8 5.2)
    mlp-digits             MLP 64-32-10 NumPy, digits table, plain SGD       32    0.7    8  val loss 0.15    400    6.5 (K=8 7.0)
    torch-digits-momentum  CNN, digits 20x20 PNG, SGD(momentum=0.9)         32    0.02   6  val loss 0.15    320    20-26
    torch-shapes-adam      CNN, shapes 20x20 JPEG, Adam                      32    0.004  6  val loss 0.6     320    24-32
    stream-pays-lowsnr     scripted, echo worth 0.5, noise 2x window         -     -      8  L 0.2            240    3.9-4.3
    stream-plateau         scripted, flat for 80 batches, echo worth 0.5     -     -      8  L 0.4            260    4.3-4.8
    stream-hurts           scripted, echo worth -0.25                        -     -      8  L 0.2            240    3.9-4.4
    stream-ar1             scripted, echo worth 0.5, AR(1) noise phi 0.9     -     -      8  L 0.2            240    3.9-4.3

(R = loader time / step time as set: 16 ms / 2 ms, torch 48 ms / 8 ms; the loader times
measured in the loop are in each table. A run always takes the whole budget; its time to
target is read off the checkpoints. Sync reaches every target within the budget.)

Every case is a real loop through ``echosim.echoing``, written apart from echosim's
optimizers and runner. The loader sleeps (a generator for NumPy and scripted cases, the
Dataset's ``__getitem__`` for torch) so that the loader/step ratio R is the case's; a step
sleeps until ``t_step`` has passed since it began (the NumPy or torch work runs inside).
After each fresh batch the weights are copied inside ``with it.paused():``; for the
sleeping generators the loader's clock is frozen meanwhile (`auto_suite.loop.Gate`); a
DataLoader worker cannot be frozen, so that pause is only a copy of the parameters (well
under a millisecond). The copies are evaluated after the run, outside the timed region.
The same seed gives every policy the same fresh batches (common random numbers); for
seed number j every policy runs once, the list rotated by j.

Target rule (bench_auto.py's): the training clock at the first fresh batch from which the
metric, smoothed by a centred geometric mean over 9 fresh batches (not for the scripted
streams, whose checkpoints are noise-free), stays at or below the target to the end of the
budget. Checks (issue 26): auto within 15% of the best fixed policy (best of sync, 2, 4, 8,
greedy) on the medians in every case, and within 5% of sync where echoing does not pay
(sync / best <= 1.05); on the scripted streams where echoing pays throughout, no cap
decrease in >= 90% of auto's runs; where it hurts, auto's cap at 1 within 3 windows of 8
fresh batches.

``--signals`` reports what an echoed step is worth (the planned API: ``it.report(loss,
lagged_loss=..., probe=...)``, ``it.probe_due``; torch through
``echosim.loop.torch.EchoMeter`` where it exists, else a hand-written lagged forward pass);
without that API the runs are plain and the tables say "signals unavailable".
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

harness.one_thread()

import numpy as np
from auto_suite import report
from auto_suite.loop import POLICIES, policy_label, rotated, run_task
from auto_suite.numpy_cases import MLPTask, bench_auto_tasks
from auto_suite.scripted import scripted_tasks

TORCH_CASES = ("torch-digits-momentum", "torch-shapes-adam")


def all_tasks(cache=None) -> dict:
    tasks = bench_auto_tasks() + [MLPTask()] + scripted_tasks()
    try:
        from auto_suite.torch_cases import torch_tasks
    except ImportError as exc:  # torch or Pillow missing
        tasks_torch, why = [], f"{exc}"
    else:
        tasks_torch, why = torch_tasks(cache), None
    out = {t.name: t for t in tasks[:7] + tasks_torch + tasks[7:]}
    return out, why


GROUPS = {"numpy": lambda t: t.kind == "numpy", "torch": lambda t: t.kind == "torch",
          "scripted": lambda t: t.kind == "scripted", "all": lambda t: True}


def select(names: str, tasks: dict, torch_missing: str | None):
    out, unknown = [], []
    for n in (x.strip() for x in names.split(",")):
        if not n:
            continue
        if n in GROUPS:
            out += [t for t in tasks if GROUPS[n](tasks[t])]
        elif n in tasks:
            out.append(n)
        elif n in TORCH_CASES and torch_missing:
            print(f"- skipped {n}: torch is not available ({torch_missing})", flush=True)
        else:
            unknown.append(n)
    return list(dict.fromkeys(out)), unknown


def run_one(task, policy, seed, batches, args, auto):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if task.kind == "torch":
            run = task.run(policy, seed, scale=args.time_scale, signals=args.signals, auto=auto)
        else:
            run = run_task(task, policy, seed, batches, scale=args.time_scale, signals=args.signals, auto=auto)
    return run


def run_case(task, policies, seeds, args, auto) -> tuple[dict, list]:
    load0, t0 = harness.load()[0], time.perf_counter()
    runs = []
    for j, seed in enumerate(seeds):
        batches = None if task.kind == "torch" else task.batches(seed, task.budget + 1)
        for policy in rotated(policies, j):
            run = run_one(task, policy, seed, batches, args, auto)
            s = report.score(task, run)
            row = {"case": task.name, "policy": run.policy, "seed": seed, "times": run.times, "echo": run.echo,
                   "cap": run.cap, "decisions": run.decisions, "loadavg": run.loadavg, "load_ms": run.load_ms,
                   "step_ms": run.step_ms, "wall_s": run.wall_s, "signals": run.signals, **s}
            runs.append(row)
            print(f"  {task.name} seed {seed} {run.policy:>6}: to target {report.fmt(s['time'])} s "
                  f"(batch {s['T']}), mean K {np.mean(run.echo):.2f}, final {s['final']:.4g}, "
                  f"{run.wall_s:.1f} s", file=sys.stderr, flush=True)
    res = report.case_result(task, runs, seeds, (load0, harness.load()[0]), time.perf_counter() - t0)
    return res, runs


def scan(task, lrs, seeds, args) -> str:
    """K = 1 (sync) without sleeps at each lr: fresh batches to target and the final metric."""
    L = [f"### lr scan at K = 1, no sleeps: {task.title} (`{task.name}`), target {task.target:g}\n",
         "| lr | fresh batches to target (per seed) | final metric (per seed) |", "|---:|---|---|"]
    for lr in lrs:
        t = copy.copy(task)
        t.lr = lr
        Ts, finals = [], []
        for seed in seeds:
            batches = None if t.kind == "torch" else t.batches(seed, t.budget + 1)
            run = run_one(t, "sync", seed, batches, args, None)
            s = report.score(t, run)
            Ts.append(s["T"])
            finals.append(s["final"])
        L.append(f"| {lr:g} | {', '.join(report.fmt(x, 0) for x in Ts)} | {', '.join(f'{x:.4g}' for x in finals)} |")
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="all",
                    help="comma-separated case names or groups (numpy, torch, scripted, all; default all)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per case (default 5; torch cases 3)")
    ap.add_argument("--policies", default=",".join(map(str, POLICIES)),
                    help="comma-separated, from sync, 2, 4, 8, greedy, auto (default all)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 1 seed, budgets a quarter (at least 24 fresh batches), sleeps halved")
    ap.add_argument("--time-scale", type=float, default=None,
                    help="multiply every loader and step time (default 1; --quick 0.5; 0: no sleeps)")
    ap.add_argument("--budget", type=int, default=None, help="fresh batches per run, every case (default: the case's)")
    ap.add_argument("--target", type=float, default=None, help="the target, every case selected (default: the case's)")
    ap.add_argument("--signals", action="store_true", help="report lagged losses and probes (the planned API)")
    ap.add_argument("--auto-window", type=int, default=None, help="policy auto's window (default: echoing's)")
    ap.add_argument("--cache", default=None, help="image cache of the torch cases (default ~/.cache/echosim/auto_suite)")
    ap.add_argument("--scan", action="store_true", help="only an lr scan at K = 1 without sleeps (--lrs)")
    ap.add_argument("--lrs", default=None, help="the learning rates of --scan, comma-separated")
    ap.add_argument("--out", default=None, help="write every case's results and runs to this JSON file "
                    "(after every case, so an interrupted suite keeps the cases it finished)")
    harness.add_options(ap, smoke="ls-pays and stream-hurts, sync and auto, 12 fresh batches, no sleeps")
    args = ap.parse_args(argv)
    if args.smoke:
        args.cases, args.policies, args.budget, args.time_scale = "ls-pays,stream-hurts", "sync,auto", 12, 0.0
        args.seeds = 1
    tasks, torch_missing = all_tasks(args.cache)
    names, unknown = select(args.cases, tasks, torch_missing)
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)}; expected names from {', '.join(tasks)} or groups "
                 f"{', '.join(GROUPS)}")
    allowed = {str(p): p for p in POLICIES}
    policies = [allowed.get(p.strip()) for p in args.policies.split(",") if p.strip()]
    if not policies or None in policies or len(set(map(str, policies))) != len(policies):
        ap.error(f"--policies: expected distinct names from {', '.join(allowed)}, got {args.policies!r}")
    if args.seeds is not None and args.seeds < 1:
        ap.error(f"--seeds: expected an integer >= 1, got {args.seeds}")
    if args.budget is not None and args.budget < 2:
        ap.error(f"--budget: expected an integer >= 2, got {args.budget}")
    if args.time_scale is None:
        args.time_scale = 0.5 if args.quick else 1.0
    if args.time_scale < 0:
        ap.error(f"--time-scale: expected a number >= 0, got {args.time_scale}")
    auto = None if args.auto_window is None else {"window": args.auto_window}
    if args.scan and not args.lrs:
        ap.error("--scan needs --lrs")

    with harness.Session("bench_auto_suite", args, argv) as session:
        session.results = run(args, argv, tasks, names, policies, auto, torch_missing)
    return 0


def run(args, argv, tasks, names, policies, auto, torch_missing) -> dict:
    """Every case selected; prints the tables, writes --out after every case; returns the results."""
    print("## policy='auto' against fixed echo policies: the validation suite (issue 26)\n")
    if args.quick:
        print("- quick: a smoke run (1 seed, budgets a quarter of the cases'): most targets are out of reach, "
              "so the checks below mean nothing")
    print(f"- sleeps x {args.time_scale:g}; signals {'requested' if args.signals else 'off'}"
          + (f"; auto {auto}" if auto else "") + "\n", flush=True)
    t_all, load_start = time.perf_counter(), harness.load()
    results, every = [], []

    def write_out():  # after every case: an interrupted suite keeps the cases it finished
        doc = {"command": ["benchmarks/bench_auto_suite.py", *(sys.argv[1:] if argv is None else argv)],
               "environment": harness.environment(), "loadavg": [list(load_start), harness.load()],
               "time_scale": args.time_scale, "policies": [policy_label(p) for p in policies],
               "complete": len(results) == len(names), "results": results, "runs": every,
               "torch_missing": torch_missing}
        harness.write_json(args.out, doc)

    for name in names:
        task = tasks[name]
        if args.quick or args.budget or args.target:
            task = copy.copy(task)
            task.budget = args.budget or (max(24, task.budget // 4) if args.quick else task.budget)
            task.target = args.target or task.target
        n_seeds = 1 if args.quick else args.seeds or (3 if task.kind == "torch" else 5)
        seeds = list(range(n_seeds))
        if args.scan:
            print(scan(task, [float(x) for x in args.lrs.split(",")], seeds, args), flush=True)
            continue
        res, runs = run_case(task, policies, seeds, args, auto)
        print(report.case_markdown(res), flush=True)
        results.append(res)
        every.extend(runs)
        if args.out:
            write_out()
    if results:
        print("## Summary\n")
        print(report.summary_markdown(results))
    return {"time_scale": args.time_scale, "policies": [policy_label(p) for p in policies], "results": results,
            "runs": every, "torch_missing": torch_missing, "seconds": time.perf_counter() - t_all}


if __name__ == "__main__":
    sys.exit(main())
