"""Getting processes ready: the warm-up compiles what a sweep uses, on two cores when it has two."""

import io
import multiprocessing
import os

import numpy as np
import pytest

from echosim.experiments import executors
from echosim.experiments.config import load_config, parse_config

RUNS = {"optimizer": {"lr": [0.1], "batch_size": 4, "echo": [1, 2]}, "sweep": {"n_batches": 5}}
KERNEL = "echoed_gd:logistic:wide"  # the default sweep's optimizer kernel


def test_the_warm_up_compiles_the_parts_the_configs_runs_use(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", X=rng.standard_normal((40, 3)), y=rng.integers(0, 3, 40))
    softmax = parse_config({"problem": {"kind": "dataset", "path": str(tmp_path / "d.npz"), "loss": "softmax"},
                            **RUNS})
    no_pipeline = parse_config({"problem": {"kind": "least_squares", "dim": 3}, "optimizer": RUNS["optimizer"],
                                "sweep": {"n_batches": 5, "dtype": "float32"}})
    assert executors._kernel_parts(softmax) == (("float64",), ["echoed_gd:softmax:rows"])
    assert executors._kernel_parts(no_pipeline) == (("float32",), ["echoed_gd:squared:wide", "draws"])
    default = (("float64",), ["echoed_gd:logistic:wide", "draws", "pipeline"])
    assert executors._kernel_parts(load_config(None)) == default == executors._kernel_parts(None)
    mixed = parse_config({"problem": {"kind": "logistic", "dim": 3}, "optimizer": {
        "method": ["echoed_adam", "echoed_heavy_ball", "echoed_adam"], "lr": 0.1, "batch_size": 4, "echo": 2},
        "sweep": {"n_batches": 5, "window": 1}})
    assert executors._kernel_parts(mixed)[1] == ["echoed_adam:logistic:wide", "echoed_heavy_ball:logistic:wide",
                                                 "draws"]  # one kernel per method and loss, each once


@pytest.mark.parametrize("workers, cached", [(1, False), (2, False), (2, True)])
def test_with_two_workers_a_helper_compiles_draws_and_pipeline_alongside(workers, cached, tmp_path, monkeypatch):
    """...unless Numba's cache already holds them: then forking a helper would only cost time."""
    log = tmp_path / "compiled"

    def record(parts, dtypes):  # forked into the helper too: each process appends its own line
        with open(log, "a") as f:
            f.write(f"{os.getpid()} {','.join(parts)}\n")

    monkeypatch.setattr(executors, "_compile", record)
    monkeypatch.setattr(executors, "_cached", lambda part: cached)
    executors.warm_up(load_config(None), workers)
    lines = [line.split() for line in log.read_text().splitlines()]
    me = str(os.getpid())
    if workers == 1 or cached:
        assert lines == [[me, KERNEL], [me, "draws,pipeline"]]
    else:
        # the helper compiles draws and pipeline while this process compiles "many"; this
        # process loads them only after the helper has finished (its line comes first)
        first_two = {parts: pid for pid, parts in lines[:2]}
        assert first_two.keys() == {KERNEL, "draws,pipeline"}
        assert first_two[KERNEL] == me and first_two["draws,pipeline"] != me
        assert lines[2:] == [[me, "draws,pipeline"]]
    assert multiprocessing.active_children() == []  # the helper is gone


def test_the_warm_up_still_compiles_everything_when_the_helper_fails(tmp_path, monkeypatch):
    log = tmp_path / "compiled"

    def record(parts, dtypes):
        if os.getpid() != me:
            os._exit(3)  # the helper dies before compiling anything
        with open(log, "a") as f:
            f.write(",".join(parts) + "\n")

    me = os.getpid()
    monkeypatch.setattr(executors, "_compile", record)
    monkeypatch.setattr(executors, "_cached", lambda part: False)
    executors.warm_up(load_config(None), 2)
    assert log.read_text().splitlines() == [KERNEL, "draws,pipeline"]


def test_a_cache_filled_from_this_source_counts_as_cached_and_an_empty_one_does_not(tmp_path):
    import subprocess
    import sys

    code = ("from echosim.experiments.executors import _cached, _compile; k = 'echoed_gd:squared:rows'; "
            "before = _cached('draws'), _cached(k); _compile(['draws', k], ('float64',)); "
            "print(*before, _cached('draws'), _cached(k), _cached('pipeline'), _cached('echoed_adam:squared:rows'))")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    # each specialisation counts on its own: another method of the same kernel is not cached
    assert out.stdout.split() == ["False", "False", "True", "True", "False", "False"]


@pytest.mark.parametrize("cached", [False, True])
def test_the_warm_up_says_so_when_it_must_compile(cached, monkeypatch):
    monkeypatch.setattr(executors, "_compile", lambda parts, dtypes: None)
    monkeypatch.setattr(executors, "_cached", lambda part: cached)
    told = io.StringIO()
    executors.warm_up(load_config(None), 1, announce=told)
    said = told.getvalue()
    if cached:
        assert said == ""
    else:  # one line naming what compiles (the default sweep: echoed GD on the logistic loss, ...)
        assert said.count("\n") == 1 and said.startswith("compiling Numba kernels (float64): ")
        assert "the echoed_gd optimizer on the logistic loss" in said and "the pipeline simulator" in said
        assert "once per machine" not in said and "until echosim or Numba is upgraded" in said

