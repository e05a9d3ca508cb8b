"""The measured guarantee of ``echoing(policy="auto")`` (issue 19): wall-clock to target in a
real training loop, auto against sync, fixed K and greedy (run on demand; CI runs only --smoke).

    python benchmarks/bench_auto.py                     # cases 1-4, 5 seeds: about 20 min on 2 shared cores
    python benchmarks/bench_auto.py --quick             # a smoke run: 1 seed, half the sleeps, about 2 min
    python benchmarks/bench_auto.py --cases ls-pays,logistic-moves --seeds 3
    python benchmarks/bench_auto.py --calibrate         # no sleeps, no echoing: the regimes, per fixed K
    python benchmarks/bench_auto.py --cpu               # auto's CPU cost per step against greedy
    python benchmarks/bench_auto.py --torch             # case 5: the PyTorch job (benchmarks/torch_job), 3 seeds
    python benchmarks/bench_auto.py --smoke             # case 1, sync and auto, 30 fresh batches, sleeps / 10

The loop is written here, apart from echosim's optimizers and runner. Fresh batch t of a
NumPy problem comes from ``default_rng([seed, t])``, drawn before the clock starts and
shared by every policy at that seed (common random numbers); a loader (a generator)
hands them out, sleeping ``t_load`` before each (the slow pipeline: waiting, not the
training process's CPU, which drawing 10^5 normals per batch in the loader thread would
take from the step on a loaded machine); a step computes the minibatch loss and gradient
at the current iterate, updates it (plain SGD at the user's learning rate), sleeps until
``t_step`` has passed since the step began (the accelerator's fixed time per step,
inside which the NumPy work runs: on a loaded machine that work alone varies
severalfold, and a sleep added after it would let the machine's load set the loader/step
ratio R) and reports the loss computed before the update (``it.report(loss)``, what a
forward pass gives). After the last step on each fresh batch the iterate is copied with
the training clock paused (``with it.paused():``); the exact population excess risk of
every copy is evaluated after the run (least squares: in closed form; logistic: on the
whole table the batches are drawn from, which is the population).

Target rule, the same for every policy and case: the wall-clock (training clock) at the
first fresh batch from which a centred geometric mean of the excess risk over 9 fresh
batches (4 on each side, fewer at the ends) stays at or below the target until the end
of the budget. The smoothing is there because near a plateau one seed's risk crosses
the target back and forth; being centred it adds no lag while the log-risk falls
linearly. The same rule on the raw curve is reported beside it.

Policies: sync, fixed K = 2, 4, 8, greedy and auto, every one for the same budget of
fresh batches; for seed number j every policy once, the list rotated by j. Reported per
case: each policy's median wall-clock to target and the value per seed, the ratio
auto / best of (sync, fixed 2, 4, 8, greedy), auto's caps over time and its decisions,
the load average at the start and end. The guarantee checked: auto within 10% of the best.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness
from reference_solvers import newton_logistic

harness.one_thread()

import numpy as np

POLICIES = ("sync", 2, 4, 8, "greedy", "auto")
HALF_WINDOW = 4                       # the centred smoothing: 2 * 4 + 1 = 9 fresh batches


# ---- the problems (NumPy only; nothing from echosim)

class LeastSquares:
    """y = x·w* + σε, x ~ N(0, diag(i^-decay)); excess risk ½(w − w*)ᵀΣ(w − w*) in closed form."""

    def __init__(self, dim: int = 10, decay: float = 1.0, noise: float = 0.5, w_norm: float = 1.0):
        self.dim, self.decay, self.noise, self.w_norm = dim, decay, noise, w_norm
        self.lam = np.arange(1, dim + 1, dtype=float) ** -decay
        self.w_star = np.full(dim, w_norm / math.sqrt(dim))
        self.w0 = np.zeros(dim)

    def describe(self) -> str:
        return (f"least squares, d = {self.dim}, Σ = diag(i^-{self.decay:g}) (λ {self.lam[-1]:.2g}..1), "
                f"σ = {self.noise:g}, ‖w*‖ = {self.w_norm:g} (equal entries), w0 = 0")

    def batch(self, rng, B: int):
        X = rng.standard_normal((B, self.dim)) * np.sqrt(self.lam)
        return X, X @ self.w_star + self.noise * rng.standard_normal(B)

    def loss_grad(self, w, X, y):
        r = X @ w - y
        return 0.5 * float(r @ r) / len(y), X.T @ r / len(y)

    def excess(self, W):
        D = np.asarray(W) - self.w_star
        return 0.5 * (D * D) @ self.lam


class LogisticTable:
    """L2-regularised logistic regression on a fixed synthetic table of n rows, which is the
    population: batches are drawn from it with replacement, and the excess risk
    F(w) − F(w*) is evaluated on all of it (w* by Newton's method)."""

    def __init__(self, n: int = 50_000, dim: int = 10, decay: float = 1.0, w_norm: float = 3.0,
                 l2: float = 1e-3, seed: int = 20_190):
        from scipy.special import expit

        self.n, self.dim, self.decay, self.w_norm, self.l2 = n, dim, decay, w_norm, l2
        self._expit = expit
        lam = np.arange(1, dim + 1, dtype=float) ** -decay
        rng = np.random.default_rng(seed)
        self.X = rng.standard_normal((n, dim)) * np.sqrt(lam)
        w_true = np.full(dim, w_norm / math.sqrt(dim))
        self.y = np.where(rng.random(n) < expit(self.X @ w_true), 1.0, -1.0)
        self.w0 = np.zeros(dim)
        w, _, self.grad_at_star = newton_logistic(self.X, (self.y + 1.0) / 2.0, l2)  # labels ±1 -> {0, 1}
        self.w_star = w
        self.F_star = float(self.risk(w[None, :])[0])

    def describe(self) -> str:
        return (f"L2-logistic regression on a fixed table (the population): n = {self.n}, d = {self.dim}, "
                f"x ~ N(0, diag(i^-{self.decay:g})), labels from a logistic model with ‖w‖ = {self.w_norm:g}, "
                f"λ = {self.l2:g}; F* = {self.F_star:.4f}, ‖w*‖ = {np.linalg.norm(self.w_star):.2f}, w0 = 0")

    def batch(self, rng, B: int):
        idx = rng.integers(0, self.n, B)
        return self.X[idx], self.y[idx]

    def loss_grad(self, w, X, y):
        z = y * (X @ w)
        loss = float(np.mean(np.logaddexp(0.0, -z))) + 0.5 * self.l2 * float(w @ w)
        return loss, -(X.T @ (y * self._expit(-z))) / len(y) + self.l2 * w

    def risk(self, W):
        W = np.atleast_2d(W)
        out = np.empty(len(W))
        for i in range(0, len(W), 64):  # blocks of 64 iterates: 64 x n margins at a time
            Z = (W[i:i + 64] @ self.X.T) * self.y
            out[i:i + 64] = np.logaddexp(0.0, -Z).mean(axis=1) + 0.5 * self.l2 * np.sum(W[i:i + 64] ** 2, axis=1)
        return out

    def excess(self, W):
        return self.risk(W) - self.F_star


# ---- the cases

@dataclass(frozen=True)
class Case:
    name: str
    title: str
    problem: str            # "ls" or "logistic"
    problem_args: dict
    B: int
    lr: float
    target: float
    budget: int             # fresh batches per run
    t_load: float = 0.016   # seconds per fresh batch (the loader)
    t_step: float = 0.002   # seconds of "accelerator" per step
    max_echo: int = 64
    claim: str = ""

    def make_problem(self):
        key = (self.problem, tuple(sorted(self.problem_args.items())))
        if key not in _PROBLEMS:  # cases share a problem (the logistic table takes a second to build)
            _PROBLEMS[key] = (LeastSquares if self.problem == "ls" else LogisticTable)(**self.problem_args)
        return _PROBLEMS[key]


_PROBLEMS: dict = {}


LS = {"dim": 100, "decay": 0.5, "w_norm": 5.0}
LOGISTIC = {"dim": 100, "decay": 0.5, "w_norm": 5.0}
CASES = {c.name: c for c in (
    Case("ls-pays", "1. least squares, echoing pays", "ls", LS, B=1024, lr=0.2, target=5e-3, budget=200,
         claim="echoed steps are worth nearly fresh ones up to K = 8 and the plateau of K = 8 lies well "
         "below the target, so greedy should reach it about 5x sooner than sync"),
    Case("ls-plateau", "2. least squares, echoing never reaches the target", "ls", LS, B=32, lr=0.3,
         target=0.019, budget=300, claim="K = 1 reaches the target; the plateau of every K >= 2 lies above it"),
    Case("ls-moves", "3. least squares, from echoing pays to its plateau", "ls", LS, B=1024, lr=0.2,
         target=1e-3, budget=300, claim="echoing pays early; the target lies between the K = 1 and the "
         "greedy plateau"),
    Case("logistic-pays", "4a. logistic, echoing pays", "logistic", LOGISTIC, B=2048, lr=1.0, target=7e-3,
         budget=200, claim="as case 1"),
    Case("logistic-plateau", "4b. logistic, echoing never reaches the target", "logistic", LOGISTIC, B=32,
         lr=1.0, target=0.034, budget=250, claim="as case 2"),
    Case("logistic-moves", "4c. logistic, from echoing pays to its plateau", "logistic", LOGISTIC, B=1024,
         lr=1.0, target=3e-3, budget=300, claim="as case 3"),
)}


# ---- the loop

def draw_batches(problem, B: int, seed: int, n: int) -> list:
    """Fresh batches 0..n-1 of a run: batch t from ``default_rng([seed, t])``, drawn before
    the clock starts (so the loader spends no CPU in the timed loop) and shared by every
    policy at this seed (common random numbers)."""
    return [problem.batch(np.random.default_rng([seed, t]), B) for t in range(n)]


class SleepyLoader:
    """Yields `batches` in order, each after `t_load` seconds of sleep: a slow pipeline
    whose time is waiting (I/O, remote workers), not the training process's CPU."""

    def __init__(self, batches: list, t_load: float):
        self.batches, self.t_load = batches, t_load

    def __iter__(self):
        for batch in self.batches:
            time.sleep(self.t_load)
            yield batch


def policy_label(policy) -> str:
    return f"K={policy}" if isinstance(policy, int) else policy


def train(case: Case, problem, policy, seed: int, batches: list, scale: float = 1.0,
          auto: dict | None = None) -> dict:
    """One run: `case.budget` fresh batches through ``echosim.echoing(loader, policy)``.

    Returns the training clock and the iterate after every fresh batch (index 0: before
    training), the steps per batch, the caps and, for auto, its decisions."""
    import echosim

    lr, budget = case.lr, case.budget
    t_step = case.t_step * scale
    loader = SleepyLoader(batches[:budget + 1], case.t_load * scale)
    it = echosim.echoing(loader, policy, max_echo=case.max_echo, auto=auto if policy == "auto" else None)
    w = problem.w0.copy()
    iterates = np.empty((budget + 1, len(w)))
    iterates[0] = w
    times = np.zeros(budget + 1)
    paused = 0.0
    fresh = -1           # index of the fresh batch being stepped on
    current = None
    last_end = 0.0
    load0 = harness.load()[0]
    t0 = time.perf_counter()
    for batch in it:
        if batch is not current:  # a fresh batch: the previous one is done
            if fresh >= 0:
                with it.paused():
                    p = time.perf_counter()
                    iterates[fresh + 1] = w
                    times[fresh + 1] = last_end
                    paused += time.perf_counter() - p
            fresh += 1
            current = batch
            if fresh == budget:
                break
        s0 = time.perf_counter()
        X, y = batch
        loss, g = problem.loss_grad(w, X, y)
        w -= lr * g
        rest = t_step - (time.perf_counter() - s0)
        if rest > 0:
            time.sleep(rest)
        it.report(loss)
        last_end = time.perf_counter() - t0 - paused
    it.close()
    rec = it.records()
    summary = it.summary()
    out = {"policy": policy_label(policy), "seed": seed, "times": times, "iterates": iterates,
           "echo": np.asarray(rec.steps_per_batch[:budget]), "cap": np.asarray(rec.cap[:budget]),
           "steps": int(np.sum(rec.steps_per_batch[:budget])), "elapsed": float(times[-1]),
           "load_ms": 1e3 * float(np.mean(rec.load_time[:budget])),
           "step_ms_median": 1e3 * float(np.nanmedian(rec.step_time)),
           "step_ms_mean": 1e3 * float(np.nanmean(rec.step_time)),
           "loadavg": [load0, harness.load()[0]]}
    if policy == "auto":
        out["decisions"] = [dict(d) for d in rec.decisions]
        out["auto_summary"] = summary.get("auto")
    return out


# ---- the target rule

def smoothed(risk, half: int = HALF_WINDOW):
    """Centred geometric mean over 2·half + 1 fresh batches (fewer at the ends)."""
    lr = np.log(np.maximum(np.asarray(risk, dtype=float), 1e-300))
    c = np.concatenate([[0.0], np.cumsum(lr)])
    n = len(lr)
    lo = np.maximum(np.arange(n) - half, 0)
    hi = np.minimum(np.arange(n) + half + 1, n)
    return np.exp((c[hi] - c[lo]) / (hi - lo))


def reaches_and_stays(values, target: float):
    """The first index from which every value is <= target to the end; None if the last is above.

    >>> reaches_and_stays([2.0, 0.9, 1.1, 0.8, 0.7], 1.0), reaches_and_stays([2.0, 0.9, 1.1], 1.0)
    (3, None)
    """
    above = ~(np.asarray(values, dtype=float) <= target)
    if not len(above) or above[-1]:
        return None
    idx = np.flatnonzero(above)
    return int(idx[-1] + 1) if len(idx) else 0


def score(run: dict, problem, target: float) -> dict:
    risk = problem.excess(run["iterates"])
    n_s = reaches_and_stays(smoothed(risk), target)
    n_r = reaches_and_stays(risk, target)
    tail = risk[-max(10, len(risk) // 5):]
    return {"risk": risk, "T": n_s, "time": None if n_s is None else float(run["times"][n_s]),
            "T_raw": n_r, "time_raw": None if n_r is None else float(run["times"][n_r]),
            "tail_risk": float(np.exp(np.mean(np.log(np.maximum(tail, 1e-300)))))}


# ---- reporting

def _median(xs):
    """Median with None as +inf (a run that never reached the target); None if it is inf."""
    v = np.median([math.inf if x is None else x for x in xs])
    return None if not math.isfinite(v) else float(v)


def _fmt_s(x, digits=2):
    return "never" if x is None else f"{x:.{digits}f}"


def _cap_runs(caps) -> str:
    """Per-batch caps as runs: '64 x 32, 1 x 16, 2 x 8, ...'."""
    out, prev, n = [], None, 0
    for c in list(caps) + [None]:
        if c == prev:
            n += 1
            continue
        if prev is not None:
            out.append(f"{prev}×{n}")
        prev, n = c, 1
    return ", ".join(out)


def _decisions_line(decisions, limit: int = 14) -> str:
    parts = []
    for d in decisions[:limit]:
        a = d["action"]
        if a == "probe":
            parts.append(f"{d['batch']}: probe {d['cap']}")
        elif a in ("switch", "step down"):
            why = f" ({d['why']})" if "why" in d else ""
            parts.append(f"{d['batch']}: {a} {d.get('previous')}→{d['cap']}{why}")
        elif a == "keep":
            parts.append(f"{d['batch']}: keep {d['cap']} (probe {d.get('probe')}: "
                         f"{'z={:.1f}'.format(d['z']) if 'z' in d else d.get('why', '')})")
        else:
            parts.append(f"{d['batch']}: {a}")
    if len(decisions) > limit:
        parts.append(f"… ({len(decisions) - limit} more)")
    return "; ".join(parts) if parts else "none (stayed greedy)"


def case_report(case: Case, problem, runs: list[dict], seeds, load: tuple, seconds: float) -> tuple[str, dict]:
    lines = [f"### {case.title} (`{case.name}`)\n",
             (f"{problem.describe()}; B = {case.B}, lr = {case.lr:g}, target excess risk {case.target:g}, "
             f"budget {case.budget} fresh batches; loader {1e3 * case.t_load:g} ms per batch, step "
             f"{1e3 * case.t_step:g} ms (the NumPy step runs inside it); max_echo {case.max_echo}. "
             f"Claimed regime: {case.claim}.\n"),
             f"Load average {load[0]:.2f} at the start, {load[1]:.2f} at the end; {seconds:.0f} s.\n"]
    by = {}
    for r in runs:
        by.setdefault(r["policy"], []).append(r)
    labels = [policy_label(p) for p in POLICIES if policy_label(p) in by]
    med = {p: _median([r["time"] for r in by[p]]) for p in labels}
    med_raw = {p: _median([r["time_raw"] for r in by[p]]) for p in labels}
    peers = [p for p in labels if p != "auto" and med[p] is not None]
    best = min(peers, key=lambda p: med[p]) if peers else None
    head = "| policy | median s to target | per seed (s) | fresh batches to target (median) | mean K | " \
           "tail risk | raw rule: median s |"
    lines += [head, "|---|---:|---|---:|---:|---:|---:|"]
    for p in labels:
        rs = sorted(by[p], key=lambda r: r["seed"])
        per = ", ".join(_fmt_s(r["time"]) for r in rs)
        Tm = _median([r["T"] for r in rs])
        mk = np.mean([r["steps"] / case.budget for r in rs])
        tail = float(np.exp(np.mean([np.log(r["tail_risk"]) for r in rs])))
        mark = " (best)" if p == best else ""
        lines.append(f"| {p}{mark} | {_fmt_s(med[p])} | {per} | {_fmt_s(Tm, 0)} | {mk:.2f} | {tail:.2g} | "
                     f"{_fmt_s(med_raw[p])} |")
    ratio = None
    if "auto" in med and best is not None:
        ratio = math.inf if med["auto"] is None else med["auto"] / med[best]
        verdict = "within 10%" if ratio <= 1.10 else "MISSED (more than 10% slower)"
        others = [f"{p} / best = {_fmt_s(None if med[p] is None else med[p] / med[best])}"
                  for p in ("sync", "greedy") if p in med and p != best]
        lines.append(f"\nauto / best ({best}) = **{ratio:.2f}** ({verdict})" + "".join(f"; {o}" for o in others) + ".")
        lines.append("\nauto's caps per fresh batch (runs: cap×batches) and decisions (fresh batch: action), "
                     "per seed:\n")
        for r in sorted(by["auto"], key=lambda r: r["seed"]):
            lines.append(f"- seed {r['seed']}: to target {_fmt_s(r['time'])} s (fresh batch {r['T']}); caps "
                         f"{_cap_runs(r['cap'])}; {_decisions_line(r.get('decisions', []))}")
    timing = {p: [np.mean([r[k] for r in by[p]]) for k in ("load_ms", "step_ms_median", "step_ms_mean")]
              for p in labels}
    lines.append("\nmeasured in the loop (mean over seeds): loader ms per batch / step ms, median and mean: "
                 + ", ".join(f"{p} {a:.1f} / {b:.2f}, {c:.2f}" for p, (a, b, c) in timing.items()))
    result = {"case": case.name, "median_s": med, "median_s_raw": med_raw, "best": best, "ratio": ratio,
              "loadavg": list(load), "seconds": seconds}
    return "\n".join(lines) + "\n", result


# ---- calibration: the regimes without sleeps or echoing

def calibrate(case: Case, problem, seeds, echoes=(1, 2, 4, 8, 16)) -> str:
    """Fresh batches to target per fixed K (K steps on every batch), the same rule, no clock."""
    lines = [f"### {case.title} (`{case.name}`): fresh batches to target per fixed K, no sleeps\n",
             "| K | fresh batches to target (median; per seed) | tail risk (geometric mean over seeds) |",
             "|---:|---|---:|"]
    budget = case.budget
    for K in echoes:
        Ts, tails = [], []
        for seed in seeds:
            w = problem.w0.copy()
            its = np.empty((budget + 1, len(w)))
            its[0] = w
            for t in range(budget):
                X, y = problem.batch(np.random.default_rng([seed, t]), case.B)
                for _ in range(K):
                    w -= case.lr * problem.loss_grad(w, X, y)[1]
                its[t + 1] = w
            s = score({"iterates": its, "times": np.arange(budget + 1.0)}, problem, case.target)
            Ts.append(s["T"])
            tails.append(s["tail_risk"])
        med = _median(Ts)
        lines.append(f"| {K} | {_fmt_s(med, 0)}; {', '.join(_fmt_s(t, 0) for t in Ts)} | "
                     f"{float(np.exp(np.mean(np.log(tails)))):.2g} |")
    return "\n".join(lines) + "\n"


# ---- the PyTorch job (case 5)

def torch_case(args, seeds) -> str:
    """Case 5: the PyTorch job of benchmarks/torch_job (its loop, its validation-loss
    target and reach-and-stay rule, its records) under K = 1, 2, 4, 8, greedy and auto,
    run here (or read back from ``--torch-from``); reported as the other cases are."""
    from pathlib import Path

    from echosim.loop.records import load_records

    sys.path.insert(0, os.path.abspath(args.torch_job))
    import rules  # benchmarks/torch_job/rules.py (torch-free)

    out = Path(args.torch_from or args.torch_out)
    if not args.torch_from:
        import run as torch_run  # benchmarks/torch_job/run.py (needs torch)

        torch_run.main(["--out", str(out), "--policies", "1,2,4,8,greedy,auto",
                        "--seeds", ",".join(map(str, seeds))] + (["--quick"] if args.quick else []))
    job = json.loads((out / "job.json").read_text(encoding="utf-8"))
    target = job["target"]
    by: dict = {}
    for record, arrays in rules.load_runs(out):
        t = rules.at_target(arrays, target)
        decisions = ()
        rec_path = out / f"{record['name']}.records.npz"
        if record["label"] == "auto" and rec_path.exists():
            decisions = load_records(rec_path).decisions
        by.setdefault(record["label"], []).append(
            {"seed": record["seed"], "time": t["seconds"], "T": t["T"], "cap": arrays["cap"],
             "mean_K": float(np.mean(arrays["echo"])), "decisions": list(decisions)})
    cfg = job["config"]
    lines = [(f"The job ({', '.join(f'{k} {v}' for k, v in cfg.items())}); target validation loss {target:g} (reached and kept to the end of the budget, "
             f"the job's own rule on the raw curve); seeds {job['seeds']}; load average at its start "
             f"{job['loadavg_start'][0]:.2f}.\n"),
             "| policy | median s to target | per seed (s) | fresh batches to target (median) | mean K |",
             "|---|---:|---|---:|---:|"]
    med = {p: _median([r["time"] for r in rs]) for p, rs in by.items()}
    peers = [p for p in by if p != "auto" and med[p] is not None]
    best = min(peers, key=lambda p: med[p]) if peers else None
    for p, rs in by.items():
        rs = sorted(rs, key=lambda r: r["seed"])
        lines.append(f"| {p}{' (best)' if p == best else ''} | {_fmt_s(med[p])} | "
                     f"{', '.join(_fmt_s(r['time']) for r in rs)} | {_fmt_s(_median([r['T'] for r in rs]), 0)} | "
                     f"{np.mean([r['mean_K'] for r in rs]):.2f} |")
    if "auto" in by and best is not None:
        ratio = math.inf if med["auto"] is None else med["auto"] / med[best]
        verdict = "within 10%" if ratio <= 1.10 else "MISSED (more than 10% slower)"
        lines.append(f"\nauto / best ({best}) = **{ratio:.2f}** ({verdict}).\n")
        for r in sorted(by["auto"], key=lambda r: r["seed"]):
            lines.append(f"- seed {r['seed']}: to target {_fmt_s(r['time'])} s (fresh batch {r['T']}); caps "
                         f"{_cap_runs(r['cap'])}; {_decisions_line(r['decisions'])}")
    return "\n".join(lines) + "\n"


# ---- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per case (default 5; the PyTorch job 3)")
    ap.add_argument("--policies", default=",".join(map(str, POLICIES)),
                    help="comma-separated, from sync, 2, 4, 8, greedy, auto (default all)")
    ap.add_argument("--quick", action="store_true", help="1 seed, loader and step times halved")
    ap.add_argument("--auto-window", type=int, default=None, metavar="N",
                    help="policy auto's window (fresh batches per block; default: echoing's)")
    ap.add_argument("--calibrate", action="store_true", help="only the regimes: fixed K, no sleeps, no echoing")
    ap.add_argument("--cpu", action="store_true", help="only auto's CPU cost per step")
    ap.add_argument("--torch", action="store_true", help="only case 5, the PyTorch job (needs .[torch])")
    ap.add_argument("--torch-out", default="torch-job-auto-out", help="output directory of case 5")
    ap.add_argument("--torch-from", default=None, metavar="DIR", help="case 5: only read the runs in DIR")
    ap.add_argument("--torch-job", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_job"),
                    metavar="DIR", help="the PyTorch job's directory (default: torch_job beside this file)")
    harness.add_options(ap, smoke="case 1 only, sync and auto, 30 fresh batches, sleeps / 10")
    args = ap.parse_args(argv)  # --json: the environment, the load and every run (curves, caps, decisions)
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES]
    if unknown:
        ap.error(f"--cases: unknown {', '.join(unknown)}; expected names from {', '.join(CASES)}")
    allowed = {str(p): p for p in POLICIES}
    policies = [allowed.get(p.strip()) for p in args.policies.split(",") if p.strip()]
    if not policies or None in policies or len(set(map(str, policies))) != len(policies):
        ap.error(f"--policies: expected distinct names from {', '.join(allowed)}, got {args.policies!r}")
    args.torch = args.torch or args.torch_from is not None
    if args.seeds is not None and args.seeds < 1:
        ap.error(f"--seeds: expected an integer >= 1, got {args.seeds}")
    auto_options = None if args.auto_window is None else {"window": args.auto_window}
    if auto_options is not None:
        from echosim.control import AutoEcho

        try:
            AutoEcho(**auto_options)
        except ValueError as exc:
            ap.error(f"--auto-window: {exc}")
    n_seeds = 1 if args.quick or args.smoke else args.seeds or (3 if args.torch else 5)
    seeds = list(range(n_seeds))
    scale = 0.1 if args.smoke else 0.5 if args.quick else 1.0
    if args.smoke:
        names, policies = names[:1], ["sync", "auto"]
    with harness.Session("bench_auto", args, argv) as session:
        print("## policy='auto' against fixed echo policies in a real loop\n")
        if auto_options is not None:
            print(f"- policy auto's options: {auto_options}\n")
        session.results = run(args, names, policies, seeds, scale, auto_options)
    return 0


def run(args, names, policies, seeds, scale, auto_options) -> dict:
    """The mode asked for; prints its report, returns what the session writes."""
    if args.cpu:
        print("## auto's CPU cost per step\n")
        from bench_auto_cost import cpu_cost

        text = cpu_cost(2, 20) if args.smoke else cpu_cost()
        print(text)
        return {"cpu": text}
    if args.torch:
        text = torch_case(args, seeds)
        print("## 5. the PyTorch job (`torch`)\n")
        print(text)
        return {"torch": text}
    if args.calibrate:
        out = {}
        for name in names:
            case = CASES[name]
            out[name] = calibrate(case, case.make_problem(), seeds)
            print(out[name])
        return {"calibrate": out}
    results, every = [], []
    for name in names:
        case = CASES[name]
        if args.smoke:
            case = dataclasses.replace(case, budget=30)
        problem = case.make_problem()
        load0, t0 = harness.load()[0], time.perf_counter()
        runs = []
        for j, seed in enumerate(seeds):
            order = policies[j % len(policies):] + policies[:j % len(policies)]
            batches = draw_batches(problem, case.B, seed, case.budget + 1)
            for policy in order:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    run = train(case, problem, policy, seed, batches, scale, auto_options)
                run.update(score(run, problem, case.target))
                runs.append(run)
                print(f"  {name} seed {seed} {run['policy']:>6}: to target {_fmt_s(run['time'])} s "
                      f"(batch {run['T']}), mean K {run['steps'] / case.budget:.2f}", file=sys.stderr, flush=True)
        text, res = case_report(case, problem, runs, seeds, (load0, harness.load()[0]), time.perf_counter() - t0)
        print(text, flush=True)
        results.append(res)
        every.extend({"case": name, **{k: v for k, v in r.items() if k != "iterates"}} for r in runs)
    print("## Summary\n")
    print("| case | best fixed policy | its median s | auto median s | auto / best |")
    print("|---|---|---:|---:|---:|")
    for r in results:
        b = r["best"]
        print(f"| {r['case']} | {b} | {_fmt_s(r['median_s'].get(b))} | {_fmt_s(r['median_s'].get('auto'))} | "
              f"{'n/a' if r['ratio'] is None else format(r['ratio'], '.2f')} |")
    return {"results": results, "runs": every}


if __name__ == "__main__":
    sys.exit(main())
