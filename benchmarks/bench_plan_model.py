"""Accuracy of the planner's T(K) models against simulation (run on demand; CI runs only --smoke).

    python benchmarks/bench_plan_model.py                    # simulate, then score (12 min on a busy 2-core machine)
    python benchmarks/bench_plan_model.py --quick            # 3 B x 4 K per problem
    python benchmarks/bench_plan_model.py --table t.csv      # keep the simulated table
    python benchmarks/bench_plan_model.py --from-table t.csv # score a kept table again
    python benchmarks/bench_plan_model.py --smoke            # least squares, 3 B x 2 K, 1 seed: checks it runs

For each problem (least squares and logistic on synthetic data with condition number
100, L2-regularised logistic regression on the breast-cancer data), each batch size B in 4 … 16384 and echo factor K in 1 … 64, the
fresh batches to target T(K, B) are simulated with the learning rate tuned per (B, K)
(`tuned_batches` below, through the planner's sweep helpers: median over seeds, target: trailing mean of
the last `window` losses <= (1 + rtol) F*). Each model of `echosim.planner.response` is
fitted to the K = 1 column only, as a user without echoing would measure it, either
from every B ("all B") or from two batch sizes ("2 B": B = 64 and 1024), and predicts
every (K > 1, B). Reported: median and 90th-percentile relative error of T(K, B) and of
the wall-clock speedup T(1, B)/T(K, B) (the time per fresh batch is the same for the
prediction and the simulation, so it cancels in the relative error).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness

harness.one_thread()

import numpy as np

PROBLEMS = {
    "least_squares": "least_squares",
    "logistic": "logistic",
    # real data: standardized features, an L2 weight that keeps the minimiser finite
    "breast_cancer": {"kind": "dataset", "name": "breast_cancer", "l2": 0.01},
}
BATCH_SIZES = (4, 16, 64, 256, 1024, 4096, 16384)
ECHOES = (1, 2, 4, 8, 16, 32, 64)
PAIR = (64, 1024)


def tuned_batches(problem, batch_sizes, echoes, *, repetitions: int = 2, rtol: float = 0.01, window: int = 10,
                  seed: int = 0, workers: int = 2, lr_decades: float = 3.0, per_decade: int = 4,
                  max_budget: int = 64_000, slack: float = 1.5, rule: str = "first"):
    """Fresh batches to target T(K, B), learning rate tuned per (B, K), no pipeline.

    Stage 1 runs K = 1 at every B, doubling the budget of fresh batches until the
    tuned lr reaches the target on a majority of seeds (or `max_budget`); stage 2 runs
    every K with ``slack`` × the baseline's T (+ the trailing window) as budget.
    Returns a pandas DataFrame: problem, B, K, lr, lr_edge, T (median over seeds;
    inf if never), n_converged, n_seeds, budget.
    """
    import pandas as pd

    from echosim.planner.simulated import (
        initial_budget,
        lr_grid_for,
        problem_config,
        run_config,
        validate_problem,
    )

    pconf = problem_config(problem)
    problem_obj = validate_problem(pconf)
    lr = lr_grid_for(problem_obj, lr_decades, per_decade)
    settings = {"name": "plan-response", "seed": seed, "repetitions": repetitions, "rtol": rtol,
                "window": window, "iterate": "last", "tune_by": "batches", "rule": rule}
    budgets = {int(B): initial_budget(int(B)) for B in batch_sizes}
    T1: dict = {}
    todo = sorted(budgets)
    while todo:
        data = {"problem": pconf, "optimizer": {"lr": lr, "echo": 1},
                "sweep": dict(settings), "joint": {"optimizer.batch_size, sweep.n_batches":
                                                    [[B, budgets[B]] for B in todo]}}
        _, rep = run_config(data, workers)
        nxt = []
        for _, r in rep.tuned.iterrows():
            B = int(r["optimizer.batch_size"])
            if r["n_converged"] * 2 > r["n_seeds"] and math.isfinite(r["conv_batches"]):
                T1[B] = float(r["conv_batches"])
            elif budgets[B] * 2 <= max_budget:
                budgets[B] *= 2
                nxt.append(B)
            else:
                T1[B] = math.inf
        todo = nxt
    rows = []
    reach = [B for B in sorted(T1) if math.isfinite(T1[B])]
    if reach:
        joint = [[B, int(math.ceil(slack * T1[B])) + window + 5] for B in reach]
        data = {"problem": pconf, "optimizer": {"lr": lr, "echo": [int(k) for k in echoes]},
                "sweep": dict(settings), "joint": {"optimizer.batch_size, sweep.n_batches": joint}}
        _, rep = run_config(data, workers)
        for _, r in rep.tuned.iterrows():
            rows.append({"B": int(r["optimizer.batch_size"]), "K": int(r["optimizer.echo"]),
                         "lr": float(r["optimizer.lr"]), "lr_edge": r["lr_edge"],
                         "T": float(r["conv_batches"]), "n_converged": int(r["n_converged"]),
                         "n_seeds": int(r["n_seeds"]), "budget": int(r["sweep.n_batches"])})
    for B in sorted(T1):
        if not math.isfinite(T1[B]):
            for K in echoes:
                rows.append({"B": B, "K": int(K), "lr": math.nan, "lr_edge": "", "T": math.inf,
                             "n_converged": 0, "n_seeds": repetitions, "budget": budgets[B]})
    df = pd.DataFrame(rows).sort_values(["B", "K"]).reset_index(drop=True)
    df.insert(0, "problem", problem if isinstance(problem, str) else str(pconf.get("kind")))
    return df


def simulate(args):
    import pandas as pd

    frames = []
    for name in args.problems:
        t = time.perf_counter()
        df = tuned_batches(PROBLEMS[name], args.batch_sizes, args.echoes, repetitions=args.seeds, rtol=args.rtol,
                           window=args.window, workers=args.workers, lr_decades=4.0, per_decade=3,
                           max_budget=args.max_budget, rule=args.rule)
        df["problem"] = name
        print(f"simulated {name}: {len(df)} settings in {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        frames.append(df)
        if args.table:  # keep what is done so far
            pd.concat(frames, ignore_index=True).to_csv(args.table, index=False)
    return pd.concat(frames, ignore_index=True)


def score(df, fit_sizes=None, echoed_K=None):
    """Errors of T(K, B) and of the speedup T(1, B)/T(K, B), and the band's coverage, over the
    cells with K > 1: the model fitted on the K = 1 column (every B, or `fit_sizes`) and, with
    `echoed_K`, the echoed measurement (B, echoed_K) at the B being predicted."""
    from echosim.planner.response import fit_response

    errT, errS, inside = [], [], []
    for p, g in df.groupby("problem", sort=False):
        base = g[(g.K == 1) & np.isfinite(g["T"])]
        if fit_sizes is not None:
            base = base[base.B.isin(fit_sizes)]
        if base.B.nunique() < 2:
            continue
        k1 = {int(b): float(t) for b, t in zip(base.B, base["T"])}
        shared = fit_response(k1) if echoed_K is None else None
        for B, gb in g.groupby("B"):
            t1 = gb[gb.K == 1]["T"].iloc[0]
            fit = shared
            if echoed_K is not None:
                e = gb[(gb.K == echoed_K) & np.isfinite(gb["T"])]
                if e.empty:
                    continue
                fit = fit_response({**k1, (int(B), echoed_K): float(e["T"].iloc[0]) * echoed_K})
            for _, r in gb[(gb.K > 1) & (gb.K != (echoed_K or 0))].iterrows():
                if not (math.isfinite(r["T"]) and math.isfinite(t1)):
                    continue
                pred = fit.predict(r.K, B)
                lo, hi = np.quantile(fit.predict_draws(r.K, B), [0.1, 0.9])
                errT.append(abs(pred - r["T"]) / r["T"])
                inside.append(lo <= r["T"] <= hi)
                s_sim = t1 / r["T"]
                s_pred = fit.predict(1, B) / pred
                errS.append(abs(s_pred - s_sim) / s_sim)
    return np.array(errT), np.array(errS), np.array(inside)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--max-budget", type=int, default=16000, help="fresh batches at most for K = 1")
    ap.add_argument("--batch-sizes", nargs="+", type=int, default=list(BATCH_SIZES))
    ap.add_argument("--echoes", nargs="+", type=int, default=list(ECHOES))
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=0.002)
    ap.add_argument("--window", type=int, default=3)
    ap.add_argument("--rule", default="first", choices=("first", "stable"),
                    help="when a run has reached the target: first entry of the trailing mean, or stays below")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true",
                    help="B in 16, 256, 4096 and K in 1, 4, 16, 64 only (about a fifth of the work)")
    ap.add_argument("--table", help="write the simulated table to this CSV")
    ap.add_argument("--from-table", help="score this CSV instead of simulating")
    harness.add_options(ap, smoke="least squares, B in 16, 64, 1024, K in 1, 2, one seed, budget 300, 1 worker")
    args = ap.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.echoes = [16, 256, 4096], [1, 4, 16, 64]
    if args.smoke:
        args.problems, args.batch_sizes, args.echoes = ["least_squares"], [16, 64, 1024], [1, 2]
        args.seeds, args.max_budget, args.workers = 1, 300, 1
    with harness.Session("bench_plan_model", args, argv) as session:
        session.results = run(args)
    return 0


def run(args) -> dict:
    """Simulate (or read) the table, score the models, print; returns the scores and the table."""
    import pandas as pd

    t0 = time.perf_counter()
    if args.from_table:
        df = pd.read_csv(args.from_table)
    else:
        df = simulate(args)
    print(f"## T(K) model accuracy ({len(df)} simulated settings, {time.perf_counter() - t0:.0f} s)\n")
    print(f"problems: {', '.join(df.problem.unique())}; B: {sorted(int(b) for b in df.B.unique())}; K: {sorted(int(k) for k in df.K.unique())}; "
          f"target rtol={args.rtol:g}, window={args.window}; lr tuned per (B, K); {args.seeds} seeds\n")
    print("| measured | n | T(K,B) median err | T(K,B) 90th pct | speedup median err | speedup 90th pct | "
          "10-90% band holds the truth |")
    print("|---|---|---|---|---|---|---|")
    sizes_run = sorted(int(b) for b in df.B.unique())
    pair = PAIR if all(b in sizes_run for b in PAIR) else tuple(sizes_run[:2])
    scores = []
    for label, sizes, ek in (("K = 1 at every B", None, None), (f"K = 1 at B = {pair[0]}, {pair[1]}", pair, None),
                             (f"K = 1 at B = {pair[0]}, {pair[1]} + (B, 4)", pair, 4)):
        eT, eS, inside = score(df, sizes, ek)
        if eT.size:
            scores.append({"measured": label, "n": int(eT.size), "T_median_err": float(np.median(eT)),
                           "T_p90_err": float(np.quantile(eT, 0.9)), "speedup_median_err": float(np.median(eS)),
                           "speedup_p90_err": float(np.quantile(eS, 0.9)), "band_coverage": float(inside.mean())})
            print(f"| {label} | {eT.size} | {np.median(eT):.0%} | {np.quantile(eT, 0.9):.0%} | "
                  f"{np.median(eS):.0%} | {np.quantile(eS, 0.9):.0%} | {inside.mean():.0%} |")
    edge = df[df.lr_edge.fillna("") != ""]
    print(f"\n{len(edge)} of {len(df)} settings have their tuned lr at the edge of the grid; "
          f"{int((~np.isfinite(df['T'])).sum())} never reached the target within the budget.")
    print("\nsimulated T(K, B) (fresh batches to target):\n")
    piv = df.pivot_table(index=["problem", "B"], columns="K", values="T", aggfunc="first")
    print(piv.to_string())
    return {"scores": scores, "settings": len(df), "lr_at_edge": len(edge),
            "never": int((~np.isfinite(df["T"])).sum()), "table": df.to_dict(orient="records")}


if __name__ == "__main__":
    sys.exit(main())
