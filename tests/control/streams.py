"""Scripted streams for the controllers: a fake clock, a loss process, no loader and no model.

Each fresh batch takes one second of loop time whatever K_t (the loader sets the pace)
and K_t is the cap. The population loss L falls by ``gain(c, L, t) * (L - floor)`` per
fresh batch under cap c; the loop reports y_t = L_t + noise, optionally the paired
next-batch progress (the true progress plus a smaller noise) or a probe (L exactly).
"""

from __future__ import annotations

import numpy as np

from echosim.control import AutoEcho, Driver


def drive(gain, n, *, seed=0, noise=0.02, floor=0.0, start_loss=1.0, paired_noise=None, probe=False, ar=0.0,
          pace=None, relative=False, heavy=False, controller=None, **options):
    """Run `n` fresh batches; returns (caps per batch, the controller). With `relative` the noise
    is a fraction of the loss (heteroscedastic: a batch loss's noise shrinks with the loss); with
    `heavy` it is Student's t with 3 degrees of freedom, scaled to unit variance."""
    rng = np.random.default_rng(seed)
    ctrl = controller if controller is not None else AutoEcho(**{"max_echo": 8, **options})
    drv = Driver(ctrl)
    L = start_loss
    wander = 0.0
    caps = np.zeros(n, dtype=np.int64)
    prev_L = None
    for t in range(n):
        c = drv.begin(t, float(t))
        caps[t] = c
        k = c if pace is None else min(c, pace)
        e = rng.standard_t(3) / np.sqrt(3.0) if heavy else rng.standard_normal()
        wander = ar * wander + noise * (L - floor if relative else 1.0) * e
        drv.first_loss(t, L + wander)
        if paired_noise is not None and prev_L is not None:
            # batch t at the weights batch t-1 started from, minus at the weights now: the true progress
            drv.lagged_loss(t, L + wander + (prev_L - L) + paired_noise * rng.standard_normal())
        if probe and ctrl.holds() == getattr(ctrl, "window", 0):
            drv.probe(t, L)
        prev_L = L
        L = floor + (L - floor) * (1.0 - gain(k, L, t))
        drv.end(t, k)
    return caps, ctrl


def pays(rate=0.002, efficiency=1.0):
    """Each echoed step is worth `efficiency` of a fresh one, throughout."""
    return lambda k, L, t: min(0.5, rate * (1 + efficiency * (k - 1)))


def hurts(rate=0.004):
    """Echoed steps undo progress: K steps do less than one."""
    return lambda k, L, t: rate * (1.0 - 0.4 * (k - 1) / k) if k > 1 else rate


def plateau_then_pays(until=300, rate=0.003):
    """Echoing does nothing for `until` batches (every cap equal), then pays fully."""
    return lambda k, L, t: rate if t < until else min(0.5, rate * k)
