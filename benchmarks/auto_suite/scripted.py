"""Scripted streams: a real loop through ``echosim.echoing`` around a sleeping loader, where
the "model" is a scalar progress state s.

A fresh step moves s by 1 (in units of a fresh batch's progress at the user's lr); an
echoed step by `echo_value` (0.5: worth half a fresh step; negative: echoing undoes
progress). The loss of a step is L(s) + e_t: L is the case's noise-free curve, e_t the
noise of fresh batch t (the same for every step on the batch, and for every policy at a
seed: common random numbers; i.i.d. or AR(1) over t). The checkpoints' L(s) is what the
target rule scores. Under ``--signals`` the lagged loss is L(s at the previous fresh
batch's first step) + e_t (the paired reading: its noise cancels), the probe
L(s) + a held-out noise of a quarter of e_t's scale.
"""

from __future__ import annotations

import numpy as np


class ScriptedTask:
    kind = "scripted"
    metric = "loss L(s)"
    smooth = False  # the checkpoints are noise-free

    def __init__(self, name, title, *, echo_value, slope=1 / 200, plateau=0.0, sigma=0.02, ar=0.0, target,
                 budget=240, B=1, t_load=0.016, t_step=0.002, max_echo=64, expect="", lr=None):
        self.name, self.title = name, title
        self.echo_value, self.slope, self.plateau = echo_value, slope, plateau
        self.sigma, self.ar, self.target, self.budget = sigma, ar, target, budget
        self.B, self.t_load, self.t_step, self.max_echo = B, t_load, t_step, max_echo
        self.expect, self.lr = expect, lr

    def curve(self, s):
        """L(s) = 1 on the plateau (s < plateau), then 1 − slope·(s − plateau)."""
        s = np.asarray(s, dtype=float)
        return 1.0 - self.slope * np.maximum(s - self.plateau, 0.0)

    def describe(self) -> str:
        noise = f"AR(1) noise, phi = {self.ar:g}, stationary sd {self.sigma:g}" if self.ar else f"i.i.d. noise, sd {self.sigma:g}"
        plat = f"flat for s < {self.plateau:g}, then " if self.plateau else ""
        win = 8 * self.slope
        return (f"L(s) = {plat}falling {self.slope:g} per unit of s; echoed step worth {self.echo_value:g} of a "
                f"fresh one; {noise} (a sync window of 8 batches moves L by {win:g}: noise/window progress "
                f"{self.sigma / win:.2g}); target L <= {self.target:g} (sync at fresh batch "
                f"{self.sync_batches():.0f}); budget {self.budget} fresh batches. Expected: {self.expect}")

    def sync_batches(self) -> float:
        return self.plateau + (1.0 - self.target) / self.slope

    def batches(self, seed: int, n: int) -> list:
        rng = np.random.default_rng([seed, 7])
        xi = rng.standard_normal(n)
        e = np.empty(n)
        if self.ar:
            e[0] = xi[0]
            c = np.sqrt(1.0 - self.ar ** 2)
            for t in range(1, n):
                e[t] = self.ar * e[t - 1] + c * xi[t]
        else:
            e[:] = xi
        # a batch is (t, e_t): a tuple object of its own, so echoing's repeats are the same object
        return [(t, float(self.sigma * e[t])) for t in range(n)]

    def init(self, seed: int):
        return np.zeros(1)

    def snapshot(self, w):
        return w.copy()

    def step(self, w, batch, echo: bool):
        loss = float(self.curve(w[0])) + batch[1]
        w[0] += self.echo_value if echo else 1.0
        return loss, w

    def loss(self, w, batch) -> float:
        return float(self.curve(w[0])) + batch[1]

    def probe(self, w, seed: int) -> float:
        rng = np.random.default_rng([seed, 11, round(1e6 * float(w[0])) % 2**63])  # s < 0 where echoing hurts
        return float(self.curve(w[0])) + 0.25 * self.sigma * float(rng.standard_normal())

    def evaluate(self, checkpoints) -> np.ndarray:
        return self.curve(np.asarray(checkpoints)[:, 0])


def scripted_tasks() -> list:
    # Units: L falls 1/200 per fresh step (sync: 0.04 per window of 8 batches); R = 16/2 = 8.
    return [
        ScriptedTask("stream-pays-lowsnr", "6a. scripted: echoing pays throughout, low signal-to-noise",
                     echo_value=0.5, sigma=0.08, target=0.2, budget=240,
                     expect="greedy (about 4.5x sync per batch); auto never steps down"),
        ScriptedTask("stream-plateau", "6b. scripted: a plateau, then echoing pays",
                     echo_value=0.5, plateau=80, sigma=0.02, target=0.4, budget=260,
                     expect="greedy; on the plateau the loss is flat under every policy, yet echoed steps "
                     "still advance s, so stepping down there loses time"),
        ScriptedTask("stream-hurts", "6c. scripted: echoing hurts at the user's lr",
                     echo_value=-0.25, sigma=0.02, target=0.2, budget=240,
                     expect="sync (K = 2: 0.75 of sync per batch, K = 4: 0.25, K >= 5 goes backwards); auto "
                     "at K = 1 within 3 windows (24 fresh batches)"),
        ScriptedTask("stream-ar1", "6d. scripted: echoing pays, autocorrelated noise",
                     echo_value=0.5, sigma=0.04, ar=0.9, target=0.2, budget=240,
                     expect="greedy; AR(1) noise makes block slopes look significant when they are not"),
    ]
