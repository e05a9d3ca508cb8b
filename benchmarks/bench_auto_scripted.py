"""Policy "auto" on scripted streams: how often it makes a wrong move over a job, where it
ends, and what share of the job it spends at each cap, per signal and noise model.

    python benchmarks/bench_auto_scripted.py              # 200 jobs per row, about a minute
    python benchmarks/bench_auto_scripted.py --jobs 40
    python benchmarks/bench_auto_scripted.py --smoke      # 2 jobs of 100 fresh batches per row

The streams are tests/control/streams.py's (a fake clock: one second per fresh batch; the
loss falls by gain(K) of what is left per batch). A wrong move is a step down where
every larger cap is faster ("pays") or a step up where every larger cap is slower
("hurts"); the controller claims P(any wrong move in a job) <= alpha = 0.1.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

sys.path.insert(0, str(harness.ROOT))
from tests.control.streams import drive, hurts, pays, plateau_then_pays

ROWS = [
    ("pays", "loss", {"noise": 0.005}, "down"),
    ("pays", "loss, noisy", {"noise": 0.02}, "down"),
    ("pays", "loss, relative noise", {"noise": 0.03, "relative": True}, "down"),
    ("pays", "loss, AR(1) 0.9", {"noise": 0.01, "ar": 0.9}, "down"),
    ("pays", "loss, heavy-tailed (t3)", {"noise": 0.005, "heavy": True}, "down"),
    ("pays", "paired", {"noise": 0.05, "paired_noise": 0.002}, "down"),
    ("pays", "probe", {"noise": 0.05, "probe": True}, "down"),
    ("hurts", "loss", {"noise": 0.005}, "up"),
    ("hurts", "loss, AR(1) 0.9", {"noise": 0.005, "ar": 0.9}, "up"),
    ("hurts", "loss, heavy-tailed (t3)", {"noise": 0.005, "heavy": True}, "up"),
    ("hurts", "paired", {"noise": 0.02, "paired_noise": 0.001}, "up"),
    ("plateau, then pays", "loss, relative noise", {"noise": 0.01, "relative": True}, "down"),
    ("plateau, then pays", "paired", {"noise": 0.02, "paired_noise": 0.0005}, "down"),
    ("plateau, then pays", "probe", {"noise": 0.02, "probe": True}, "down"),
]
STREAMS = {"pays": pays(), "hurts": hurts(), "plateau, then pays": plateau_then_pays(until=200)}


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--batches", type=int, default=1200)
    harness.add_options(ap, smoke="2 jobs of 100 fresh batches per row")
    args = ap.parse_args(argv)
    if args.smoke:
        args.jobs, args.batches = 2, 100
    lines = ["| stream | signal | wrong moves (share of jobs) | final cap 1 / 2 / 4 / 8 (share) | mean cap |",
             "|---|---|---|---|---|"]
    with harness.Session("bench_auto_scripted", args, argv) as session:
        rows = []
        for stream, signal, kw, wrong in ROWS:
            bad, finals, means = 0, [], []
            for s in range(args.jobs):
                caps, a = drive(STREAMS[stream], args.batches, seed=s, **kw)
                moves = [d for d in a.decisions if d["action"] in ("switch", "equal") and d["cap"] != d["previous"]]
                bad += any((d["cap"] < d["previous"]) == (wrong == "down") for d in moves)
                finals.append(a.incumbent)
                means.append(caps.mean())
            f = np.bincount(finals, minlength=9)[[1, 2, 4, 8]] / args.jobs
            se = math.sqrt(0.1 * 0.9 / args.jobs)
            rows.append({"stream": stream, "signal": signal, "wrong_share": bad / args.jobs, "three_se": 3 * se,
                         "final_cap_share": dict(zip(("1", "2", "4", "8"), f)), "mean_cap": float(np.mean(means))})
            lines.append(f"| {stream} | {signal} | {bad / args.jobs:.3f} (claim <= 0.1; 3 se = {3 * se:.3f}) | "
                         f"{' / '.join(f'{x:.2f}' for x in f)} | {np.mean(means):.2f} |")
        out = "\n".join(lines)
        print(f"{args.jobs} jobs of {args.batches} fresh batches per row; AutoEcho(max_echo=8), defaults "
              "(window 8, alpha 0.1, min_effect 0.05, start 1)\n")
        print(out)
        session.results = {"jobs": args.jobs, "batches": args.batches, "rows": rows}
    return out


if __name__ == "__main__":
    main()
