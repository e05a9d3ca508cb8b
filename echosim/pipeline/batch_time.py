"""Loader time that depends on the batch size: t_up(B) = a + b·B per batch per worker.

A real loader pays a fixed cost per batch (a: opening a shard, a host-to-device copy,
Python overhead) and a cost per example (b: decoding, augmentation), so a batch of B
examples takes a + b·B on average. `BatchTime` holds (a, b) and a noise family;
``at(B)`` gives the service time of one batch. In a sweep config:

    arrival = {kind = "affine", fixed = 4.0, per_example = 0.004, noise = "gamma", cv = 0.5}

`fit_batch_time` estimates (a, b) from loader times measured at two or more batch
sizes (e.g. `echosim.profile` of the same loader at B = 64 and B = 1024).

>>> bt = BatchTime(fixed=4.0, per_example=0.004, noise="gamma", cv=0.5)
>>> bt.at(1000)
Gamma(mean=8.0, cv=0.5)
>>> round(fit_batch_time({64: [4.2, 4.3], 1024: [8.1, 8.0]}).per_example, 6)
0.003958
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from echosim._validate import check_int, check_real, is_int
from echosim.pipeline.service_times import Deterministic, Exponential, Gamma, LogNormal, ServiceTime

__all__ = ["BatchTime", "fit_batch_time", "affine_fit", "NOISES"]

NOISES = ("deterministic", "exponential", "gamma", "lognormal")
"""Noise families of a batch-size-dependent loader time (gamma and lognormal take a cv)."""
_KEYS = {"kind", "fixed", "per_example", "noise", "cv"}


@dataclass(frozen=True)
class BatchTime:
    """Time per batch per worker: mean ``fixed + per_example·B``, with `noise` around it.

    Parameters
    ----------
    fixed : float >= 0
        a, the cost of a batch whatever its size.
    per_example : float >= 0
        b, the cost of one example; a + b > 0.
    noise : {"deterministic", "exponential", "gamma", "lognormal"}
        The family of the time around its mean.
    cv : float > 0
        Coefficient of variation, for "gamma" and "lognormal".
    """

    fixed: float
    per_example: float
    noise: str = "deterministic"
    cv: float | None = None

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "fixed", check_real("affine.fixed", self.fixed, lo=0.0))
        set_(self, "per_example", check_real("affine.per_example", self.per_example, lo=0.0))
        if not self.fixed + self.per_example > 0:
            raise ValueError("affine: fixed + per_example must be > 0 (a batch must take some time)")
        if self.noise not in NOISES:
            raise ValueError(f"affine.noise must be one of {', '.join(NOISES)}, got {self.noise!r}")
        if self.noise in ("gamma", "lognormal"):
            if self.cv is None:
                raise ValueError(f"affine.cv is required with noise {self.noise!r} (a number > 0)")
            set_(self, "cv", check_real("affine.cv", self.cv, lo=0.0, lo_open=True))
        elif self.cv is not None:
            raise ValueError(f"affine.cv applies only to noise 'gamma' or 'lognormal', got noise {self.noise!r}")

    def mean_at(self, batch_size: int) -> float:
        """a + b·B."""
        return self.fixed + self.per_example * batch_size

    def at(self, batch_size: int) -> ServiceTime:
        """The service time of one batch of `batch_size` examples."""
        check_int("batch_size", batch_size, lo=1)
        m = self.mean_at(int(batch_size))
        if self.noise == "deterministic":
            return Deterministic(m)
        if self.noise == "exponential":
            return Exponential(m)
        return (Gamma if self.noise == "gamma" else LogNormal)(mean=m, cv=self.cv)

    @classmethod
    def from_dict(cls, d: Mapping) -> BatchTime:
        """From ``{kind = "affine", fixed, per_example, noise, cv}`` (noise defaults to deterministic)."""
        unknown = sorted(set(d) - _KEYS)
        if unknown:
            raise ValueError(f"unknown key(s) {unknown} for kind 'affine'; allowed: {sorted(_KEYS - {'kind'})}")
        missing = [k for k in ("fixed", "per_example") if k not in d]
        if missing:
            raise ValueError(f"missing key(s) {missing} for kind 'affine'")
        return cls(d["fixed"], d["per_example"], d.get("noise", "deterministic"), d.get("cv"))


def is_batch_time(spec) -> bool:
    """Whether a service-time spec (a TOML table) is batch-size dependent (kind "affine")."""
    return isinstance(spec, Mapping) and str(spec.get("kind", "")).lower() == "affine"


def affine_fit(x, y) -> tuple[float, float, float, float]:
    """Least squares of y ≈ a + b·x: (a, b, standard error of a, of b); the errors are NaN
    when there are no residual degrees of freedom."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    A = np.column_stack([np.ones_like(x), x])
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    a_se = b_se = math.nan
    if x.size > 2:
        s2 = float(np.sum((y - A @ coef) ** 2)) / (x.size - 2)
        cov = s2 * np.linalg.inv(A.T @ A)
        a_se, b_se = math.sqrt(max(cov[0, 0], 0.0)), math.sqrt(max(cov[1, 1], 0.0))
    return float(coef[0]), float(coef[1]), a_se, b_se


def fit_batch_time(profiles: Mapping) -> BatchTime:
    """Least-squares (a, b) of time per batch = a + b·B from times measured at two or
    more batch sizes (a mapping B → array of times, or a `Trace`); the noise family is
    a gamma with the pooled coefficient of variation of the residuals relative to the fit.
    Fitted values below zero are clipped to zero (a loader never gets faster with B).
    """
    if not isinstance(profiles, Mapping) or len(profiles) < 2:
        raise ValueError("profiles: fitting time per batch = a + b·B needs times at two or more batch sizes")
    xs, ys = [], []
    for B, times in profiles.items():
        if not is_int(B) or B < 1:
            raise ValueError(f"profiles: batch sizes must be integers >= 1, got {B!r}")
        t = np.asarray(getattr(times, "times", times), dtype=np.float64).reshape(-1)
        if t.size == 0 or not np.all(np.isfinite(t) & (t > 0)):
            raise ValueError(f"profiles[{B}]: times must be a non-empty array of finite numbers > 0")
        xs.append(np.full(t.size, float(B)))
        ys.append(t)
    x, y = np.concatenate(xs), np.concatenate(ys)
    a, b, _, _ = affine_fit(x, y)
    a, b = max(a, 0.0), max(b, 0.0)
    fit = a + b * x
    cv = float(np.sqrt(np.mean(((y - fit) / fit) ** 2)))
    return BatchTime(a, b, "gamma", cv) if cv > 0 else BatchTime(a, b)
