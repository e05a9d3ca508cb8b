"""How a training problem responds to echoing: fresh batches to target T(K, B), learned
from what the user measured: steps to target without echoing at two or more batch
sizes, and, where they have them, at one or more (B, K) with echoing (a pilot).

The model (derived in docs/background/plan-model.md) has two parts:

- **No echoing**, McCandlish et al.'s steps-examples trade-off:
  T(1, B) = S + E/B (S optimisation steps, E samples of noise), fitted to the K = 1
  measurements in relative error.
- **Echoing**, from the bound (Theorem 7: echoing divides the curvature term by K, not
  the noise term) and a noisy quadratic model: T(K, B) = S/K + E/B to leading order.
  Written as K steps on a batch doing the work of K_eff = K / (1 + (K - 1)/kappa) fresh
  steps, T(K, B) = T(1, B) / K_eff with the saturation echo kappa(B) = 1 + (B/B_e)^gamma,
  and the derivation gives gamma = 1, B_e = B_noise (the noise scale, E/S of the K = 1
  fit, or measured in the loop: `noise_scale`). The exact T_eps of Theorem 7 has
  gamma ~ 0.9, B_e ~ 0.6 B_noise; a noisy quadratic with a 1/i spectrum gamma ~ 1.5 in
  its transition: `PRIOR` spans these, centred on the derivation. Each echoed
  measurement reweighs the draws of (B_e, gamma) (shrinkage: never further from its
  own point than before it); two at different B pin both.

A variable echo K_t (greedy) is taken batch by batch: the target is reached at the
first T with sum over t < T of K_eff(K_t) / T(1, B) >= 1 (`predict_schedule`), so a
schedule that varies pays for K_eff's concavity instead of being read as its mean.

The derivation re-tunes the step for each K. A loop that keeps one learning rate
(``lr="fixed"``, the planner's form (b)) gets no gain credited beyond the largest K
measured with echoing: at a fixed step a larger K is a larger step, whose higher noise
floor can cost fresh batches (docs/background/plan-model.md, "One learning rate for
every K").

The 10-90% band carries the parameters' uncertainty (leave-one-out or bootstrap of the
K = 1 fit, the prior or posterior of kappa) and the model's own error, a log-normal
factor whose scale was set on the design references and is scored on held-out ones
(`MODEL_ERROR`; benchmarks/bench_plan_validation.py).

Examples
--------
>>> fit = fit_response({64: 1100.0, 1024: 160.0})
>>> round(fit.predict(1, 64)), round(fit.predict(1, 1024))
(1100, 160)
>>> fit.predict(8, 1024) < fit.predict(1, 1024)
True
>>> pilot = fit_response({64: 1100.0, 1024: 160.0, (1024, 4): 240.0})   # 240 steps = 60 fresh batches
>>> round(pilot.predict(4, 1024))     # learned, up to the measurement's assumed error
65
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from echosim._validate import check_int, check_real

__all__ = ["Response", "fit_response", "PRIOR", "MODEL_ERROR", "SINGLE_RUN_ERROR", "ACCURACY", "MAX_ECHO", "k_eff", "t_one",
           "check_batch_size"]

MAX_ECHO = 4096
"""The largest echo factor K the planner takes: a fixed K, greedy's cap, a measured (B, K)."""

PRIOR = {"log_be_offset": -0.2, "log_be_sd": 0.6, "gamma": 1.1, "gamma_sd": 0.3, "measured_sd": 0.35,
         "tail": 0.1, "tail_log_be_sd": 2.0, "tail_gamma": 1.5, "tail_gamma_sd": 0.8}
"""The prior of kappa(B) = 1 + (B/B_e)^gamma before any echoed measurement:
log B_e ~ N(log B_noise + log_be_offset, log_be_sd^2), gamma ~ N(gamma, gamma_sd^2) (> 0.2),
B_noise the K = 1 fit's E/S (its draws), or a noise scale measured in the loop with a
log error ``measured_sd``. Not fitted to any reference: centred on the derivation
(gamma = 1, B_e = B_noise) and wide enough for the exact T_eps of Theorem 7 (gamma 0.9,
B_e 0.6 B_noise) and a noisy quadratic model (gamma up to 1.5, B_e up to 2 B_noise).
A fraction ``tail`` of the draws comes from a wide component (log B_e sd ``tail_log_be_sd``,
gamma ~ N(tail_gamma, tail_gamma_sd^2)): where the derivation fails (plateaus of a
non-convex loss, data reused over epochs), an echoed measurement can still move the fit
to where it is: docs/background/plan-model.md, "The echo model"."""

MODEL_ERROR = {"T1": 0.15, "per_lnB": 0.35, "echo": 0.15}
"""The model's own error, as standard deviations of log(truth / prediction): T(1, B) is
off by ``T1`` at a measured batch size, plus ``per_lnB`` per unit of ln B away from the
nearest measured one (S + E/B extrapolates); an echoed prediction adds ``echo`` (the
saturation curve's own misfit). Set, with `SINGLE_RUN_ERROR`, on the design references of
benchmarks/bench_plan_validation.py (least squares, flights, 4,096-row flights) for about
80% coverage from single-seed inputs; scored on the held-out ones
(docs/background/plan-model.md, Measured accuracy)."""

SINGLE_RUN_ERROR = 0.17
"""The relative error assumed for one run's steps to target when nothing else measures it
(two batch sizes, no repeats): the log spread of single seeds' T around their median on the
design references at K = 1 (0.17 for least squares)."""

OBSERVATION_ERROR = 0.15
"""The relative error assumed for one echoed measurement when it updates kappa."""

ACCURACY = ("on two references held out from its design (one multi-epoch, one non-convex), from single runs: "
            "from K = 1 at two batch sizes, median error 20%, one prediction in ten off by more than 79%, the "
            "truth inside the 10-90% band in 84% of cells; with one echoed measurement (B, 4): median 7%, one in "
            "ten off by more than 56%, band 95% (docs/background/plan-model.md, Measured accuracy)")
"""The measured accuracy, quoted in the planner's output."""

N_DRAWS = 601  # odd: a median is one of the draws


def t_one(S, E, B):
    """T(1, B) = S + E/B; broadcasts."""
    return np.asarray(S, dtype=float) + np.asarray(E, dtype=float) / np.asarray(B, dtype=float)


def kappa(B, B_e, gamma):
    """The saturation echo kappa(B) = 1 + (B/B_e)^gamma; broadcasts."""
    return 1.0 + (np.asarray(B, dtype=float) / np.asarray(B_e, dtype=float)) ** np.asarray(gamma, dtype=float)


def k_eff(K, kap):
    """Fresh steps' worth of K steps on one batch: K / (1 + (K - 1)/kappa); broadcasts."""
    K = np.asarray(K, dtype=float)
    return K / (1.0 + (K - 1.0) / np.asarray(kap, dtype=float))


def _fit_k1(B: np.ndarray, T: np.ndarray) -> tuple[float, float]:
    """(S, E) of T = S + E/B by non-negative least squares in relative error."""
    from scipy.optimize import nnls

    (S, E), _ = nnls(np.column_stack([1.0 / T, 1.0 / (B * T)]), np.ones_like(T))
    return float(S), float(E)


@dataclass(frozen=True)
class Response:
    """A fitted T(K, B) model; `predict` gives fresh batches to target.

    Attributes
    ----------
    params : dict
        Point estimates: S, E (no echoing), B_e, gamma (echoing); `predict` is the median
        of the draws (without the model's own error).
    draws : dict of float64[n]
        Draws of S, E, B_e, gamma, of the correction of log T(1, B) at each knot
        (``delta``, float64[n, knots]), and of the model's own error (``noise``,
        ``noise_echo``: standard normals), behind every band.
    knots : float64[k]
        The batch sizes with a measurement: where log T(1, B) is pinned (K = 1, correction
        0) or corrected (echoed only, correction drawn). Between them the correction is
        interpolated in log B, beyond them held.
    uncertainty : how the K = 1 draws were made (repeats, residuals or an assumed error)
    echo_source : "prior only" (no echoed measurement) or "posterior from ..." (the pilot points)
    measurements : tuple of (B, K, T)
    k_max : float
        The largest K whose echo gain is credited: inf (every K, the step re-tuned per K), or
        under ``lr="fixed"`` the largest K measured with echoing; a larger K is worth K_eff(k_max).
    """

    params: dict
    draws: dict = field(repr=False)
    knots: np.ndarray = field(repr=False)
    uncertainty: str
    echo_source: str
    measurements: tuple = field(repr=False)
    k_max: float = math.inf

    def _k_eff(self, K, kap):
        """k_eff at min(K, k_max): no gain is credited beyond the largest K credited."""
        return k_eff(np.minimum(np.asarray(K, dtype=float), self.k_max), kap)

    def _delta(self, B) -> np.ndarray:
        """The correction of log T(1, B) per draw (0 without echoed-only knots)."""
        d = self.draws["delta"]
        if d.shape[1] == 0:
            return np.zeros(d.shape[0])
        x = math.log(float(B))
        lk = np.log(self.knots)
        if x <= lk[0]:
            return d[:, 0]
        if x >= lk[-1]:
            return d[:, -1]
        j = int(np.searchsorted(lk, x) - 1)
        w = (x - lk[j]) / (lk[j + 1] - lk[j])
        return (1 - w) * d[:, j] + w * d[:, j + 1]

    def _T_draws(self, K, B) -> np.ndarray:
        d = self.draws
        return t_one(d["S"], d["E"], B) * np.exp(self._delta(B)) / self._k_eff(K, kappa(B, d["B_e"], d["gamma"]))

    def predict(self, echo, batch_size):
        """Predicted fresh batches T to target at echo factor K and batch size B: T(1, B) of the
        fitted S and E, times the median over the draws of the correction and of 1/K_eff."""
        d = self.draws
        p = self.params

        def one(K):
            log_ratio = self._delta(batch_size) - np.log(self._k_eff(K, kappa(batch_size, d["B_e"], d["gamma"])))
            return float(t_one(p["S"], p["E"], batch_size) * np.exp(np.median(log_ratio)))

        if np.ndim(echo) == 0:
            return one(echo)
        return np.array([one(k) for k in np.asarray(echo).ravel()])

    def _log_error(self, K, B):
        """The model's own error in log T at (K, B), one value per draw: T(1, B)'s, growing
        with the distance to the nearest knot, and the echo curve's misfit for K > 1."""
        dist = float(np.min(np.abs(math.log(float(B)) - np.log(self.knots))))
        t1 = (MODEL_ERROR["T1"] + MODEL_ERROR["per_lnB"] * dist) * self.draws["noise"]
        echoed = np.any(np.asarray(K, dtype=float) > 1)
        return t1 + (MODEL_ERROR["echo"] * self.draws["noise_echo"] if echoed else 0.0)

    def predict_draws(self, echo, batch_size) -> np.ndarray:
        """T(K, B) under every draw of the parameters and of the model's error (for bands)."""
        T = self._T_draws(echo, batch_size)
        return np.maximum(T * np.exp(self._log_error(echo, batch_size)), 1.0)

    def predict_schedule(self, steps_per_batch, batch_size, draws: bool = False):
        """T for a schedule of K_t (one per fresh batch, e.g. greedy's): the first T with
        sum_{t<T} K_eff(K_t) >= T(1, B); inf if the schedule is too short. With `draws`,
        one T per draw (with the model's error); without, the median over the draws."""
        K = np.asarray(steps_per_batch, dtype=float)
        d = self.draws
        if draws:
            t1 = t_one(d["S"], d["E"], batch_size) * np.exp(self._delta(batch_size)
                                                              + self._log_error(K.max(), batch_size))
        else:  # as `predict`: the fitted T(1, B), the draws of the correction and of kappa
            t1 = t_one(self.params["S"], self.params["E"], batch_size) * np.exp(self._delta(batch_size))
        # K_eff >= 1, so T <= T(1, B): no longer schedule is needed
        K = K[: int(min(K.size, math.ceil(float(np.max(t1))) + 1))]
        progress = np.cumsum(self._k_eff(K[None, :], kappa(batch_size, d["B_e"], d["gamma"])[:, None]), axis=1) / t1[:, None]
        reached = progress >= 1.0
        T = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1.0, np.inf)
        return np.maximum(T, 1.0) if draws else float(np.median(T))

    def describe(self) -> str:
        d = self.draws
        lo, hi = {}, {}
        for k in ("S", "E", "B_e", "gamma"):
            lo[k], hi[k] = np.quantile(d[k], [0.1, 0.9])
        p = self.params
        return (f"T(1, B) = S + E/B with S = {p['S']:.4g} [{lo['S']:.3g}, {hi['S']:.3g}], E = {p['E']:.4g} "
                f"[{lo['E']:.3g}, {hi['E']:.3g}] ({self.uncertainty}); echo saturation kappa(B) = 1 + (B/B_e)^gamma "
                f"with B_e = {p['B_e']:.3g} [{lo['B_e']:.3g}, {hi['B_e']:.3g}], gamma = {p['gamma']:.2g} "
                f"[{lo['gamma']:.2g}, {hi['gamma']:.2g}] ({self.echo_source})")


# --------------------------------------------------------------------------- input


def check_batch_size(B, name: str, n_features: int = 1, itemsize: int = 4) -> int:
    """B as an int, or a ValueError naming `name`: an integer >= 1 that a run of a sweep can
    hold (`echosim.experiments.limits.max_batch_size`, for a problem of `n_features`)."""
    from echosim.experiments.limits import max_batch_size

    check_int(name, B, lo=1)
    top = max_batch_size(n_features, itemsize)
    if B > top:
        raise ValueError(f"{name}: batch size {B:,} is more than a simulated run can hold on this machine "
                         f"(at most {top:,}{f' for {n_features} features' if n_features > 1 else ''})")
    return int(B)


def _key(key) -> tuple[int, int]:
    """A measurement key: B (meaning K = 1) or (B, K), within the limits of the sweep and the planner."""
    if isinstance(key, tuple):
        if len(key) != 2:
            raise ValueError(f"steps_to_target: a key is a batch size B or a pair (B, K), got {key!r}")
        B, K = key
    else:
        B, K = key, 1
    check_int(f"steps_to_target: the batch size B in key {key!r}", B, lo=1)
    check_int(f"steps_to_target: the echo factor K in key {key!r}", K, lo=1, hi=MAX_ECHO)
    check_batch_size(B, "steps_to_target")
    return int(B), int(K)


def measurements(steps_to_target) -> list[tuple[int, int, float]]:
    """[(B, K, T), ...] from a mapping B or (B, K) -> steps (a number or a list of repeats);
    T is in fresh batches (steps / K). ValueError naming the bad entry: B within the
    sweep's limits, 1 <= K <= `MAX_ECHO`, steps finite and at least K."""
    if not isinstance(steps_to_target, Mapping):
        raise ValueError("steps_to_target: expected a mapping B -> steps to target at K = 1, or (B, K) -> steps "
                         f"with echoing (a number or a list of repeats), got {type(steps_to_target).__name__}")
    out = []
    for key, v in steps_to_target.items():
        B, K = _key(key)
        try:
            vals = np.atleast_1d(np.asarray(v, dtype=float)).reshape(-1)
        except (TypeError, ValueError):
            vals = np.array([np.nan])
        if vals.size == 0 or not np.all(np.isfinite(vals) & (vals >= 1)):
            raise ValueError(f"steps_to_target: at B = {B}{f', K = {K}' if K > 1 else ''} every measurement must "
                             f"be a finite number of steps >= 1, got {v!r}")
        if K > 1 and not np.all(vals >= K):  # K steps on each batch: fewer than K is not one whole batch
            raise ValueError(f"steps_to_target: at B = {B}, K = {K} every measurement must be at least K = {K} "
                             f"steps (each fresh batch takes K steps, so steps / K >= 1 fresh batch), got {v!r}")
        out.extend((B, K, float(x) / K) for x in vals)
    return out


# --------------------------------------------------------------------------- fit


def fit_response(steps_to_target, *, n_draws: int = N_DRAWS, rel_error: float = SINGLE_RUN_ERROR, seed: int = 0,
                 noise_scale: float | None = None, echo_gains: Mapping | None = None, lr: str = "tuned") -> Response:
    """Fit T(K, B) from steps to target: at K = 1 at two or more batch sizes (keys B), and
    optionally with echoing (keys (B, K), steps = K x fresh batches).

    Parameters
    ----------
    steps_to_target : mapping B or (B, K) -> steps (or a list of repeated measurements)
    n_draws : draws behind the bands.
    rel_error : assumed relative error of a K = 1 measurement (one run), used only when
        nothing else measures it (no repeats and exactly two batch sizes): `SINGLE_RUN_ERROR`.
    seed : seed of the draws (numpy SeedSequence).
    noise_scale : float, optional
        The gradient-noise scale B_noise measured in the loop (`Records.noise_scale`,
        `echosim.planner.echo_signals.measured_noise_scale`): the centre of the echo
        model's B_e instead of the K = 1 fit's E/S.
    echo_gains : mapping (B, K) -> (K_eff, log standard error[, n]), optional
        K_eff measured in the loop from paired next-batch progress under K against K = 1
        (`echosim.planner.echo_signals.echo_gains`): each one weighs the draws of the echo
        model like an echoed measurement, on K_eff itself (no T(1, B) involved).
    lr : "tuned" or "fixed"
        "tuned" (the derivation's assumption): the step is re-tuned for each K, and K_eff follows
        the fitted curve at every K. "fixed": one learning rate for every K, as in a loop that
        adds echoing and keeps its optimizer: the gain is credited up to the largest K measured
        with echoing (a (B, K) key or an echo gain) and held there beyond it, since at a fixed
        step a larger K acts as a larger step and can need more fresh batches, not fewer
        (docs/background/plan-model.md, "One learning rate for every K"). Without an echoed
        measurement the two are the same.
    """
    check_real("rel_error", rel_error, lo=0.0, hi=1.0, hi_open=True)
    if lr not in ("tuned", "fixed"):
        raise ValueError(f"lr: expected 'tuned' (the step re-tuned for each K) or 'fixed' (one learning rate for "
                         f"every K), got {lr!r}")
    if noise_scale is not None:
        check_real("noise_scale (a measured gradient-noise scale, in examples)", noise_scale, lo=0.0, lo_open=True)
    gains = _gains(echo_gains)
    data = measurements(steps_to_target)
    base = [(B, T) for B, K, T in data if K == 1]
    echoed = [(B, K, T) for B, K, T in data if K > 1]
    sizes = sorted({B for B, _ in base})
    if len(sizes) < 2:
        raise ValueError(f"steps_to_target: the T(K) model needs steps to target without echoing (K = 1) at two or "
                         f"more batch sizes, got {len(sizes)}")
    B1 = np.array([b for b, _ in base], dtype=float)
    T1 = np.array([t for _, t in base], dtype=float)
    S, E = _fit_k1(B1, T1)
    if not (S > 0 or E > 0):
        raise ValueError("steps_to_target: the measurements fit no positive T(1, B) = S + E/B")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    dS, dE, how = _k1_draws(B1, T1, S, E, n_draws, rel_error, rng)
    # the prior: kappa centred on McCandlish's noise scale E/S; log T(1, B) corrected at every
    # batch size measured only with echoing, by its extrapolation error
    if noise_scale is None:
        b_noise = np.where(dS > 0, dE / np.maximum(dS, 1e-300), np.inf)
        b_noise = np.where(np.isfinite(b_noise) & (b_noise > 0), b_noise, max(sizes))
    else:
        b_noise = float(noise_scale) * np.exp(PRIOR["measured_sd"] * rng.normal(size=n_draws))
    n_prior = n_draws * 40 if (echoed or gains) else n_draws  # enough draws near a measurement to resample from
    idx = rng.integers(0, n_draws, n_prior) if (echoed or gains) else np.arange(n_draws)
    pS, pE = dS[idx], dE[idx]
    tail = rng.random(n_prior) < PRIOR["tail"]
    log_sd = np.where(tail, PRIOR["tail_log_be_sd"], PRIOR["log_be_sd"])
    pBe = b_noise[idx] * np.exp(PRIOR["log_be_offset"] + log_sd * rng.normal(size=n_prior))
    pg = np.maximum(np.where(tail, PRIOR["tail_gamma"], PRIOR["gamma"])
                    + np.where(tail, PRIOR["tail_gamma_sd"], PRIOR["gamma_sd"]) * rng.normal(size=n_prior), 0.2)
    extra = sorted({B for B, _, _ in echoed} - set(sizes))
    knots = np.array(sorted(set(sizes) | set(extra)), dtype=float)
    delta = np.zeros((n_prior, knots.size))
    for B in extra:
        dist = float(np.min(np.abs(np.log(B) - np.log(np.array(sizes, dtype=float)))))
        delta[:, int(np.flatnonzero(knots == B)[0])] = (MODEL_ERROR["T1"] + MODEL_ERROR["per_lnB"] * dist) * \
            rng.normal(size=n_prior)
    prior = Response({}, {"S": pS, "E": pE, "B_e": pBe, "gamma": pg, "delta": delta}, knots, how, "", ())
    if echoed or gains:
        logw = np.zeros(n_prior)
        for B, K, T in echoed:
            logw -= (np.log(T) - np.log(prior._T_draws(K, B))) ** 2 / (2 * OBSERVATION_ERROR ** 2)
        for (B, K), (g, se) in gains.items():
            model = k_eff(K, kappa(B, pBe, pg))
            logw -= (math.log(g) - np.log(model)) ** 2 / (2 * max(se, OBSERVATION_ERROR) ** 2)
        pick = _shrunk_posterior(prior, echoed, logw, n_draws, rng, S, E) if echoed else \
            rng.choice(n_prior, size=n_draws, p=np.exp(logw - logw.max()) / np.exp(logw - logw.max()).sum())
        parts = []
        if echoed:
            pts = ", ".join(f"(B={B}, K={K})" for B, K, _ in echoed)
            parts.append(f"the echoed measurement{'s' if len(echoed) > 1 else ''} at {pts}")
        if gains:
            pts = ", ".join(f"(B={B}, K={K}): K_eff {g:.2g}" for (B, K), (g, _) in gains.items())
            parts.append(f"paired progress in the loop at {pts}")
        source = "posterior from " + " and ".join(parts)
    else:
        pick = np.arange(n_draws)
        centre = (f"B_noise = {noise_scale:.3g} measured in the loop" if noise_scale is not None
                  else "B_noise = E/S of the K = 1 fit")
        source = (f"prior only ({centre}): no echoed measurement; a pilot at (B, K) would measure how much an "
                  "echoed step is worth here")
    draws = {"S": pS[pick], "E": pE[pick], "B_e": pBe[pick], "gamma": pg[pick], "delta": delta[pick],
             "noise": rng.normal(size=n_draws), "noise_echo": rng.normal(size=n_draws)}
    params = {"S": S, "E": E, "B_e": float(np.median(draws["B_e"])), "gamma": float(np.median(draws["gamma"]))}
    k_max = math.inf
    if lr == "fixed" and (echoed or gains):
        k_max = float(max([K for _, K, _ in echoed] + [K for _, K in gains]))
        source += (f"; one learning rate for every K: the gain is credited up to K = {k_max:g}, the largest K "
                   "measured, and held beyond it")
    return Response(params, draws, knots, how, source, tuple(data), k_max)


def _gains(echo_gains) -> dict:
    """{(B, K): (K_eff, se)} checked: K_eff in [1/K, K], se > 0; ValueError naming echo_gains."""
    if echo_gains is None:
        return {}
    if not isinstance(echo_gains, Mapping):
        raise ValueError(f"echo_gains: expected a mapping (B, K) -> (K_eff, log standard error), got "
                         f"{type(echo_gains).__name__}")
    out = {}
    for key, v in echo_gains.items():
        B, K = _key(key if isinstance(key, tuple) else (key, 1))
        if K < 2:
            raise ValueError(f"echo_gains: a gain is measured at an echo factor K >= 2, got {key!r}")
        try:
            g, se = float(v[0]), float(v[1])
        except (TypeError, ValueError, IndexError):
            raise ValueError(f"echo_gains: at {key!r} expected (K_eff, log standard error), got {v!r}") from None
        if not (math.isfinite(g) and 1.0 / K <= g <= K) or not se > 0:
            raise ValueError(f"echo_gains: at {key!r} K_eff must be in [1/K, K] and its standard error > 0, got {v!r}")
        out[(B, K)] = (g, se)
    return out


def _misfit(prior: Response, rows: np.ndarray, echoed, S: float, E: float) -> float:
    """Sum over the echoed measurements of the squared log error of the median prediction of
    the draws `rows` (with the fitted T(1, B) = S + E/B, as `predict`)."""
    out = 0.0
    for B, K, T in echoed:
        log_ratio = prior._delta(B)[rows] - np.log(k_eff(K, kappa(B, prior.draws["B_e"][rows],
                                                                   prior.draws["gamma"][rows])))
        t1 = float(t_one(S, E, B))
        out += (math.log(T) - math.log(t1) - float(np.median(log_ratio))) ** 2
    return out


def _shrunk_posterior(prior: Response, echoed, logw: np.ndarray, n_draws: int, rng, S: float, E: float):
    """Draws resampled by the likelihood of the echoed measurements, tempered (w^lambda, lambda
    from 1 down to 0, the prior) until the fit is no further from the measurements than the
    prior was: a measurement never makes the fit worse on the data it came with."""
    every = np.arange(logw.size)
    before = _misfit(prior, every, echoed, S, E)
    for lam in (1.0, 0.5, 0.25, 0.0):
        w = np.exp(lam * (logw - logw.max()))
        pick = rng.choice(logw.size, size=n_draws, p=w / w.sum())
        if lam == 0.0 or _misfit(prior, pick, echoed, S, E) <= before + 1e-12:
            return pick
    return pick


def _loo_scale(B: np.ndarray, T: np.ndarray) -> float:
    """The spread of the user's own K = 1 measurements: root mean square of log(T_i / T_hat_i),
    T_hat_i the fit of S + E/B to all the others (leave-one-out; three or more batch sizes)."""
    errs = []
    for i in range(B.size):
        keep = np.arange(B.size) != i
        S, E = _fit_k1(B[keep], T[keep])
        pred = float(t_one(S, E, B[i]))
        errs.append(math.log(T[i] / pred) if pred > 0 else 0.0)
    return float(np.sqrt(np.mean(np.square(errs))))


def _k1_draws(B, T, S, E, n, rel_error, rng):
    sizes = np.unique(B)
    replicated = any(np.sum(B == b) > 1 for b in sizes)
    dS, dE = np.empty(n), np.empty(n)
    if replicated:
        groups = [np.flatnonzero(B == b) for b in sizes]
        how = "bootstrap over the repeated measurements"
        for i in range(n):
            j = np.concatenate([rng.choice(g, g.size) for g in groups])
            dS[i], dE[i] = _fit_k1(B[j], T[j])
    else:
        fitted = t_one(S, E, B)
        if sizes.size >= 3:
            scale = max(_loo_scale(B, T), 0.02)
            how = f"leave-one-out over your {sizes.size} batch sizes: each predicted from the others off by {scale:.2g} in log"
        else:
            scale = float(rel_error)
            how = f"assumed {rel_error:.0%} relative error per measurement (measure repeats to replace it)"
        for i in range(n):
            dS[i], dE[i] = _fit_k1(B, fitted * np.exp(rng.normal(0.0, scale, B.size)))
    return dS, dE, how
