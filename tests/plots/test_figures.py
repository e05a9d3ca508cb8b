"""The docs figures: each data step on a tiny config, and make_figures(quick=True) end to end."""

import copy
import math

import numpy as np
import pytest

import theory
from echosim import EchoedGD, run
from echosim.plots import figures as F
from echosim.training.problems import Dataset


def tiny(name, **over):
    """The quick config of `name`, with some sections further overridden."""
    cfg = copy.deepcopy(F.load_figure_config(name, quick=True))
    for section, values in over.items():
        cfg[section].update(values)
    return cfg


def assert_band(med, lo, hi):
    med, lo, hi = (np.asarray(v, dtype=float) for v in (med, lo, hi))
    assert not np.isnan(med).any() and not np.isnan(lo).any() and not np.isnan(hi).any()
    assert np.all(lo <= med) and np.all(med <= hi)


# --------------------------------------------------------------------------- configs


def test_every_config_loads_full_and_quick():
    for name in F.FIGURES:
        for quick in (False, True):
            cfg = F.load_figure_config(name, quick=quick)
            assert "quick" not in cfg


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ValueError, match="figure must be one of"):
        F.load_figure_config("nope")
    text = (F.CONFIG_DIR / "speedup_vs_R.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("lr = 0.8", "lr = 0.8\nlearning_rate = 1"))
    with pytest.raises(ValueError, match="learning_rate"):
        F.load_figure_config("speedup_vs_R", path=bad)
    bad.write_text(text.replace("target = {seeds = 2}", "target = {seedz = 2}"))
    with pytest.raises(ValueError, match="seedz"):
        F.load_figure_config("speedup_vs_R", quick=True, path=bad)


def test_make_figures_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="only"):
        F.make_figures(tmp_path, quick=True, only="figure9")
    with pytest.raises(ValueError, match="workers"):
        F.make_figures(tmp_path, quick=True, workers=0)


def test_paper_grid():
    g = F.paper_lr_grid()
    assert len(g) == 61 and g[0] == pytest.approx(0.01) and g[-1] == pytest.approx(10.0)
    np.testing.assert_allclose(g[1:] / g[:-1], 10 ** (1 / 20))


# --------------------------------------------------------------------------- figure 1


def test_step_logged_stream_is_echoed_gd():
    # K steps per fresh batch, logged per step, ends where echo=K ends (same batches).
    rng = np.random.default_rng(1)
    X = rng.standard_normal((50, 3))
    y = np.where(X @ np.ones(3) + rng.standard_normal(50) > 0, 1.0, -1.0)
    ds = Dataset(X, y, l2=0.1)
    K, T, B = 3, 37, 8
    a = run(F._StepLogged(ds, K), EchoedGD(0.3), batch_size=B, echo=1, n_batches=K * T, seed=5, log="all")
    b = run(ds, EchoedGD(0.3), batch_size=B, echo=K, n_batches=T, seed=5, log="all")
    np.testing.assert_allclose(a.w, b.w, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(a.risk[::K], b.risk, rtol=1e-12)


def test_convergence_vs_echo_data_tiny():
    cfg = tiny("convergence_vs_echo",
               optimizer={"batch_sizes": [32, 2048], "echoes": [1, 2], "max_batches": [300, 40],
                          "max_steps": [600, 80]},
               tuning={"coarse_every": 15, "coarse_seeds": 1, "window": 1})
    F._fig1_problem(cfg)
    data = F.convergence_vs_echo_data(cfg, workers=1)
    grid = F.paper_lr_grid()
    assert [p["B"] for p in data["panels"]] == [32, 2048]
    for p in data["panels"]:
        assert p["KT"].shape == (2,) and len(p["window"]) == 2
        ok = np.isfinite(p["KT"])
        assert ok.any(), "the tiny config should converge somewhere"
        # the tuned lr is a value of the paper's grid, inside the searched window
        for j in np.nonzero(ok)[0]:
            i = int(p["lr_index"][j])
            assert p["lr"][j] == grid[i]
            assert p["window"][j][0] <= i <= p["window"][j][1]
        assert_band(p["KT"][ok], p["KT_low"][ok], p["KT_high"][ok])
        assert_band(p["BT"][ok], p["BT_low"][ok], p["BT_high"][ok])
        # samples = B × fresh batches, fresh batches = ceil(steps / K) (median is a seed's value)
        np.testing.assert_array_equal(p["BT"][ok], p["B"] * np.ceil(p["KT"][ok] / p["K"][ok]))
        assert np.all(p["KT"][ok] >= 1) and not np.isnan(p["KT"]).any()
    fig = F.draw_convergence_vs_echo(data)
    assert len(fig.axes) >= 2


# --------------------------------------------------------------------------- figure 2


def test_bounds_vs_simulation_data_tiny():
    cfg = tiny("bounds_vs_simulation", runs={"n_batches": 60, "sgd_batch_sizes": [16], "echoes": [1, 4],
                                             "seeds": 3, "log_points": 8})
    data = F.bounds_vs_simulation_data(cfg)
    assert len(data["panels"]) == 4
    for p in data["panels"]:
        for c in p["curves"]:
            m, b = c["median"], c["bound"]
            assert_band(m["y"], m["y_low"], m["y_high"])
            np.testing.assert_array_equal(b["x"], m["x"])
            assert np.all(m["x"] > 0) and m["x"][-1] == 60
            # the bounds hold for the mean over seeds, and are loose by a wide margin
            assert np.all(c["mean"] <= b["y"]), p["title"]
    F.draw_bounds_vs_simulation(data)


# --------------------------------------------------------------------------- figures 3 and 4


def test_speedup_vs_R_data_tiny():
    cfg = tiny("speedup_vs_R", pipeline={"R": [1.0, 2.0, 8.0]}, target={"seeds": 3})
    data = F.speedup_vs_R_data(cfg)
    R = data["R"]
    assert len(data["loaders"]) == 4
    for (name, e), (med, lo, hi) in data["speedup"].items():
        assert med.shape == R.shape
        assert_band(med, lo, hi)
        assert np.all(med > 0)
    for e in data["echoes"]:
        # deterministic loader: Choi et al.'s max(t_up, e·t_down) model with the measured
        # fresh-batch ratio bounds the simulation (start-up adds at most one batch)
        med = data["speedup"][("deterministic", e)][0]
        model = data["model"][e]
        assert np.all(med <= model * 1.15 + 1e-9), (med, model)
        # at R = 1 the loader is not the bottleneck: echoing cannot beat fresh_ratio / e
        assert med[0] <= data["fresh_ratio"][e] / e * 1.15
        # and the ideal min(e, R) is an upper bound whenever echoes are worth at most a fresh batch
        if data["fresh_ratio"][e] <= e:
            assert np.all(model <= data["ideal"][e] + 1e-9)
    F.draw_speedup_vs_R(data)


def test_greedy_vs_fixed_data_tiny():
    cfg = tiny("greedy_vs_fixed", target={"seeds": 2})
    data = F.greedy_vs_fixed_data(cfg)
    assert data["policies"][0] == "sync"
    for name in data["loaders"]:
        med, lo, hi = data["speedup"][(name, "sync")]
        assert med == lo == hi == 1.0  # sync against itself
        for pol in data["policies"]:
            s = data["speedup"][(name, pol)]
            assert s[1] <= s[0] <= s[2] and not math.isnan(s[0])
        h = data["K_hist"][name]
        assert h[0] == 0 and len(h) == data["max_echo"] + 1  # 1 <= K_t <= max_echo
        assert 1.0 <= data["mean_echo"][name] <= data["max_echo"]
    F.draw_greedy_vs_fixed(data)


# --------------------------------------------------------------------------- figure 5


def test_predicted_vs_simulated_data_tiny():
    cfg = tiny("predicted_vs_simulated", optimizer={"batch_sizes": [64, 4096], "echoes": [1, 2, 4]},
               target={"seeds": 2})
    data = F.predicted_vs_simulated_data(cfg)
    pred, sim = data["predicted"], data["simulated"]
    assert pred.shape == (2, 3) and sim.shape == (2, 3, 3)
    np.testing.assert_allclose(pred[:, 0], 1.0)
    np.testing.assert_allclose(sim[:, 0, 0], 1.0)
    assert_band(sim[..., 0], sim[..., 1], sim[..., 2])
    # the theory's fresh batches fall with K, and predicted speedups never exceed min(K, R)
    assert np.all(np.diff(data["T_eps"], axis=1) <= 0)
    K = np.asarray(data["K"], dtype=float)
    assert np.all(pred <= np.minimum(K, data["R"]) + 1e-9)
    assert np.all(np.isfinite(data["times"])), "every run reaches ε within the theory's T_ε"
    F.draw_predicted_vs_simulated(data)


# --------------------------------------------------------------------------- end to end


def test_make_figures_quick_writes_every_png(tmp_path):
    written = F.make_figures(tmp_path / "figs", quick=True, workers=2)
    assert set(written) == set(F.FIGURES)
    for name, path in written.items():
        assert path.exists() and path.suffix == ".png" and path.stat().st_size > 10_000, name


def test_importing_figures_does_not_import_matplotlib():
    import subprocess
    import sys

    code = "import sys, echosim.plots.figures; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_theory_model_used_in_figure_3_is_choi():
    # sanity of the model curve: ideal echoes give min(e, R) for R >= 1
    np.testing.assert_allclose(theory.echo_speedup(np.array([1.0, 2.0, 8.0]), 4, fresh_ratio=4.0), [1.0, 2.0, 4.0])
