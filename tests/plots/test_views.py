"""Plot data (median, quantile band, bound on the same x-axis) against NumPy; drawing writes files."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import theory
from echosim.plots.views import (bound_curve, convergence_vs_echo_data, draw_overlay, echo_counts, median_band,
                                 overlay, plot_results)


def synthetic_runs(n=20, T=30, seed=0):
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(n):
        b = np.arange(T + 1)
        risk = 1.0 / (1 + b) * rng.lognormal(0, 0.3, T + 1)
        runs.append({"batches": b, "steps": 4 * b, "samples": 8 * b, "risk": risk})
    return runs


def test_median_band_on_a_common_grid_is_numpy_median_and_quantiles():
    runs = synthetic_runs()
    d = median_band(runs, x="batches", q=(0.1, 0.9))
    Y = np.vstack([r["risk"] for r in runs])
    np.testing.assert_array_equal(d["x"], runs[0]["batches"])
    np.testing.assert_allclose(d["y"], np.median(Y, axis=0), rtol=1e-12)
    np.testing.assert_allclose(d["y_low"], np.quantile(Y, 0.1, axis=0), rtol=1e-12)
    np.testing.assert_allclose(d["y_high"], np.quantile(Y, 0.9, axis=0), rtol=1e-12)
    assert d["label"] == "median, 10–90% over 20 seeds" and d["n"] == 20
    assert median_band(runs[:1], label="K=4")["label"] == "K=4: median, 10–90% over 1 seed"


def test_different_x_grids_are_read_as_step_functions():
    a = {"time": np.array([0.0, 2.0, 4.0]), "risk": np.array([3.0, 2.0, 1.0]), "batches": np.arange(3)}
    b = {"time": np.array([0.0, 3.0, 5.0]), "risk": np.array([5.0, 4.0, 0.5]), "batches": np.arange(3)}
    d = median_band([a, b], x="time")
    np.testing.assert_array_equal(d["x"], [0, 2, 3, 4, 5])
    # at t = 3: a holds 2.0 (logged at 2), b is 4.0; at t = 5 only b has data (half of the runs)
    np.testing.assert_allclose(d["y"], [4.0, 3.5, 3.0, 2.5, 0.5])


def test_bound_curve_is_the_theory_function_at_the_runs_own_step():
    c = {"beta": 0.25, "rho": 1.0, "D": 2.0}
    T = np.array([10.0, 100.0, 1000.0])
    b = bound_curve(c, 64, T, lr=0.5, echo=4)
    np.testing.assert_allclose(b["y"], theory.echoed_gd_bound(**c, B=64, T=T, K=4, lr=0.5), rtol=1e-12)
    assert "η = 0.5" in b["label"] and b["reason"] == ""
    past = bound_curve(c, 64, T, lr=10.0, echo=4)  # lr > 1/β: no theorem covers the step, none is drawn
    assert len(past["y"]) == 0 and "1/β" in past["reason"]
    prox = bound_curve(c, 64, T, lr=0.5, echo=4, bound="echoed_prox_bound", lam=1.0)
    np.testing.assert_allclose(prox["y"], theory.echoed_prox_bound(**c, B=64, T=T, K=4, lam=1.0, inner_lr=0.5),
                               rtol=1e-12)
    agd = bound_curve(c, 64, T, lr=0.5, echo=4, bound="echoed_agd_bound")
    np.testing.assert_allclose(agd["y"], theory.echoed_agd_bound(**c, B=64, T=T, K=4, lr=0.5), rtol=1e-12)


def test_a_variable_echo_is_bounded_with_its_own_step_counts():
    c = {"beta": 0.25, "rho": 1.0, "D": 2.0}
    rng = np.random.default_rng(1)
    K_t = rng.integers(1, 9, size=(3, 40)).astype(float)
    T = np.array([1.0, 5.0, 17.0, 40.0])
    b = bound_curve(c, 64, T, lr=0.5, K_t=K_t)
    naive = [np.mean([theory.variable_echo_bound(**c, B=64, K_t=k[: int(t)], lr=0.5) for k in K_t]) for t in T]
    np.testing.assert_allclose(b["y"], naive, rtol=1e-12)
    # the mean K_t would understate the noise term (it has the sum of K_t², not of mean²)
    mean_K = bound_curve(c, 64, T, lr=0.5, echo=float(K_t.mean()))
    assert np.all(b["y"] > mean_K["y"])
    assert "only echoed GD" in bound_curve(c, 64, T, lr=0.5, K_t=K_t, bound="echoed_agd_bound")["reason"]


def test_echo_counts_reads_k_or_each_runs_k_t_off_the_log():
    const = [{"batches": np.arange(6), "steps": 3 * np.arange(6)} for _ in range(2)]
    assert echo_counts(const) == (3.0, None, "")
    var = [{"batches": np.array([0, 1, 1, 2, 3]), "steps": np.array([0, 1, 2, 4, 5])}]  # step logs within batch 1
    K, K_t, reason = echo_counts(var)
    assert K is None and reason == "" and K_t.tolist() == [[2.0, 2.0, 1.0]]
    coarse = [{"batches": np.array([0, 2, 4]), "steps": np.array([0, 3, 7])}]
    assert "skips fresh batches" in echo_counts(coarse)[2]


def test_overlay_compares_the_bound_with_the_mean_of_its_own_iterate_and_maps_each_x_axis():
    runs = synthetic_runs(5)
    for r in runs:
        r["risk_avg"] = 0.5 * r["risk"]
    c = {"beta": 1.0, "rho": 1.0, "D": 1.0}
    by_batches = overlay(runs, c, batch_size=8, echo=4, x="batches", lr=0.5)
    np.testing.assert_allclose(by_batches["mean"]["y"], np.mean([r["risk_avg"] for r in runs], axis=0), rtol=1e-12)
    assert by_batches["mean"]["label"].startswith("mean of the average iterate")
    by_steps = overlay(runs, c, batch_size=8, x="steps", lr=0.5)  # K read off the runs
    np.testing.assert_allclose(by_steps["bound"]["y"], by_batches["bound"]["y"], rtol=1e-12)
    np.testing.assert_array_equal(by_steps["bound"]["x"], 4 * by_batches["bound"]["x"][:])
    assert by_steps["median"]["label"].startswith("median")
    for r in runs:
        r["time"] = 8.0 * r["batches"]
    by_time = overlay(runs, c, batch_size=8, x="time", lr=0.5)
    np.testing.assert_allclose(by_time["bound"]["y"], by_batches["bound"]["y"], rtol=1e-12)
    for method, hyper in (("echoed_sgd", {"sub_batch": 2}), ("echoed_nesterov", {"momentum": 0.9})):
        none = overlay(runs, c, batch_size=8, x="batches", lr=0.5, method=method, hyper=hyper)
        assert len(none["bound"]["x"]) == 0 and "no theorem" in none["bound"]["reason"], method
    assert len(overlay(runs, c, batch_size=8, lr=0.5, method="echoed_nesterov",
                       hyper={"momentum": "nesterov"})["bound"]["y"]) > 0


def test_median_band_accepts_trajectories_and_curves_tables():
    from echosim import EchoedGD, LeastSquares, run

    p = LeastSquares(dim=3)
    trajs = [run(p, EchoedGD(0.1), batch_size=4, echo=2, n_batches=20, seed=s) for s in range(3)]
    d = median_band(trajs, x="steps")
    np.testing.assert_allclose(d["y"], np.median([t.risk for t in trajs], axis=0), rtol=1e-12)
    rows = pd.concat([pd.DataFrame({"run_id": f"r{i}", "batches": t.batches, "steps": t.steps, "risk": t.risk})
                      for i, t in enumerate(trajs)])
    np.testing.assert_allclose(median_band(rows, x="steps")["y"], d["y"], rtol=1e-12)
    with pytest.raises(ValueError, match="x must be"):
        median_band(trajs, x="epochs")
    with pytest.raises(ValueError, match="time"):
        median_band(trajs, x="time")


def test_convergence_vs_echo_data_and_drawing(tmp_path):
    tuned = pd.DataFrame({"optimizer.batch_size": [4, 4, 4, 64, 64, 64], "optimizer.echo": [1, 2, 4] * 2,
                          "optimizer.lr": [1.0, 0.5, 0.25, 2.0, 2.0, 2.0],
                          "conv_steps": [10.0, 20, 40, 30, 32, np.inf], "conv_samples": [40.0, 40, 40, 1920, 1024, np.inf],
                          "conv_time": [80.0, 80, 90, 240, 130, np.inf], "conv_batches": [10.0, 10, 10, 30, 16, np.inf]})
    panels = convergence_vs_echo_data(tuned)
    assert [p["B"] for p in panels] == [4, 64]
    np.testing.assert_array_equal(panels[1]["converged"], [True, True, False])
    from echosim.plots.views import draw_convergence_vs_echo

    from matplotlib.figure import Figure

    fig = draw_convergence_vs_echo(panels)
    assert isinstance(fig, Figure) and len(fig.axes) >= 2


def test_draw_overlay_on_an_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.subplots()
    runs = synthetic_runs(4)
    for r in runs:
        r["risk_avg"] = r["risk"]
    draw_overlay(ax, overlay(runs, {"beta": 1.0, "rho": 1.0, "D": 1.0}, batch_size=8, echo=4, lr=0.5), target=0.05)
    labels = [line.get_label() for line in ax.lines]
    assert any(label.startswith("median, 10–90%") for label in labels)
    assert any(label.startswith("bound") for label in labels)


def test_plot_results_from_a_results_directory(tmp_path):
    from echosim.experiments.config import parse_config
    from echosim.experiments.sweep import run_sweep

    conf = parse_config({"problem": {"kind": "logistic", "dim": 3},
                         "pipeline": {"arrival": 3.0},
                         "optimizer": {"lr": [1.0, 3.0], "batch_size": [4, 32], "echo": [1, 2]},
                         "sweep": {"n_batches": 80, "repetitions": 2}})
    run_sweep(conf, out=tmp_path, workers=1, progress=False)
    files = plot_results(tmp_path, formats=("png",))
    assert sorted(f.name for f in files) == ["convergence_vs_echo.png", "risk_vs_time.png"]
    with pytest.raises(ValueError, match="format"):
        plot_results(tmp_path, formats=("gif",))


def test_drawing_never_switches_the_matplotlib_backend():
    code = ("import matplotlib; matplotlib.use('svg'); import numpy as np; import pandas as pd\n"
            "from echosim.plots import figures, views\n"
            "tuned = pd.DataFrame({'optimizer.batch_size': [4, 4], 'optimizer.echo': [1, 2], 'optimizer.lr': [1.0, 0.5],"
            " 'conv_steps': [10.0, 20], 'conv_samples': [40.0, 40], 'conv_time': [80.0, 80], 'conv_batches': [10.0, 10]})\n"
            "fig = views.draw_convergence_vs_echo(views.convergence_vs_echo_data(tuned))\n"
            "print(type(fig).__name__, matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["Figure", "svg"]
    from pathlib import Path

    source = "".join(p.read_text() for p in (Path(__file__).parents[2] / "echosim" / "plots").glob("*.py"))
    assert "matplotlib.use(" not in source


def test_importing_plots_does_not_import_matplotlib():
    code = "import sys, echosim.plots, echosim.experiments.sweep, echosim.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
