"""Sizes that cannot fit: refused while the config is validated, in one line naming the key and the limit,
before anything is allocated or run (each case here answers in milliseconds)."""

import pytest

from echosim.experiments.config import parse_config
from echosim.experiments.limits import MAX_RUN_WORK, MAX_RUNS
from echosim.experiments.schema import MAX_GRID_VALUES, ConfigError

HUGE = 10**12


def cfg(pipeline=None, **changes):
    data = {
        "problem": {"kind": "logistic", "dim": 3},
        "optimizer": {"lr": 0.5, "batch_size": 4, "echo": 2},
        "sweep": {"n_batches": 20},
    }
    if pipeline is not None:
        data["pipeline"] = {"arrival": 8.0, **pipeline}
        if pipeline.get("policy") in ("greedy", "sync"):
            data["optimizer"].pop("echo")
    for path, value in changes.items():
        section, key = path.split("__")
        if value is None:
            data[section].pop(key)
        else:
            data[section][key] = value
    return data


@pytest.mark.parametrize("data, key, limit", [
    (cfg(sweep__repetitions=10**9), "sweep.repetitions", f"{MAX_RUNS:,}"),
    (cfg(optimizer__lr=[0.1, 0.2], sweep__repetitions=MAX_RUNS), "sweep.repetitions", f"{MAX_RUNS:,}"),
    (cfg(optimizer__echo=HUGE), "optimizer.echo", f"{MAX_RUN_WORK:.0e}"),
    (cfg(optimizer__lr={"start": 0.1, "stop": 1, "per_decade": 1e12}), "optimizer.lr", f"{MAX_GRID_VALUES:,}"),
    (cfg(optimizer__lr={"start": 0.1, "stop": 1, "num": 10**9}), "optimizer.lr", f"{MAX_GRID_VALUES:,}"),
    (cfg(problem__dim=HUGE), "problem.dim", "at most"),
    (cfg(sweep__n_batches=HUGE), "sweep.n_batches", "memory"),
    (cfg(optimizer__batch_size=HUGE), "optimizer.batch_size", "memory"),
    (cfg({"policy": "greedy"}, sweep__n_batches=HUGE), "sweep.n_batches", "memory"),
    (cfg({"policy": "greedy", "workers": HUGE}), "pipeline.workers", "at most"),
    (cfg({"policy": "fixed"}, optimizer__echo=HUGE), "optimizer.echo", "memory"),
    (cfg({"policy": "greedy"}, sweep__n_batches=None, sweep__time_budget=1e300), "sweep.time_budget", "memory"),
    (cfg({"policy": "greedy", "max_echo": HUGE}, sweep__n_batches=None, sweep__time_budget=1e300),
     "sweep.time_budget", "memory"),
])
def test_a_config_that_cannot_fit_is_refused_in_one_line_naming_the_key_and_the_limit(data, key, limit):
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    msg = str(err.value)
    assert "\n" not in msg
    assert key in msg and limit in msg


def test_a_huge_greedy_max_echo_is_harmless_and_accepted_with_one_warning():
    """max_echo bounds K_t; the steps a run takes come from the loader's speed (about R per batch)."""
    from echosim.experiments.schema import ConfigWarning

    with pytest.warns(ConfigWarning, match="pipeline.max_echo: .* acts as no cap") as seen:
        conf = parse_config(cfg({"policy": "greedy", "max_echo": HUGE}))
    assert len(conf.runs) == 1 and len(seen) == 1


def test_max_batch_size_is_the_largest_batch_a_sweep_takes():
    from echosim.experiments.config import parse_config
    from echosim.experiments.limits import max_batch_size

    top = max_batch_size()  # one feature, float32, one fresh batch, the fewest log points: the smallest run

    def config(B):
        return {"problem": {"kind": "least_squares", "dim": 1}, "optimizer": {"lr": 0.1, "batch_size": B},
                "sweep": {"n_batches": 1, "dtype": "float32", "window": 1, "log_points": 1}}

    assert len(parse_config(config(top)).runs) == 1
    with pytest.raises(ConfigError, match="^optimizer.batch_size: .* of memory"):
        parse_config(config(top + 1))
    assert max_batch_size(n_features=100, itemsize=8) < top
