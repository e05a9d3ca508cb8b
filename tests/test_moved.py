"""echosim 0.1's module paths: each resolves every public name it had, with a
DeprecationWarning naming where it moved; echosim.datasets is a real, supported module."""

import importlib
import sys
import warnings

import numpy as np
import pytest

from echosim._moved import COMPAT, MOVED, NAMES_0_1


def fresh_import(name):
    """Import a 0.1 path as a user's first import does (its warning is issued on import)."""
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=f"^{name} moved to .* in echosim 0.2; the old path goes away in 0.3"):
        return importlib.import_module(name)


def test_every_0_1_path_is_covered():
    assert set(NAMES_0_1) == set(MOVED)
    assert all((m, n) in {(m, n) for m, names in NAMES_0_1.items() for n in names} for m, n in COMPAT)


@pytest.mark.parametrize("module", sorted(NAMES_0_1))
def test_each_0_1_path_resolves_every_name_it_had_with_its_warning(module):
    mod = fresh_import(module)
    missing = [n for n in NAMES_0_1[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lost {missing}"
    assert set(NAMES_0_1[module]) <= set(dir(mod))
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        getattr(mod, "nope")


def test_from_imports_of_the_0_1_names_work():
    sys.modules.pop("echosim.results", None)
    with pytest.warns(DeprecationWarning, match="echosim.results moved"):
        from echosim.results import Results, load, merge  # the broken promise of issue 28
    from echosim.experiments import tables

    assert load is tables.load and merge is tables.merge and Results is tables.Results


def test_the_adapters_keep_0_1_meanings(tmp_path):
    from echosim.experiments.config import parse_config
    from echosim.experiments.assemble import execute_run
    from echosim.training.losses import LOSSES

    exp = fresh_import("echosim.experiment")
    assert exp.LOSS_CODES == {name: row.code for name, row in LOSSES.items()}
    assert {"squared", "logistic", "softmax"} <= set(exp.LOSS_CODES)
    assert (exp.AUTO_LOG_ALL, exp.AUTO_LOG_POINTS) == (1000, 400)
    opt = fresh_import("echosim.optimizers")
    assert {"MinibatchSGD", "EchoedGD", "EchoedSGD", "EchoedNesterov", "EchoedProx"} <= set(opt.OPTIMIZERS)
    assert opt.OPTIMIZERS["EchoedGD"] is opt.EchoedGD
    prof = fresh_import("echosim.profiling")
    assert set(prof.FAMILIES) >= {"exponential", "gamma", "lognormal"}
    fig = fresh_import("echosim.figures")
    lrs = fig.paper_lr_grid()
    assert len(lrs) == 61 and np.isclose(lrs[0], 0.01) and np.isclose(lrs[-1], 10.0)
    conf = fig.load_figure_config("greedy_vs_fixed", quick=True)
    assert conf.runs and callable(fig.speedup_vs_R_data)
    with pytest.raises(ValueError, match="^cfg: in echosim 0.2 a figure's config is a sweep config"):
        fig.greedy_vs_fixed_data({"problem": {}})
    res = fresh_import("echosim.results")
    spec = parse_config({"problem": {"kind": "logistic", "dim": 3}, "optimizer": {"lr": 1.0, "batch_size": 4},
                         "sweep": {"n_batches": 10}}).runs[0]
    payload = execute_run(spec)
    path = res.write_shard(tmp_path, payload["summary"], payload["curves"])
    assert res.finished_ids(tmp_path) == {spec.run_id} and res.shard_path(tmp_path, spec.run_id) == path
    summary, curves = res.read_shard(path)
    assert summary["run_id"] == spec.run_id
    np.testing.assert_array_equal(curves["risk"], payload["curves"]["risk"])
    assert res.read_failure(tmp_path, spec.run_id) is None and res.SHARDS == "packs"
    sw = fresh_import("echosim.sweep")
    from echosim.pipeline.model import Pipeline

    sched, n = sw.simulate_budget(Pipeline(3.0, policy="greedy", max_echo=4), 50.0, seed=1)
    assert 0 < n <= sched.n_steps and sw.truncate_schedule(sched, n).n_steps == n
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert sw.results.load is res.load


def test_datasets_is_a_real_supported_module_without_a_warning():
    import subprocess

    code = ("import warnings; warnings.simplefilter('error'); import echosim, echosim.datasets as d; "
            "from echosim.datasets import load_dataset, LOSSES; "
            "print(d.__file__.endswith('datasets.py'), d.__name__, echosim.datasets is d, d.load_arrays.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "echosim.datasets", "True", "echosim.data.datasets"]


def test_echosim_plots_keeps_its_0_1_names():
    """echosim.plots is a package in 0.1 and now: the names 0.1 exported from it still resolve."""
    import echosim.plots as plots

    for name in ("X_AXES", "X_LABELS", "Y_COLUMNS", "draw_echo_panel", "median_band", "overlay", "bound_curve",
                 "plot_results", "risk_vs_time_data", "convergence_vs_echo_data"):
        assert hasattr(plots, name), name
