"""Every docs figure, from the configs in ``echosim/plots/figure_configs`` (``python -m echosim figures``).

Each figure has a data function (``*_data(cfg)``: plain dicts of arrays, testable) and a
drawing function (``draw_*(data)``: a matplotlib Figure; matplotlib is imported only
there, with the Agg backend). `make_figures` runs them and writes the PNGs.

====================  ====================================================================
figure                what it shows
====================  ====================================================================
convergence_vs_echo   the paper's Figure 2 on real data: convergence time vs K per B, in
                      steps KT and samples BT, with the learning rate tuned per (B, K)
bounds_vs_simulation  simulated excess risk (median, band) against the theory bounds
speedup_vs_R          wall-clock speedup of echoing vs R = t_up/t_down, four loaders with
                      the same mean, next to Choi et al.'s max(t_up, e·t_down) model
greedy_vs_fixed       greedy vs fixed echoing under stochastic arrivals; K_t histogram
predicted_vs_simulated  theory-predicted vs simulated speedup over a (B, K) grid
====================  ====================================================================

Seeds are fixed in the configs, and the same seed gives the same fresh batches for every
K, learning rate and policy (common random numbers). A run that diverges or never
reaches the target is a result (convergence time +inf), drawn as "never", never a NaN.
"""

from __future__ import annotations

import math
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

from echosim.training.problems import BATCHES_PER_BLOCK, Problem

__all__ = [
    "FIGURES",
    "make_figures",
    "load_figure_config",
    "paper_lr_grid",
    "convergence_vs_echo_data",
    "draw_convergence_vs_echo",
    "bounds_vs_simulation_data",
    "draw_bounds_vs_simulation",
    "speedup_vs_R_data",
    "draw_speedup_vs_R",
    "greedy_vs_fixed_data",
    "draw_greedy_vs_fixed",
    "predicted_vs_simulated_data",
    "draw_predicted_vs_simulated",
]

CONFIG_DIR = Path(__file__).with_name("figure_configs")
FIGURES = ("convergence_vs_echo", "bounds_vs_simulation", "speedup_vs_R", "greedy_vs_fixed",
           "predicted_vs_simulated")
DPI = 100


def paper_lr_grid() -> np.ndarray:
    """Agarwal et al.'s learning-rate grid: η_i = 10^(−2 + i/20), i = 0..60 (0.01 … 10)."""
    return 10.0 ** (-2.0 + np.arange(61) / 20.0)


def _log(msg: str) -> None:
    print(f"[figures] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- configs


def _merge(base: dict, over: dict, where: str) -> dict:
    """`base` with the values of `over`; a key of `over` that `base` lacks is an error."""
    out = dict(base)
    for k, v in over.items():
        if k not in base:
            raise ValueError(f"{where}.{k}: unknown key; allowed: {', '.join(sorted(base))}")
        out[k] = _merge(base[k], v, f"{where}.{k}") if isinstance(v, dict) and isinstance(base[k], dict) else v
    return out


def load_figure_config(name: str, quick: bool = False, path=None) -> dict:
    """The config of figure `name` (a TOML file in ``echosim/plots/figure_configs``).

    With ``quick=True`` its ``[quick]`` table overrides the matching keys (tiny
    settings for CI). Keys of ``[quick]`` that the file does not define are errors.
    """
    if name not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}, got {name!r}")
    p = Path(path) if path is not None else CONFIG_DIR / f"{name}.toml"
    with open(p, "rb") as f:
        cfg = tomllib.load(f)
    quick_over = cfg.pop("quick", {})
    if quick:
        cfg = _merge(cfg, quick_over, p.name)
    _check_config(name, cfg, p.name)
    return cfg


_REQUIRED = {
    "convergence_vs_echo": {
        "problem": {"dataset", "l2"},
        "optimizer": {"batch_sizes", "echoes", "max_batches", "max_steps", "max_logged"},
        "tuning": {"coarse_every", "coarse_seeds", "window", "budget_factor"},
        "target": {"seed", "seeds", "rtol", "window", "band"},
    },
    "bounds_vs_simulation": {
        "logistic": {"dim", "radius", "w_star_norm"},
        "quadratic": {"dim", "radius", "noise_std", "w_star_norm"},
        "runs": {"n_batches", "sgd_batch_sizes", "batch_size", "echoes", "log_points", "seed", "seeds", "band"},
    },
    "speedup_vs_R": {
        "problem": {"dim", "decay", "noise_std", "w_star_norm"},
        "optimizer": {"batch_size", "lr", "echoes", "n_batches", "target_fraction"},
        "pipeline": {"R", "workers", "prefetch", "step_time", "pareto_shape", "stall_p"},
        "target": {"seed", "seeds", "band"},
    },
    "greedy_vs_fixed": {
        "problem": {"dim", "decay", "noise_std", "w_star_norm"},
        "optimizer": {"batch_size", "lr", "fixed_echoes", "max_echo", "n_batches", "target_fraction"},
        "pipeline": {"R", "workers", "prefetch", "step_time", "pareto_shape", "stall_p"},
        "target": {"seed", "seeds", "band"},
    },
    "predicted_vs_simulated": {
        "problem": {"dim", "radius", "w_star_norm"},
        "optimizer": {"batch_sizes", "echoes", "eps"},
        "pipeline": {"arrival", "workers", "prefetch", "step_time"},
        "target": {"seed", "seeds", "band"},
    },
}


def _check_config(name: str, cfg: dict, where: str) -> None:
    spec = _REQUIRED[name]
    for section in cfg:
        if section not in spec:
            raise ValueError(f"{where}: unknown section [{section}]; allowed: {', '.join(spec)}")
    for section, keys in spec.items():
        have = set(cfg.get(section, {}))
        if have - keys:
            raise ValueError(f"{where}: [{section}] unknown key(s) {sorted(have - keys)}; allowed: {sorted(keys)}")
        if keys - have:
            raise ValueError(f"{where}: [{section}] missing key(s) {sorted(keys - have)}")
    t = cfg.get("target", cfg.get("runs"))
    if not (isinstance(t["seeds"], int) and t["seeds"] >= 1):
        raise ValueError(f"{where}: seeds must be an integer >= 1, got {t['seeds']!r}")
    lo, hi = t["band"]
    if not 0 <= lo < hi <= 1:
        raise ValueError(f"{where}: band must be two quantiles 0 <= low < high <= 1, got {t['band']!r}")
    if name == "convergence_vs_echo":
        o = cfg["optimizer"]
        n = len(o["batch_sizes"])
        if len(o["max_batches"]) != n or len(o["max_steps"]) != n:
            raise ValueError(f"{where}: max_batches and max_steps need one value per batch size ({n})")


# --------------------------------------------------------------------------- shared helpers


def _quantiles(values, band) -> tuple[float, float, float]:
    """(median, low, high) of `values` (inf allowed: a never-converged seed counts as slowest)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return math.inf, math.inf, math.inf
    v = np.where(np.isnan(v), np.inf, v)
    lo, med, hi = np.quantile(v, [band[0], 0.5, band[1]], method="lower")
    return float(med), float(lo), float(hi)


def _curve(traj, batch_size: int, batches=None) -> dict:
    """A Trajectory as the dict `echosim.experiments.analysis.convergence` reads."""
    b = np.asarray(traj.batches if batches is None else batches, dtype=np.float64)
    return {"batches": b, "steps": np.asarray(traj.steps, dtype=np.float64), "samples": b * batch_size,
            "time": np.full(len(b), np.nan) if traj.time is None else np.asarray(traj.time, dtype=np.float64),
            "risk": traj.risk, "risk_avg": traj.risk_avg, "risk_end_avg": traj.risk_end_avg}


def _rank(conv: np.ndarray, lr: float) -> tuple:
    """Tuning rank, as `echosim.experiments.analysis.tune`: median, then mean (inf counted), more converged, smaller lr."""
    t = np.where(np.isnan(conv), np.inf, conv)
    with np.errstate(invalid="ignore"):
        return (float(np.median(t)), float(np.mean(t)), -int(np.isfinite(t).sum()), float(lr))


class _StepLogged(Problem):
    """Fresh batch t of `base` repeated K times in a row.

    Running EchoedGD with one step per unit on this stream is exactly echoed GD with
    K steps per fresh batch of `base` (same seed → same batches), but `run` then logs
    the loss after every optimizer step, so the trailing mean of the last 10 losses is
    over steps, and a curvature-dominated run needing only a few fresh batches is not
    held back by a 10-batch window.
    """

    def __init__(self, base: Problem, echo: int):
        self.base, self.echo = base, int(echo)
        self.loss, self.l2 = base.loss, base.l2
        self.w_star, self.F_star = base.w_star, base.F_star

    @property
    def n_features(self) -> int:
        return self.base.n_features

    def __repr__(self):
        return f"StepLogged({self.base!r}, echo={self.echo})"

    def risk(self, W):
        return self.base.risk(W)

    def batches(self, seed, start, stop, batch_size, dtype=np.float64):
        K = self.echo
        first = start // K // BATCHES_PER_BLOCK * BATCHES_PER_BLOCK
        X, y = self.base.batches(seed, first, (stop - 1) // K + 1, batch_size, dtype)
        idx = np.arange(start, stop) // K - first
        return X[idx], y[idx]


def _pool(workers: int):
    """A process pool that forks this process (compiled kernels are inherited)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method))


def _map(fn, tasks: list, workers: int) -> list:
    """fn over tasks, in a pool of `workers` processes (in this process when workers <= 1)."""
    if workers <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    with _pool(workers) as pool:
        return list(pool.map(fn, tasks, chunksize=1))


# --------------------------------------------------------------------------- figure 1


_FIG1 = {}  # the Dataset, set in the parent before forking (workers inherit it)


def _fig1_problem(cfg):
    from echosim.training.datasets import load_dataset

    key = (cfg["problem"]["dataset"], float(cfg["problem"]["l2"]))
    if _FIG1.get("key") != key:
        _FIG1["problem"] = load_dataset(key[0], l2=key[1])
        _FIG1["key"] = key
    return _FIG1["problem"]


def _fig1_task(task):
    """Convergence steps (inf if never) of every seed for one (B, K, lr), stepwise-logged."""
    from echosim.training.runner import run
    from echosim.experiments.analysis import convergence
    from echosim.training.optimizers import EchoedGD

    B, K, lr, seeds, budget_steps, rtol, window, every = task
    problem = _FIG1["problem"]
    stream = _StepLogged(problem, K) if K > 1 else problem
    logs = np.arange(every, budget_steps + 1, every)
    out = np.empty(len(seeds))
    for j, seed in enumerate(seeds):
        traj = run(stream, EchoedGD(lr), batch_size=B, echo=1, n_batches=budget_steps, seed=seed, log=logs)
        batches = np.ceil(np.asarray(traj.batches) / K)  # units are steps: fresh batches = ceil(steps/K)
        c = convergence(_curve(traj, B, batches), problem.F_star, rtol=rtol, window=window, status=traj.status)
        out[j] = c["conv_steps"]
    return out


def convergence_vs_echo_data(cfg: dict, workers: int = 1) -> dict:
    """Convergence time vs K per batch size, lr tuned per (B, K) on the paper's grid.

    Protocol (Agarwal et al. §4): echoed GD from w₀ = 0, batches drawn with replacement
    from the standardised data set (so the training loss is the risk F and F* its
    minimum), loss logged every m optimizer steps (m = 1 unless a run's step budget
    exceeds ``max_logged``); converged at the first logged step where the trailing mean
    of the last ``window`` logged losses is within ``rtol`` of F*. The lr is
    tuned per (B, K) over η_i = 10^(−2+i/20): a coarse pass (every ``coarse_every``-th
    value, ``coarse_seeds`` seeds) places a window of ± ``window`` grid values, searched
    with every seed and widened while the best value sits on its edge. The chosen lr has
    the smallest median convergence time (ties as `echosim.experiments.analysis.tune`).

    Returns
    -------
    dict with ``panels`` (one per B: ``B``, ``K``, median/low/high of ``KT`` and ``BT``
    over seeds at the tuned lr, ``lr``, ``lr_index``, ``window`` (searched index range
    per K), ``converged`` (seeds converged per K)), plus ``F_star``, ``name``,
    ``n_seeds``, ``band``, ``n_runs``.
    """
    o, tu, tg = cfg["optimizer"], cfg["tuning"], cfg["target"]
    problem = _fig1_problem(cfg)
    grid = paper_lr_grid()
    seeds = tuple(tg["seed"] + i for i in range(tg["seeds"]))
    coarse_seeds = seeds[: tu["coarse_seeds"]]
    rtol, win = float(tg["rtol"]), int(tg["window"])
    settings = [(bi, B, K) for bi, B in enumerate(o["batch_sizes"]) for K in o["echoes"]]
    cap = {(B, K): int(min(K * o["max_batches"][bi], max(o["max_steps"][bi], K)))
           for bi, B, K in settings}
    every = {key: max(1, math.ceil(c / o["max_logged"])) for key, c in cap.items()}
    n_runs = 0

    def task(B, K, i, s, budget):
        return (int(B), int(K), float(grid[i]), s, int(budget), rtol, win, every[(B, K)])

    # coarse pass
    coarse_idx = list(range(0, len(grid), tu["coarse_every"]))
    if coarse_idx[-1] != len(grid) - 1:
        coarse_idx.append(len(grid) - 1)
    tasks = [task(B, K, i, coarse_seeds, cap[(B, K)]) for _, B, K in settings for i in coarse_idx]
    t0 = time.perf_counter()
    res = _map(_fig1_task, _heavy_first(tasks), workers)
    res = dict(zip([(t[0], t[1], t[2]) for t in _heavy_first(tasks)], res))
    n_runs += len(tasks) * len(coarse_seeds)
    _log(f"convergence_vs_echo: coarse pass, {len(tasks) * len(coarse_seeds)} runs in {time.perf_counter() - t0:.1f} s")

    # fine pass: a window around the coarse best, every seed, widened at an edge
    found = {}
    state = {}
    for _, B, K in settings:
        ranks = [(_rank(res[(B, K, float(grid[i]))], grid[i]), i) for i in coarse_idx]
        best_rank, best_i = min(ranks)
        budget = cap[(B, K)]
        if math.isfinite(best_rank[0]):
            budget = min(budget, int(math.ceil(tu["budget_factor"] * best_rank[0])) + win)
        lo, hi = max(0, best_i - tu["window"]), min(len(grid) - 1, best_i + tu["window"])
        state[(B, K)] = {"lo": lo, "hi": hi, "budget": budget, "todo": list(range(lo, hi + 1))}
    rounds = 0
    while any(s["todo"] for s in state.values()):
        rounds += 1
        tasks = [task(B, K, i, seeds, s["budget"]) for (B, K), s in state.items() for i in s["todo"]]
        t0 = time.perf_counter()
        out = _map(_fig1_task, _heavy_first(tasks), workers)
        for t, r in zip(_heavy_first(tasks), out):
            found[(t[0], t[1], grid.tolist().index(t[2]))] = r
        n_runs += len(tasks) * len(seeds)
        _log(f"convergence_vs_echo: fine pass {rounds}, {len(tasks) * len(seeds)} runs in "
             f"{time.perf_counter() - t0:.1f} s")
        for (B, K), s in state.items():
            s["todo"] = []
            idx = range(s["lo"], s["hi"] + 1)
            rank, best = min((_rank(found[(B, K, i)], grid[i]), i) for i in idx)
            if not math.isfinite(rank[0]) or rounds >= 4:
                continue
            if best == s["lo"] and s["lo"] > 0:
                new_lo = max(0, s["lo"] - tu["window"])
                s["todo"], s["lo"] = list(range(new_lo, s["lo"])), new_lo
            elif best == s["hi"] and s["hi"] < len(grid) - 1:
                new_hi = min(len(grid) - 1, s["hi"] + tu["window"])
                s["todo"], s["hi"] = list(range(s["hi"] + 1, new_hi + 1)), new_hi

    band = tuple(tg["band"])
    panels = []
    for bi, B in enumerate(o["batch_sizes"]):
        K_arr = np.asarray(o["echoes"], dtype=np.float64)
        p = {"B": int(B), "K": K_arr, "lr": np.full(len(K_arr), np.nan), "lr_index": np.full(len(K_arr), -1),
             "window": [], "converged": np.zeros(len(K_arr), dtype=int), "budget_steps": [], "log_every": []}
        for key in ("KT", "BT"):
            for part in ("", "_low", "_high"):
                p[key + part] = np.full(len(K_arr), np.inf)
        for j, K in enumerate(o["echoes"]):
            s = state[(B, K)]
            idx = range(s["lo"], s["hi"] + 1)
            rank, best = min((_rank(found[(B, K, i)], grid[i]), i) for i in idx)
            p["window"].append((s["lo"], s["hi"]))
            p["budget_steps"].append(s["budget"])
            p["log_every"].append(every[(B, K)])
            steps = found[(B, K, best)]
            if not math.isfinite(rank[0]):
                continue  # no lr converged on half the seeds: "never"
            p["lr"][j], p["lr_index"][j] = grid[best], best
            p["converged"][j] = int(np.isfinite(steps).sum())
            p["KT"][j], p["KT_low"][j], p["KT_high"][j] = _quantiles(steps, band)
            p["BT"][j], p["BT_low"][j], p["BT_high"][j] = _quantiles(B * np.ceil(steps / K), band)
        panels.append(p)
    return {"panels": panels, "F_star": float(problem.F_star), "name": repr(problem), "n_seeds": len(seeds),
            "band": band, "rtol": rtol, "n_runs": n_runs}


def _heavy_first(tasks):
    """Longest tasks first (B × budget), for a balanced pool."""
    return sorted(tasks, key=lambda t: -t[0] * t[4] * len(t[3]))


def _band_label(band, n) -> str:
    return f"median, {round(100 * band[0])}–{round(100 * band[1])}% over {n} seeds"


def draw_convergence_vs_echo(data: dict):
    """Per B: KT (blue) and BT (red) vs K with bands, tuned lr (orange, right axis)."""
    from echosim.plots.views import draw_echo_panel

    fig, axes = _figure(len(data["panels"]), 4.0, 3.4)
    for ax, p in zip(axes, data["panels"]):
        K = p["K"]
        series = [(p[key], p[key + "_low"], p[key + "_high"], color, name)
                  for key, color, name in (("KT", "tab:blue", "steps KT"), ("BT", "tab:red", "samples BT"))]
        ax2 = draw_echo_panel(ax, K, series, p["lr"], K[~np.isfinite(p["KT"])], f"B = {p['B']}")
        ax2.set_ylim(0.008, 12)
        ax2.tick_params(axis="y", colors="tab:orange", labelsize=7)
        if ax is axes[-1]:
            ax2.set_ylabel("tuned learning rate", color="tab:orange")
    axes[0].set_ylabel("convergence time")
    h, lab = axes[0].get_legend_handles_labels()
    from matplotlib.lines import Line2D

    h.append(Line2D([], [], color="tab:orange", ls="--", marker="s", ms=3))
    lab.append("tuned lr (right axis)")
    fig.legend(h, lab, fontsize=7, loc="outside lower center", ncols=3,
               title=_band_label(data["band"], data["n_seeds"]) + " at the tuned lr", title_fontsize=7)
    fig.suptitle(f"{data['name'].split('(')[0]} {_short_name(data['name'])}: convergence time vs K "
                 f"(within {100 * data['rtol']:g}% of F* = {data['F_star']:.4f}; lr tuned per (B, K))", fontsize=9)
    return fig


def _short_name(name: str) -> str:
    import re

    m = re.search(r"name='([^']*)'.*l2=([0-9.e-]+)", name)
    return f"{m.group(1)}, l2 = {m.group(2)}" if m else name


def _figure(n: int, width: float, height: float, rows: int = 1):
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * n, height * rows), layout="constrained")
    axes = fig.subplots(rows, n, squeeze=False)
    return fig, (axes[0] if rows == 1 else axes)


# --------------------------------------------------------------------------- figure 2


def bounds_vs_simulation_data(cfg: dict) -> dict:
    """Simulated excess risk (median, band) with the matching theory bound along T.

    Each run uses the step sizes the theory tunes for the horizon T; the dashed bound is
    the fixed-parameter form of the same bound evaluated at every t ≤ T, so it is a
    valid upper bound on the plotted mean at every point:

    - minibatch SGD (K = 1) and echoed GD: ``echoed_gd_bound(lr=η)`` on ``risk_avg``;
    - echoed prox: ``echoed_prox_bound(lam=λ, inner_lr=γ)`` on ``risk_end_avg``;
    - echoed AGD on least squares: ``echoed_agd_bound(lr=η)`` on the last iterate.

    Returns ``{"panels": [{"title", "curves": [{"median", "bound", "mean"}]}], ...}``
    where ``median`` is `echosim.plots.median_band` output and ``bound`` a dict
    ``{"x", "y", "label"}``; ``mean`` is the mean over seeds (what the bound is about).
    """
    import theory
    from echosim.training.runner import log_points, run
    from echosim.training.optimizers import EchoedGD, EchoedNesterov, EchoedProx
    from echosim.plots.views import median_band
    from echosim.training.problems import LeastSquares, Logistic

    r = cfg["runs"]
    lg, qd = cfg["logistic"], cfg["quadratic"]
    logistic = Logistic(dim=lg["dim"], design="sphere", radius=lg["radius"], w_star_norm=lg["w_star_norm"])
    quadratic = LeastSquares(dim=qd["dim"], design="sphere", radius=qd["radius"], noise="uniform",
                             noise_std=qd["noise_std"], w_star_norm=qd["w_star_norm"])
    T, band = int(r["n_batches"]), tuple(r["band"])
    seeds = [r["seed"] + i for i in range(r["seeds"])]
    logs = log_points(int(r["log_points"]), T)

    def curve(problem, optimizer, B, K, output, bound_fn, label):
        trajs = [run(problem, optimizer, batch_size=B, echo=K, n_batches=T, seed=s, log=logs) for s in seeds]
        ok = [t for t in trajs if t.status == "ok"]
        if len(ok) < len(trajs):
            raise RuntimeError(f"{label}: {len(trajs) - len(ok)} run(s) diverged at the theory's step size")
        med = median_band(ok, x="batches", y=output, q=band, label=label)
        keep = med["x"] > 0
        for k in ("x", "y", "y_low", "y_high"):
            med[k] = med[k][keep]
        mean = np.mean([getattr(t, output) for t in ok], axis=0)[1:]
        return {"median": med, "mean": mean, "bound": {"x": med["x"], "y": np.asarray(bound_fn(med["x"])),
                                                       "label": f"{label}: bound"}}

    cL, cQ = logistic.constants(), quadratic.constants()
    B = int(r["batch_size"])
    sgd = []
    for b in r["sgd_batch_sizes"]:
        lr = float(theory.echoed_gd_lr(**cL, B=b, T=T, K=1))
        sgd.append(curve(logistic, EchoedGD(lr), int(b), 1, "risk_avg",
                         lambda t, b=b, lr=lr: theory.echoed_gd_bound(**cL, B=b, T=t, K=1, lr=lr), f"B={b}"))
    gd, prox, agd = [], [], []
    for K in r["echoes"]:
        lr = float(theory.echoed_gd_lr(**cL, B=B, T=T, K=K))
        gd.append(curve(logistic, EchoedGD(lr), B, K, "risk_avg",
                        lambda t, K=K, lr=lr: theory.echoed_gd_bound(**cL, B=B, T=t, K=K, lr=lr), f"K={K}"))
        lam, g = (float(v) for v in theory.echoed_prox_param(**cL, B=B, T=T, K=K))
        prox.append(curve(logistic, EchoedProx(g, lam=lam), B, K, "risk_end_avg",
                          lambda t, K=K, lam=lam, g=g: theory.echoed_prox_bound(**cL, B=B, T=t, K=K, lam=lam,
                                                                                 inner_lr=g), f"K={K}"))
        lr = float(theory.echoed_agd_lr(**cQ, B=B, T=T, K=K))
        agd.append(curve(quadratic, EchoedNesterov(lr), B, K, "risk",
                         lambda t, K=K, lr=lr: theory.echoed_agd_bound(**cQ, B=B, T=t, K=K, lr=lr), f"K={K}"))
    return {
        "panels": [
            {"title": "minibatch SGD (K = 1), average iterate", "problem": repr(logistic), "curves": sgd},
            {"title": f"echoed GD, B = {B}, average iterate", "problem": repr(logistic), "curves": gd},
            {"title": f"echoed prox, B = {B}, average of batch ends", "problem": repr(logistic), "curves": prox},
            {"title": f"echoed AGD (least squares), B = {B}, last iterate", "problem": repr(quadratic),
             "curves": agd},
        ],
        "T": T, "n_seeds": len(seeds), "band": band,
    }


def draw_bounds_vs_simulation(data: dict):
    """Four panels: median and band of the excess risk vs T, dashed bound in the same colour."""
    from echosim.plots.views import draw_overlay

    fig, axes = _figure(4, 3.4, 3.3)
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for ax, p in zip(axes, data["panels"]):
        for c, color in zip(p["curves"], colors):
            draw_overlay(ax, c, color=color)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("fresh batches T")
        ax.set_title(p["title"], fontsize=8)
        ax.legend(fontsize=6, loc="lower left")
    axes[0].set_ylabel("excess risk F(ŵ) − F*")
    fig.suptitle(f"simulation ({_band_label(data['band'], data['n_seeds'])}) vs theory bound (dashed), "
                 f"step sizes tuned for T = {data['T']}", fontsize=9)
    return fig


# --------------------------------------------------------------------------- figures 3 and 4: pipelines


def _loaders(R: float, pl: dict) -> dict:
    """Four loader-time processes with mean R: deterministic, exponential, Pareto, stall."""
    from echosim.pipeline.service_times import Deterministic, Exponential, Pareto, Stall

    p = float(pl["stall_p"])
    return {
        "deterministic": Deterministic(R),
        "exponential": Exponential(R),
        f"Pareto (shape {pl['pareto_shape']:g})": Pareto(R, float(pl["pareto_shape"])),
        f"stall (p = {p:g})": Stall(Deterministic(R / 2), p, R / (2 * p)),
    }


def _lsq(cfg):
    from echosim.training.problems import LeastSquares

    pr = cfg["problem"]
    return LeastSquares(dim=pr["dim"], design="gaussian", decay=pr["decay"], noise_std=pr["noise_std"],
                        w_star_norm=pr["w_star_norm"])


def _target_batches(problem, lr, B, K, T, seed, atol):
    """Fresh batches until the last iterate's excess risk first reaches atol (inf: never)."""
    from echosim.training.runner import run
    from echosim.experiments.analysis import convergence
    from echosim.training.optimizers import EchoedGD

    traj = run(problem, EchoedGD(lr), batch_size=B, echo=K, n_batches=T, seed=seed, log="all")
    return convergence(_curve(traj, B), problem.F_star, rtol=None, atol=atol, window=1,
                       status=traj.status)["conv_batches"]


def _finish_time(schedule, n_fresh) -> float:
    """Wall-clock when the last step on fresh batch n_fresh (1-based) ends; inf if never."""
    if not math.isfinite(n_fresh):
        return math.inf
    steps = int(np.sum(schedule.steps_per_batch[: int(n_fresh)]))
    return float(schedule.step_end[steps - 1])


def speedup_vs_R_data(cfg: dict) -> dict:
    """Simulated wall-clock speedup of fixed echoing over the synchronous baseline vs R.

    The optimizer's trajectory in fresh batches does not depend on the loader (same
    seed, same batches, K fixed), so each (K, seed) is run once and the number of fresh
    batches N(K) to the target read off; each loader's simulated schedule then says when
    the last step on batch N(K) ends. Speedup = time(sync) / time(echo e), per seed
    (same loader seed for both), median and band over seeds. The model is
    ``theory.echo_speedup(R, e, fresh_ratio = median N(1)/N(e))``, Choi et al.'s
    max(t_up, e·t_down) timing; ``ideal`` is min(e, R) (echoed steps as good as fresh).
    """
    import theory
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate

    o, pl, tg = cfg["optimizer"], cfg["pipeline"], cfg["target"]
    problem = _lsq(cfg)
    B, T, lr = int(o["batch_size"]), int(o["n_batches"]), float(o["lr"])
    atol = float(o["target_fraction"]) * float(problem.excess_risk(np.zeros(problem.dim))[0])
    seeds = [tg["seed"] + i for i in range(tg["seeds"])]
    band = tuple(tg["band"])
    echoes = [int(e) for e in o["echoes"]]
    N = {K: np.array([_target_batches(problem, lr, B, K, T, s, atol) for s in seeds]) for K in [1, *echoes]}
    fresh_ratio = {e: float(np.median(N[1]) / np.median(N[e])) for e in echoes}
    R_grid = np.asarray(pl["R"], dtype=np.float64)
    names = list(_loaders(1.0, pl))
    speed = {(name, e): np.full((3, len(R_grid)), np.nan) for name in names for e in echoes}
    for r_i, R in enumerate(R_grid):
        for name, arrival in _loaders(float(R), pl).items():
            common = dict(arrival=arrival, workers=pl["workers"], prefetch=pl["prefetch"], step_time=pl["step_time"])
            ratios = {e: [] for e in echoes}
            for j, s in enumerate(seeds):
                sync = simulate(Pipeline(policy="sync", **common), T, seed=s)
                t1 = _finish_time(sync, N[1][j])
                for e in echoes:
                    sch = simulate(Pipeline(policy="fixed", echo=float(e), **common), T, seed=s)
                    te = _finish_time(sch, N[e][j])
                    ratios[e].append(t1 / te if math.isfinite(te) else 0.0)
            for e in echoes:
                speed[(name, e)][:, r_i] = _quantiles(ratios[e], band)
    model = {e: (np.asarray(theory.echo_speedup(R_grid, e, fresh_ratio=fresh_ratio[e]))
                 if math.isfinite(fresh_ratio[e]) and fresh_ratio[e] > 0 else np.full(len(R_grid), np.nan))
             for e in echoes}
    ideal = {e: np.asarray(theory.echo_speedup(R_grid, e, fresh_ratio=float(e))) for e in echoes}
    return {"R": R_grid, "echoes": echoes, "loaders": names, "speedup": speed, "model": model, "ideal": ideal,
            "fresh_ratio": fresh_ratio, "N": {k: v for k, v in N.items()}, "n_seeds": len(seeds), "band": band,
            "problem": repr(problem), "B": B, "lr": lr, "workers": pl["workers"], "prefetch": pl["prefetch"]}


def draw_speedup_vs_R(data: dict):
    """One panel per loader: simulated speedup (median, band) per e vs R, dashed Choi model."""
    fig, axes = _figure(len(data["loaders"]), 3.2, 3.2)
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    R = data["R"]
    for ax, name in zip(axes, data["loaders"]):
        for e, color in zip(data["echoes"], colors):
            med, lo, hi = data["speedup"][(name, e)]
            ax.plot(R, med, "o-", color=color, ms=3, label=f"e = {e} simulated")
            ax.fill_between(R, lo, hi, color=color, alpha=0.2, lw=0)
            ax.plot(R, data["model"][e], "--", color=color, lw=1,
                    label=f"e = {e} model, N(1)/N(e) = {data['fresh_ratio'][e]:.2f}")
        ax.plot(R, np.ones_like(R), ":", color="0.5", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xticks(R, [f"{r:g}" for r in R], fontsize=7)
        ax.set_xlabel("R = t_up / t_down (mean loader time per batch)", fontsize=8)
        ax.set_title(f"{name} loader", fontsize=9)
    axes[0].set_ylabel("wall-clock speedup over no echoing")
    axes[0].legend(fontsize=6, loc="upper left", title=_band_label(data["band"], data["n_seeds"]), title_fontsize=6)
    fig.suptitle(f"speedup of fixed echoing vs R (least squares, B = {data['B']}, {data['workers']} loader worker, "
                 f"prefetch {data['prefetch']}); dashed: Choi et al.'s max(t_up, e·t_down) model", fontsize=9)
    return fig


def greedy_vs_fixed_data(cfg: dict) -> dict:
    """Greedy vs fixed echoing: speedup over sync (time to target) and greedy's K_t.

    For each stochastic loader (mean R per batch): the synchronous baseline, fixed echo
    e for each ``fixed_echoes`` and greedy (echo until the next batch is ready, at most
    ``max_echo``). Every policy sees the same loader times and the same fresh batches
    per seed; the optimizer runs on each simulated schedule (K_t varies under greedy).
    Speedup per seed = time(sync) / time(policy) to the target, median and band.
    """
    from echosim.training.runner import run
    from echosim.experiments.analysis import convergence
    from echosim.training.optimizers import EchoedGD
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate

    o, pl, tg = cfg["optimizer"], cfg["pipeline"], cfg["target"]
    problem = _lsq(cfg)
    B, T, lr, R = int(o["batch_size"]), int(o["n_batches"]), float(o["lr"]), float(pl["R"])
    atol = float(o["target_fraction"]) * float(problem.excess_risk(np.zeros(problem.dim))[0])
    seeds = [tg["seed"] + i for i in range(tg["seeds"])]
    band = tuple(tg["band"])
    loaders = {k: v for k, v in _loaders(R, pl).items() if k != "deterministic"}
    policies = ["sync"] + [f"fixed e = {e}" for e in o["fixed_echoes"]] + [f"greedy (max {o['max_echo']})"]
    speed, K_hist, mean_echo = {}, {}, {}
    for name, arrival in loaders.items():
        common = dict(arrival=arrival, workers=pl["workers"], prefetch=pl["prefetch"], step_time=pl["step_time"])
        specs = [Pipeline(policy="sync", **common)]
        specs += [Pipeline(policy="fixed", echo=float(e), **common) for e in o["fixed_echoes"]]
        specs.append(Pipeline(policy="greedy", max_echo=int(o["max_echo"]), **common))
        times = np.full((len(specs), len(seeds)), np.inf)
        ks = []
        for j, s in enumerate(seeds):
            for i, spec in enumerate(specs):
                sch = simulate(spec, T, seed=s)
                traj = run(problem, EchoedGD(lr), batch_size=B, echo=sch, seed=s, log="all")
                c = convergence(_curve(traj, B), problem.F_star, rtol=None, atol=atol, window=1, status=traj.status)
                times[i, j] = c["conv_time"]
                if spec.policy == "greedy":
                    n = int(c["conv_batches"]) if c["converged"] else T
                    ks.append(np.asarray(sch.steps_per_batch[:n]))
        for i, pol in enumerate(policies):
            speed[(name, pol)] = _quantiles(times[0] / times[i], band)
        K_all = np.concatenate(ks)
        K_hist[name] = np.bincount(K_all, minlength=int(o["max_echo"]) + 1)
        mean_echo[name] = float(K_all.mean())
    return {"loaders": list(loaders), "policies": policies, "speedup": speed, "K_hist": K_hist,
            "mean_echo": mean_echo, "R": R, "max_echo": int(o["max_echo"]), "n_seeds": len(seeds), "band": band,
            "fixed_echoes": list(o["fixed_echoes"])}


def draw_greedy_vs_fixed(data: dict):
    """Left: speedup per policy for each loader (median, band). Right: greedy's K_t histogram."""
    fig, axes = _figure(2, 4.4, 3.4)
    ax = axes[0]
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")
    n_pol = len(data["policies"])
    x = np.arange(len(data["loaders"]))
    width = 0.8 / n_pol
    for i, (pol, color) in enumerate(zip(data["policies"], colors)):
        med = np.array([data["speedup"][(name, pol)][0] for name in data["loaders"]])
        lo = np.array([data["speedup"][(name, pol)][1] for name in data["loaders"]])
        hi = np.array([data["speedup"][(name, pol)][2] for name in data["loaders"]])
        xs = x - 0.4 + width * (i + 0.5)
        ax.bar(xs, med, width * 0.9, color=color, alpha=0.75, label=pol)
        ax.errorbar(xs, med, yerr=[med - lo, hi - med], fmt="none", ecolor="k", lw=0.8, capsize=2)
    ax.axhline(data["R"], color="0.4", ls=":", lw=1, label=f"R = {data['R']:g}")
    ax.set_xticks(x, [n.split(" (")[0] for n in data["loaders"]], fontsize=8)
    ax.set_ylabel("wall-clock speedup to target over sync")
    ax.set_ylim(0, 1.45 * max(data["R"], max(v[2] for v in data["speedup"].values() if math.isfinite(v[2]))))
    ax.legend(fontsize=6, loc="upper center", ncols=3, title=f"median, bars {round(100 * data['band'][0])}–"
              f"{round(100 * data['band'][1])}% over {data['n_seeds']} seeds", title_fontsize=6)
    ax.set_title(f"loader mean time R = {data['R']:g} steps per batch", fontsize=9)
    ax = axes[1]
    k = np.arange(data["max_echo"] + 1)
    for name, color in zip(data["loaders"], ("tab:blue", "tab:red", "tab:green")):
        h = data["K_hist"][name]
        ax.step(k[1:], h[1:] / h.sum(), where="mid", color=color,
                label=f"{name}: mean K_t = {data['mean_echo'][name]:.2f}")
    for e in data["fixed_echoes"]:
        ax.axvline(e, color="0.6", ls=":", lw=0.8)
    ax.set_xlabel("K_t, steps on a fresh batch (greedy)")
    ax.set_ylabel("fraction of fresh batches")
    ax.set_title("greedy's steps per batch (dotted: fixed e)", fontsize=9)
    ax.legend(fontsize=6)
    fig.suptitle("greedy vs fixed echoing under stochastic arrivals (same mean loader time)", fontsize=9)
    return fig


# --------------------------------------------------------------------------- figure 5


def predicted_vs_simulated_data(cfg: dict) -> dict:
    """Theory-predicted vs simulated wall-clock speedup of echo K over K = 1, per B.

    Predicted: ``time_to_accuracy(ε, β, ρ, D, B, K, t_up, t_down)`` (T_ε of the tuned
    echoed-GD bound × Choi's max(t_up, K·t_down)), ratio K = 1 over K. Simulated: echoed
    GD at the theory's step ``echoed_gd_lr(..., T = T_ε(B, K))`` on the simulated
    pipeline (policy "fixed", "sync" for K = 1) for T_ε(B, K) batches; time to target =
    first logged time with average-iterate excess risk ≤ ε (the output the bound is
    about). Speedup per seed (same loader times and batches), median and band.
    """
    import theory
    from echosim.pipeline.service_times import as_service_time, service_time_from_dict
    from echosim.training.runner import run
    from echosim.experiments.analysis import convergence
    from echosim.training.optimizers import EchoedGD
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate
    from echosim.training.problems import Logistic

    pr, o, pl, tg = cfg["problem"], cfg["optimizer"], cfg["pipeline"], cfg["target"]
    problem = Logistic(dim=pr["dim"], design="sphere", radius=pr["radius"], w_star_norm=pr["w_star_norm"])
    c = problem.constants()
    eps = float(o["eps"])
    arrival = service_time_from_dict(pl["arrival"]) if isinstance(pl["arrival"], dict) else as_service_time(pl["arrival"])
    t_up, t_down = arrival.mean / pl["workers"], float(pl["step_time"])
    seeds = [tg["seed"] + i for i in range(tg["seeds"])]
    band = tuple(tg["band"])
    Bs, Ks = [int(b) for b in o["batch_sizes"]], [int(k) for k in o["echoes"]]
    shape = (len(Bs), len(Ks))
    predicted = np.empty(shape)
    T_eps = np.empty(shape, dtype=np.int64)
    sim = np.empty(shape + (3,))
    times = np.empty(shape + (len(seeds),))
    for bi, B in enumerate(Bs):
        t_pred = np.asarray(theory.time_to_accuracy(eps, **c, B=B, K=np.asarray(Ks, dtype=float),
                                                    t_up=t_up, t_down=t_down))
        predicted[bi] = t_pred[0] / t_pred if Ks[0] == 1 else np.nan
        for ki, K in enumerate(Ks):
            T = int(math.ceil(float(theory.batches_to_accuracy(eps, **c, B=B, K=K))))
            T_eps[bi, ki] = T
            lr = float(theory.echoed_gd_lr(**c, B=B, T=T, K=K))
            spec = Pipeline(arrival=arrival, workers=pl["workers"], prefetch=pl["prefetch"], step_time=t_down,
                            policy="sync" if K == 1 else "fixed", echo=None if K == 1 else float(K))
            for j, s in enumerate(seeds):
                sch = simulate(spec, T, seed=s)
                traj = run(problem, EchoedGD(lr), batch_size=B, echo=sch, seed=s, log="all")
                cv = convergence(_curve(traj, B), problem.F_star, rtol=None, atol=eps, window=1,
                                 iterate="avg", status=traj.status)
                times[bi, ki, j] = cv["conv_time"]
        for ki in range(len(Ks)):
            sim[bi, ki] = _quantiles(times[bi, 0] / times[bi, ki], band)
    return {"B": Bs, "K": Ks, "predicted": predicted, "simulated": sim, "T_eps": T_eps, "times": times,
            "eps": eps, "R": t_up / t_down, "n_seeds": len(seeds), "band": band, "problem": repr(problem),
            "arrival": repr(arrival)}


def draw_predicted_vs_simulated(data: dict):
    """Left: scatter of simulated vs predicted speedup (band as error bars), identity line.
    Middle and right: the two as heatmaps over (B, K), same colour scale."""
    fig, axes = _figure(3, 3.6, 3.3)
    ax = axes[0]
    pred, sim = data["predicted"], data["simulated"]
    markers = ("o", "s", "^", "D")
    colors = ("tab:blue", "tab:red", "tab:green", "tab:purple")
    for bi, B in enumerate(data["B"]):
        med, lo, hi = sim[bi, :, 0], sim[bi, :, 1], sim[bi, :, 2]
        ax.errorbar(pred[bi], med, yerr=[med - lo, hi - med], fmt=markers[bi % 4], color=colors[bi % 4], ms=4,
                    lw=0.8, capsize=2, label=f"B = {B}")
        for ki, K in enumerate(data["K"]):
            ax.annotate(f"{K}", (pred[bi, ki], med[ki]), fontsize=6, xytext=(3, -6), textcoords="offset points")
    top = 1.1 * max(np.nanmax(pred), np.nanmax(sim[..., 2]))
    ax.plot([0, top], [0, top], color="0.5", ls="--", lw=1, label="identity")
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("predicted speedup (theory)")
    ax.set_ylabel("simulated speedup")
    ax.set_title("labels: echo factor K", fontsize=8)
    ax.legend(fontsize=6, loc="upper left", title=_band_label(data["band"], data["n_seeds"]), title_fontsize=6)
    vmax = max(np.nanmax(pred), np.nanmax(sim[..., 0]))
    for ax, values, title in ((axes[1], pred, "predicted"), (axes[2], sim[..., 0], "simulated (median)")):
        im = ax.imshow(values, origin="lower", cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
        for (bi, ki), v in np.ndenumerate(values):
            ax.text(ki, bi, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v < 0.6 * vmax else "black")
        ax.set_xticks(range(len(data["K"])), [str(k) for k in data["K"]])
        ax.set_yticks(range(len(data["B"])), [str(b) for b in data["B"]])
        ax.set_xlabel("echo factor K")
        ax.set_ylabel("batch size B")
        ax.set_title(f"{title} speedup over K = 1", fontsize=8)
    fig.colorbar(im, ax=axes[2], shrink=0.8)
    fig.suptitle(f"predicted vs simulated wall-clock speedup to excess risk ε = {data['eps']:g} "
                 f"(logistic on the sphere, loader R = {data['R']:g})", fontsize=9)
    return fig


# --------------------------------------------------------------------------- entry point


_DATA = {
    "convergence_vs_echo": convergence_vs_echo_data,
    "bounds_vs_simulation": bounds_vs_simulation_data,
    "speedup_vs_R": speedup_vs_R_data,
    "greedy_vs_fixed": greedy_vs_fixed_data,
    "predicted_vs_simulated": predicted_vs_simulated_data,
}
_DRAW = {
    "convergence_vs_echo": draw_convergence_vs_echo,
    "bounds_vs_simulation": draw_bounds_vs_simulation,
    "speedup_vs_R": draw_speedup_vs_R,
    "greedy_vs_fixed": draw_greedy_vs_fixed,
    "predicted_vs_simulated": draw_predicted_vs_simulated,
}


def make_figures(out_dir="docs/figures", quick: bool = False, only=None, workers: int | None = None) -> dict:
    """Make the docs figures from the configs in ``echosim/plots/figure_configs``; write PNGs.

    Parameters
    ----------
    out_dir : directory for ``<figure>.png`` (created if missing).
    quick : tiny settings (each config's ``[quick]`` table), for CI: well under a minute.
    only : a figure name or a list of them (default: all of `FIGURES`).
    workers : processes for the heavy figure (convergence_vs_echo); default 2, capped
        at the available cores. The kernels are compiled once here, before forking.

    Returns
    -------
    dict figure name → path of the PNG written. Progress lines go to stderr.
    """
    names = list(FIGURES) if only is None else ([only] if isinstance(only, str) else list(only))
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"only: unknown figure {n!r}; allowed: {', '.join(FIGURES)}")
    if workers is None:
        from echosim.experiments.executors import default_workers

        workers = min(2, default_workers())
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    configs = {n: load_figure_config(n, quick=quick) for n in names}  # every config checked before any work
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t_all = time.perf_counter()
    from echosim.training.runner import compile_kernels
    from echosim.pipeline.model import Pipeline
    from echosim.pipeline.schedule import simulate

    compile_kernels()
    simulate(Pipeline(1.0, policy="fixed", echo=1.0), n_batches=2, seed=0)
    _log(f"kernels ready in {time.perf_counter() - t_all:.1f} s")
    written = {}
    for n in names:
        t0 = time.perf_counter()
        _log(f"{n}: start{' (quick)' if quick else ''}")
        if n == "convergence_vs_echo":
            _fig1_problem(configs[n])
            data = convergence_vs_echo_data(configs[n], workers=workers)
        else:
            data = _DATA[n](configs[n])
        fig = _DRAW[n](data)
        path = out / f"{n}.png"
        fig.savefig(path, dpi=DPI)
        written[n] = path
        _log(f"{n}: wrote {path} in {time.perf_counter() - t0:.1f} s")
    _log(f"all done in {time.perf_counter() - t_all:.1f} s")
    return written
