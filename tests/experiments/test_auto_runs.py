"""Policy "auto" in sweeps: the config's keys, its bad input, and runs through the
coupled driver with the caps' summary in the result."""

import numpy as np
import pytest

from echosim.experiments.assemble import execute_group, execute_run, group_by_learning_rate
from echosim.experiments.config import parse_config
from echosim.experiments.schema import ConfigError
from echosim.experiments.specs import build_optimizer, build_pipeline, build_problem


def _config(**pipeline):
    pipe = {"arrival": 6.0, "policy": "auto", "max_echo": 16, **pipeline}
    if pipe["policy"] == "fixed":
        del pipe["max_echo"]
    return {"problem": {"kind": "least_squares", "dim": 5}, "pipeline": pipe,
            "optimizer": {"lr": [0.1, 0.3], "batch_size": 32},
            "sweep": {"n_batches": 300, "lr_extend": 0}}


def test_auto_takes_max_echo_and_its_options_and_no_echo():
    conf = parse_config(_config(window=6, alpha=0.05), source="<test>")
    spec = conf.runs[0]
    assert spec.echo is None and {spec.pipeline[k] for k in ("window", "alpha", "max_echo")} == {6, 0.05, 16}
    p = build_pipeline(spec.pipeline, spec.echo)
    assert (p.policy, p.window, p.alpha, p.max_echo) == ("auto", 6, 0.05, 16)
    default = parse_config(_config(), source="<test>").runs[0].pipeline
    assert (default["window"], default["alpha"], default["min_effect"], default["start"]) == (8, 0.1, 0.05, 1)
    greedy = parse_config(_config(policy="greedy"), source="<test>").runs[0].pipeline
    assert "window" not in greedy and "alpha" not in greedy  # greedy's run ids do not change


@pytest.mark.parametrize("pipeline, sweep, key", [
    ({"window": 1}, {}, "pipeline.window"),
    ({"window": 2.5}, {}, "pipeline.window"),
    ({"alpha": 0.0}, {}, "pipeline.alpha"),
    ({"alpha": 0.9}, {}, "pipeline.alpha"),
    ({"start": 0}, {}, "pipeline.start"),
    ({"policy": "fixed", "window": 4}, {}, "pipeline.window"),
    ({}, {"time_budget": 100.0}, "sweep.time_budget"),
    ({}, {"max_steps": 100}, "sweep.max_steps"),
])
def test_bad_auto_config_names_the_key(pipeline, sweep, key):
    data = _config(**pipeline)
    data["sweep"].update(sweep)
    if "time_budget" in sweep:
        del data["sweep"]["n_batches"]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        parse_config(data, source="<test>")


def test_a_one_step_method_cannot_run_under_auto():
    data = _config()
    data["optimizer"]["method"] = "minibatch_sgd"
    with pytest.raises(ConfigError, match="pipeline.policy"):
        parse_config(data, source="<test>")


def test_auto_runs_go_through_the_coupled_driver_and_record_the_caps():
    from echosim.training.runner import run_coupled

    conf = parse_config(_config(), source="<test>")
    specs = list(conf.runs)
    groups = group_by_learning_rate(specs)  # every lr its own schedule: a group each, to spread over workers
    assert [len(g) for g in groups] == [1] * len(specs) == [1, 1]
    for (spec,) in groups:
        (payload,) = execute_group([spec])
        alone = execute_run(spec)
        row = payload["summary"]
        assert row["status"] == "ok" and alone["summary"]["status"] == "ok"
        for k in ("final_risk", "final_time", "n_steps", "auto.caps", "auto.decisions", "schedule.mean_echo"):
            assert row[k] == alone["summary"][k], k
        np.testing.assert_array_equal(payload["curves"]["risk"], alone["curves"]["risk"])
        c = run_coupled(build_problem(spec.problem), build_optimizer(spec.optimizer),
                        build_pipeline(spec.pipeline, spec.echo), batch_size=32, n_batches=300, seed=spec.seed,
                        pipeline_seed=spec.pipeline_seed, quiet=True)
        assert row["auto.caps"] == c.summary()["caps"] and row["n_steps"] == c.schedule.n_steps
        assert row["mean_echo"] == pytest.approx(c.schedule.steps_per_batch.mean())
        assert row["auto.first_cap"] == 1  # it starts small, not at max_echo = 16
