"""The command line in-process: every subcommand, --help everywhere, and bad input → one line, exit 2."""

import errno
import io
import json
import os
import sys
import textwrap

import pytest

import theory
from echosim.cli import main

TINY = textwrap.dedent("""
    [problem]
    kind = "logistic"
    dim = 3
    [pipeline]
    arrival = {kind = "exponential", mean = 3.0}
    [optimizer]
    lr = [1.0, 3.0]
    batch_size = 8
    echo = [1, 2, 4]
    [sweep]
    n_batches = 60
    repetitions = 2
    name = "cli"
""")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    cfg = d / "tiny.toml"
    cfg.write_text(TINY)
    return cfg


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory):
    return tmp_path_factory.mktemp("cli-store")


@pytest.fixture(scope="module")
def swept(tiny, cli_store, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    rc = main(["sweep", str(tiny), "--out", str(out), "--store", str(cli_store), "--workers", "1", "--quiet",
               "--no-plot"])
    assert rc == 0
    return out


def one_line_error(capsys, rc_or_exc, *needles):
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc_or_exc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def call(argv):
    """main(argv) → exit status, including argparse's SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_sweep_prints_the_tuned_table_and_resumes(tiny, swept, cli_store, capsys):
    rc = main(["sweep", str(tiny), "--out", str(swept), "--store", str(cli_store), "--workers", "2", "--quiet",
               "--no-plot"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "(0 run now, " in out and " resumed)" in out
    assert "lr*" in out and "T to target" in out and "KT steps" in out and "BT samples" in out
    assert "wall-clock" in out and "regime check" in out


def test_dry_run_prints_the_number_of_runs_and_an_estimate(tiny, tmp_path, capsys):
    rc = main(["sweep", str(tiny), "--dry-run", "--out", str(tmp_path / "x"), "--set", "sweep.repetitions=3"])
    out = capsys.readouterr().out
    assert rc == 0 and "18 runs" in out and "estimated time" in out and "cost model" in out
    assert not (tmp_path / "x").exists()  # a dry run writes nothing


def test_run_prints_one_summary(capsys):
    rc = main(["run", "--n-batches", "40", "--batch-size", "16", "--echo", "2", "--lr", "3"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "status ok" in out and "K=2" in out
    for label in ("target:", "loss <= (1 + 0.01) F*", "reached:", "final risk:", "steps:", "time units"):
        assert label in out
    rc = main(["run", "--n-batches", "40", "--batch-size", "16", "--echo", "2", "--lr", "3", "--verbose"])
    out = capsys.readouterr().out
    assert rc == 0 and "status: ok" in out and "conv_batches" in out and "optimizer.echo: 2" in out
    assert main(["run", "--n-batches", "40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


def test_run_compiles_what_it_uses_on_every_core_before_it_runs(monkeypatch, capsys):
    from echosim.experiments import assemble, executors

    calls = []
    def warm_up(conf, workers, announce):
        calls.append(("warm", executors._kernel_parts(conf)[1], workers))

    monkeypatch.setattr(executors, "warm_up", warm_up)
    real = assemble.execute_run
    monkeypatch.setattr(assemble, "execute_run", lambda spec: calls.append(("run",)) or real(spec))
    assert main(["run", "--n-batches", "20"]) == 0
    assert calls == [("warm", ["many", "draws", "pipeline"], executors.default_workers()), ("run",)]


def test_plot_writes_png_and_pdf(swept, tmp_path, capsys):
    rc = main(["plot", str(swept), "--out", str(tmp_path)])
    files = capsys.readouterr().out.split()
    assert rc == 0
    assert {f.rsplit(".", 1)[1] for f in files} == {"png", "pdf"}
    assert (tmp_path / "convergence_vs_echo.png").stat().st_size > 1000


def test_plot_draws_the_echo_factors_asked_for(swept, tmp_path, capsys):
    from echosim.experiments.tables import load
    from echosim.plots.views import risk_vs_time_data

    res = load(swept)
    panels = risk_vs_time_data(res.summary, res.curves, res.tuned, echoes=[1, 2, 4])
    assert all(len(p["overlays"]) == 3 for p in panels)  # exactly the K asked for
    assert main(["plot", str(swept), "--out", str(tmp_path), "--format", "png", "--echo", "1,2,4"]) == 0
    capsys.readouterr()
    one_line_error(capsys, call(["plot", str(swept), "--echo", "1,3"]), "no K = 3", "it has K = 1, 2, 4")


def test_bounds_evaluates_theory_functions(capsys):
    rc = main(["bounds", "echoed_gd_bound", "--beta", "0.25", "--rho", "1", "--D", "2", "--B", "64",
               "--T", "500", "--K", "4"])
    out = capsys.readouterr().out
    assert rc == 0
    label, value = out.splitlines()
    assert label.startswith("echoed_gd_bound(beta=0.25, rho=1, D=2, B=64, T=500, K=4): Bound for echoed GD")
    assert "excess risk" in label
    assert float(value.split("=")[1]) == pytest.approx(
        theory.echoed_gd_bound(beta=0.25, rho=1, D=2, B=64, T=500, K=4), rel=1e-9)
    rc = main(["bounds", "echoed_gd_bound", "--beta=0.25", "--rho", "1", "--D", "2", "--B", "64",
               "--T", "500", "--K", "1,2,4"])
    lines = capsys.readouterr().out.splitlines()[1:]
    values = [float(line.split(":")[1]) for line in lines]
    assert rc == 0 and [line.split(":")[0].strip() for line in lines] == ["K=1", "K=2", "K=4"]
    assert len(values) == 3 and values[0] > values[2]
    assert main(["bounds", "list"]) == 0
    assert "saturation_echo" in capsys.readouterr().out
    assert main(["bounds", "saturation_echo", "--help"]) == 0
    help_text = capsys.readouterr().out
    assert "--eps X" in help_text and "K_{\\mathrm{sat}}" in help_text


def test_info_reports_versions_threading_cores_and_cache(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for word in ("numba", "numpy", "threading layer", "cores", "cache"):
        assert word in out


@pytest.mark.parametrize("sub", [[], ["sweep"], ["run"], ["plot"], ["bounds"], ["info"]])
def test_help_on_every_subcommand(sub, capsys):
    assert call([*sub, "--help"]) == 0
    out = capsys.readouterr().out
    assert "usage" in out and ("examples" in out or not sub)


BAD = [
    (["sweep", "/nonexistent/x.toml"], ["cannot read config file"]),
    (["sweep", "{bad}"], ["invalid TOML"]),
    (["sweep", "{tiny}", "--set", "optimizer.lr=[1.0, 2.0, -3.0]"], ["optimizer.lr[2]", ">= 0"]),
    (["sweep", "{tiny}", "--set", "optimizer.lrr=1"], ["optimizer.lrr", "allowed"]),
    (["sweep", "{tiny}", "--set", "optimizer.batch_size=\"x\""], ["optimizer.batch_size", "integer"]),
    (["sweep", "{tiny}", "--set", "sweep.repetitions=[1,2]"], ["sweep.repetitions"]),
    (["sweep", "{tiny}", "--set", "noequals"], ["KEY=VALUE"]),
    (["sweep", "{tiny}", "--workers", "0"], ["--workers"]),
    (["sweep", "{tiny}", "--bogus"], ["--bogus"]),
    (["run", "{tiny}"], ["12 runs", "--set"]),
    (["run", "--echo", "0.5"], ["--echo"]),
    (["plot", "/nonexistent/results"], ["not a directory"]),
    (["bounds", "nope"], ["nope", "allowed"]),
    (["bounds", "echoed_gd_bound", "--beta", "1"], ["missing", "--rho"]),
    (["bounds", "echoed_gd_bound", "--beta", "x"], ["--beta"]),
    (["bounds", "echoed_gd_bound", "--zeta", "1"], ["--zeta", "allowed"]),
    (["bounds", "echoed_gd_bound", "--beta", "-1", "--rho", "1", "--D", "1", "--B", "1", "--T", "1", "--K", "1"],
     ["beta"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "sweep.repetitions=1000000000"], ["sweep.repetitions", "100,000"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "optimizer.echo=1000000000000"], ["optimizer.echo", "more than"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "optimizer.lr={start=0.1,stop=1,per_decade=1e12}"],
     ["optimizer.lr", "per_decade", "100,000"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "problem.dim=1000000000000"], ["problem.dim", "memory"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "sweep.n_batches=1000000000000"], ["sweep.n_batches", "memory"]),
    (["sweep", "{tiny}", "--dry-run", "--set", "pipeline.workers=1000000000000"], ["pipeline.workers", "memory"]),
    (["run", "--n-batches", "1000000000000"], ["sweep.n_batches", "memory"]),
    (["sweep", "{tiny}", "--out", "{file}"], ["{file}", "is a file, not a directory"]),
    (["sweep", "{tiny}", "--out", "{file}/sub"], ["{file}/sub", "Not a directory"]),
    (["frobnicate"], ["invalid choice"]),
    ([], ["subcommand"]),
]


@pytest.mark.parametrize("argv, needles", BAD, ids=[" ".join(a) or "<none>" for a, _ in BAD])
def test_bad_input_is_one_line_on_stderr_and_exit_2(argv, needles, tiny, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[optimizer\n")
    file = tmp_path / "a_file"
    file.write_text("")
    sub = lambda a: a.replace("{tiny}", str(tiny)).replace("{bad}", str(bad)).replace("{file}", str(file))  # noqa: E731
    one_line_error(capsys, call([sub(a) for a in argv]), *[sub(n) for n in needles])


@pytest.mark.parametrize("code, needles", [
    (errno.ENOSPC, ["No space left on device", "resumable", "re-run the same command"]),
    (errno.EROFS, ["Read-only file system", "--out"]),
    (errno.EACCES, ["Permission denied", "--out"]),
])
def test_an_os_error_while_writing_results_is_one_line_naming_the_path_and_the_cause(
        code, needles, tiny, tmp_path, capsys, monkeypatch):
    from echosim.experiments import store

    def refuse(self):
        if self.pending:
            raise OSError(code, os.strerror(code), str(self.root / "packs" / "pack.parquet"))
        return []

    monkeypatch.setattr(store.Store, "flush", refuse)
    argv = ["sweep", str(tiny), "--out", str(tmp_path / "o"), "--store", str(tmp_path / "s"), "--workers", "1",
            "--quiet", "--no-plot"]
    one_line_error(capsys, call(argv), str(tmp_path / "s" / "packs" / "pack.parquet"), *needles)


class _ClosedPipe(io.StringIO):
    def write(self, text):
        raise BrokenPipeError(errno.EPIPE, "Broken pipe")


def test_a_reader_that_goes_away_ends_the_output_quietly_without_a_traceback(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["bounds", "list"]) == 141
    assert capsys.readouterr().err == ""


def test_summary_values_are_finite_or_never(capsys):
    main(["run", "--n-batches", "20", "--lr", "0.0", "--verbose"])
    out = capsys.readouterr().out
    conv = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in out.splitlines())
            if k.strip().startswith("conv_")}
    assert conv["conv_batches"] == "never" and conv["conv_time"] == "never"
    assert "nan" not in conv.values()


def test_figures_subcommand_makes_one_quick_figure(tmp_path, capsys):
    from echosim.cli import main

    assert main(["figures", "--quick", "--only", "greedy_vs_fixed", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "greedy_vs_fixed.png").stat().st_size > 0
    capsys.readouterr()
    assert main(["figures", "--quick", "--only", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "only" in err[0]
