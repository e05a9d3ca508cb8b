"""Loader time that depends on B: the service time at B, its validation, the fit of
(a, b) from profiles at several batch sizes, and its use by sweeps."""

import numpy as np
import pytest

from echosim.experiments.config import parse_config
from echosim.pipeline import Pipeline, simulate
from echosim.pipeline.batch_time import BatchTime, fit_batch_time
from echosim.pipeline.service_times import Gamma


def test_the_mean_is_affine_in_B_and_the_noise_family_is_kept():
    bt = BatchTime(fixed=2.0, per_example=0.01, noise="gamma", cv=0.3)
    for B in (1, 100, 5000):
        d = bt.at(B)
        assert isinstance(d, Gamma) and d.mean == pytest.approx(2.0 + 0.01 * B) and d.cv == 0.3
    assert BatchTime(1.0, 0.0).at(7).mean == 1.0  # a fixed cost only


@pytest.mark.parametrize("kwargs, field", [
    (dict(fixed=-1.0, per_example=0.1), "affine.fixed"),
    (dict(fixed=0.0, per_example=0.0), "fixed \\+ per_example"),
    (dict(fixed=1.0, per_example=0.1, noise="pareto"), "affine.noise"),
    (dict(fixed=1.0, per_example=0.1, noise="gamma"), "affine.cv is required"),
    (dict(fixed=1.0, per_example=0.1, cv=0.5), "affine.cv applies only"),
])
def test_bad_parameters_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        BatchTime(**kwargs)


def test_the_fit_recovers_a_and_b_from_profiles_at_two_batch_sizes():
    truth = BatchTime(fixed=3.0, per_example=0.002, noise="gamma", cv=0.2)
    rng = np.random.default_rng(0)
    n = 4000
    profiles = {B: truth.at(B).sample(rng, n) for B in (64, 2048)}
    fit = fit_batch_time(profiles)
    # sample means have standard errors cv·mean/√n; a and b inherit them linearly
    se = {B: 0.2 * truth.mean_at(B) / np.sqrt(n) for B in profiles}
    b_se = np.hypot(se[64], se[2048]) / (2048 - 64)
    assert abs(fit.per_example - 0.002) < 5 * b_se
    assert abs(fit.fixed - 3.0) < 5 * (se[64] + 64 * b_se)
    assert fit.noise == "gamma" and abs(fit.cv - 0.2) < 0.02
    with pytest.raises(ValueError, match="two or more batch sizes"):
        fit_batch_time({64: profiles[64]})


def test_a_sweep_over_B_gives_each_run_the_loader_time_of_its_batch_size():
    conf = parse_config({"problem": {"kind": "logistic", "dim": 3},
                         "pipeline": {"arrival": {"kind": "affine", "fixed": 4.0, "per_example": 0.004,
                                                  "noise": "gamma", "cv": 0.5}, "policy": "sync"},
                         "optimizer": {"lr": 1.0, "batch_size": [4, 2048]}, "sweep": {"n_batches": 10}})
    means = {r.optimizer["batch_size"]: r.pipeline["arrival_mean"] for r in conf.runs}
    assert means == {4: pytest.approx(4.016), 2048: pytest.approx(12.192)}
    assert len({r.pipeline_seed for r in conf.runs}) == 2  # different loaders, different loader seeds


def test_a_deterministic_affine_loader_sets_the_synchronous_throughput():
    for B in (100, 1000):
        pipe = Pipeline(BatchTime(2.0, 0.01).at(B), policy="sync", step_time=1.0)
        s = simulate(pipe, n_batches=400, seed=0).summary()
        assert s["throughput"] == pytest.approx(1.0 / max(2.0 + 0.01 * B, 1.0), rel=0.01)  # start-up: one batch
