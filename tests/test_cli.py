"""The command line in-process: every subcommand, --help everywhere, and bad input → one line, exit 2."""

import errno
import io
import json
import os
import sys
import subprocess
import textwrap

import pytest

import theory
from echosim.cli import build_parser, main
from echosim.cli import runs as cli_runs

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


def test_with_every_run_stored_the_summary_says_nothing_was_computed_not_dask(tiny, swept, cli_store, capsys):
    rc = main(["sweep", str(tiny), "--out", str(swept), "--store", str(cli_store), "--quiet", "--no-plot",
               "--scheduler", "tcp://127.0.0.1:1"])  # nobody listens there: it must not be contacted
    out = capsys.readouterr().out
    assert rc == 0 and "nothing to compute: every run was in the store" in out and "Dask" not in out


def test_dry_run_prints_the_number_of_runs_and_an_estimate(tiny, tmp_path, capsys):
    rc = main(["sweep", str(tiny), "--dry-run", "--out", str(tmp_path / "x"), "--set", "sweep.repetitions=3"])
    out = capsys.readouterr().out
    assert rc == 0 and "18 runs" in out and "estimated time" in out and "cost model" in out
    assert not (tmp_path / "x").exists()  # a dry run writes nothing


@pytest.mark.parametrize("method", ["echoed_heavy_ball", "echoed_adam"])
def test_run_takes_the_methods_users_train_with(method, capsys):
    rc = main(["run", "--method", method, "--n-batches", "40", "--batch-size", "16", "--echo", "2", "--lr", "0.05",
               "--verbose"])
    out = capsys.readouterr().out
    assert rc == 0 and f"optimizer.method: {method}" in out and "status: ok" in out


def test_run_passes_its_numbers_to_the_config_as_numbers(monkeypatch, capsys):
    """--echo 4 reaches the config as the number 4, checked once by the echo policy's owner
    (check_echo), not as the text "optimizer.echo=4" parsed again."""
    from echosim.experiments import config as cfg
    from echosim.experiments import resolve
    from echosim.pipeline import model

    parsed, checked = [], []
    real_parse, real_check = cfg._parse_override, resolve.check_echo
    monkeypatch.setattr(cfg, "_parse_override", lambda item: parsed.append(item) or real_parse(item))
    monkeypatch.setattr(resolve, "check_echo", lambda *a, **k: checked.append(a) or real_check(*a, **k))
    conf = cli_runs._single_run_config(build_parser().parse_args(["run", "--echo", "4", "--lr", "0.5",
                                                                  "--set", "sweep.repetitions=1"]))
    assert parsed == ["sweep.repetitions=1"]
    assert checked == [(4, "--echo (optimizer.echo)")] and conf.runs[0].echo == 4
    assert model.check_echo is real_check  # the one owner


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


def test_run_with_policy_auto_says_which_caps_it_chose(capsys):
    rc = main(["run", "--policy", "auto", "--n-batches", "120", "--batch-size", "16", "--lr", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "K=auto" in out and "auto caps:   0:1 " in out and "decisions:" in out


def test_run_compiles_what_it_uses_on_every_core_before_it_runs(monkeypatch, capsys):
    from echosim.experiments import assemble, executors

    calls = []
    def warm_up(conf, workers, announce):
        calls.append(("warm", executors._kernel_parts(conf)[1], workers))

    monkeypatch.setattr(executors, "warm_up", warm_up)
    real = assemble.execute_run
    monkeypatch.setattr(assemble, "execute_run", lambda spec: calls.append(("run",)) or real(spec))
    assert main(["run", "--n-batches", "20"]) == 0
    assert calls == [("warm", ["echoed_gd:logistic:wide", "draws", "pipeline"], executors.default_workers()), ("run",)]


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
    (["run", "--echo", "0.5"], ["--echo", "optimizer.echo", ">= 1"]),
    (["run", "--echo", "many"], ["--echo", "a number"]),
    (["run", "--method", "echoed_lion"], ["--method", "echoed_adam"]),
    (["run", "--method", "echoed_adam", "--set", "optimizer.lr=\"theory\""], ["theory", "no bound"]),
    (["sweep", "{tiny}", "--set", "optimizer.method=\"echoed_heavy_ball\"", "--set", "optimizer.momentum=\"nesterov\""],
     ["momentum", "[0, 1)"]),
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
    # the bad input that used to get through (issue 22)
    (["sweep", "{tiny}", "--dry-run", "--set", f"sweep.seed={2**70}"], ["sweep.seed", "2^63 - 1"]),
    (["run", "--seed", f"{2**70}"], ["sweep.seed", "2^63 - 1"]),
    (["sweep", "{tiny}", "--set", "optimizer.lr={start=1e-300,stop=1e300,per_decade=1000}"],
     ["optimizer.lr", "per_decade", "100,000"]),
    (["sweep", "/dev/zero"], ["/dev/zero", "more than the limit"]),
    (["sweep", "{dir}"], ["{dir}", "directory"]),
    (["sweep", "{tiny}", "--set", "pipeline.policy=example", "--set", "optimizer.echo=2",
      "--set", "pipeline.shuffle_buffer=1000000000000"], ["pipeline.shuffle_buffer", "memory"]),
    (["sweep", "{tiny}", "--quick"], ["--quick", "[quick]"]),
    (["sweep", "{tiny}", "--set", "sweep.log_every=2", "--set", "sweep.log_points=10"],
     ["sweep.log_points", "log_every"]),
    (["sweep", "{tiny}", "--set", "sweep.log_every=1000"], ["sweep.log_every", "log nothing"]),
    (["sweep", "{tiny}", "--set", "problem.w_star_norm=1e300"], ["problem.w_star_norm", "overflow"]),
    (["run", "--set", "problem.design=sphere", "--set", "problem.radius=1e300"], ["problem.radius", "overflow"]),
    (["sweep", "{tiny}", "--set", "pipeline.arrival={kind='trace', times=[1e308, 1e308]}"],
     ["pipeline.arrival", "overflow"]),
    (["sweep", "{tiny}", "--set", "pipeline.arrival={kind='gamma', mean=8, cv=1e300}"], ["pipeline.arrival"]),
    (["sweep", "{tiny}", "--set", "pipeline.arrival=1e308"], ["pipeline.arrival", "clock"]),
    (["sweep", "{tiny}", "--set", "pipeline.workers=1000000000"], ["pipeline.workers", "1,000,000"]),
    (["sweep", "{tiny}", "--set", "sweep.lr_extend=1000000000"], ["sweep.lr_extend", "<= 100"]),
    (["sweep", "{tiny}", "--out", ""], ["--out", "empty"]),
    (["sweep", "{tiny}", "--store", "{file}/sub"], ["{file}/sub"]),
    (["sweep", "{tiny}", "--scheduler", "not-an-address"], ["--scheduler", "tcp://host:8786"]),
    (["run", "--policy", "auto", "--set", "pipeline.window=1"], ["pipeline.window", ">= 2"]),
    (["run", "--policy", "auto", "--set", "pipeline.alpha=0.9"], ["pipeline.alpha", "<= 0.5"]),
    (["run", "--policy", "greedy", "--set", "pipeline.alpha=0.1"], ["pipeline.alpha", "'auto'"]),
    (["run", "--policy", "auto", "--set", "sweep.time_budget=100"], ["sweep.time_budget", "sweep.n_batches"]),
    (["run", "--policy", "sometimes"], ["--policy", "invalid choice"]),
    (["bounds", "list", "extra"], ["list", "no arguments"]),
    (["figures", "--only", ","], ["--only"]),
    (["plot", "{file}", "--format", ""], ["--format"]),
]


@pytest.mark.parametrize("argv, needles", BAD, ids=[" ".join(a) or "<none>" for a, _ in BAD])
def test_bad_input_is_one_line_on_stderr_and_exit_2(argv, needles, tiny, tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[optimizer\n")
    file = tmp_path / "a_file"
    file.write_text("")
    sub = lambda a: (a.replace("{tiny}", str(tiny)).replace("{bad}", str(bad)).replace("{file}", str(file))  # noqa: E731
                     .replace("{dir}", str(tmp_path)))
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


# --------------------------------------------------------------------------- Ctrl-C

_BLOCK_AT = """
import importlib, signal, sys, threading
# Ctrl-C as in a terminal, even where the test runner itself was started with SIGINT ignored
# (a background job of a non-interactive shell), which a child would otherwise inherit
signal.signal(signal.SIGINT, signal.default_int_handler)
flag, target, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
parts = target.split(".")
for i in range(len(parts) - 1, 0, -1):
    try:
        owner = importlib.import_module(".".join(parts[:i]))
    except ImportError:
        continue
    for name in parts[i:-1]:
        owner = getattr(owner, name)
    break

real = getattr(owner, parts[-1])

def block(*args, **kwargs):  # reached the phase: say so, then wait for Ctrl-C
    if one_idle and args[0][0].repetition != 0:
        out = real(*args, **kwargs)  # the other cell (repetition 1) runs and its worker goes idle
        open(f"{flag}.{args[0][0].run_id}", "w").close()
        return out
    if one_idle:
        import glob, time
        while len(glob.glob(flag + ".*")) < 1:
            time.sleep(0.01)
    open(flag, "w").close()
    threading.Event().wait()

one_idle = argv[-1] == "--one-idle"
argv = argv[:-1] if one_idle else argv
setattr(owner, parts[-1], block)
from echosim.cli import main
raise SystemExit(main(argv))
"""

_PHASES = {
    "reading the config": ("echosim.experiments.config.parse_config", []),
    "compiling": ("echosim.experiments.executors._compile", ["--workers", "2"]),
    "runs in worker processes": ("echosim.experiments.executors.execute_cell", ["--workers", "2"]),
    "runs in this process": ("echosim.experiments.executors.execute_cell", ["--workers", "1"]),
    "the last run, one worker idle": ("echosim.experiments.executors.execute_cell", ["--workers", "2", "--one-idle"]),
    "writing the store": ("echosim.experiments.store.Store.flush", ["--workers", "1"]),
    "merging": ("echosim.experiments.tables.merge", ["--workers", "1"]),
    "plotting": ("echosim.plots.views.plot_results", ["--workers", "1"]),
    "estimating (--dry-run)": ("echosim.experiments.sweep.estimate", ["--dry-run"]),
}


def test_ctrl_c_gives_one_line_and_exit_130_in_every_phase(tiny, tmp_path):
    import signal
    import time

    procs = {}
    for i, (phase, (target, extra)) in enumerate(_PHASES.items()):
        d = tmp_path / f"p{i}"
        d.mkdir()
        quiet = [] if "--dry-run" in extra else ["--quiet"]
        argv = ["sweep", str(tiny), "--out", str(d / "out"), *quiet, *extra]  # --one-idle last
        env = dict(os.environ, ECHOSIM_STORE=str(d / "store"))
        procs[phase] = (d / "reached", subprocess_popen([sys.executable, "-c", _BLOCK_AT, str(d / "reached"),
                                                           target, *argv], env=env))
    try:
        waiting = dict(procs)
        guard = time.monotonic() + 300  # against a hang only; the test waits on the flag files
        while waiting and time.monotonic() < guard:
            for phase, (flag, proc) in list(waiting.items()):
                if flag.exists() or proc.poll() is not None:
                    os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends: the whole group
                    del waiting[phase]
            time.sleep(0.05)
        assert not waiting, f"never reached: {sorted(waiting)}"
        for phase, (flag, proc) in procs.items():
            try:
                _, err = proc.communicate(timeout=120)
            except subprocess.TimeoutExpired:  # say what the process was doing, then fail
                try:
                    with open(f"/proc/{proc.pid}/status") as f:
                        state = " ".join(line.strip() for line in f if line.startswith(("State", "Sig", "Threads")))
                except OSError:
                    state = "?"
                os.killpg(proc.pid, signal.SIGKILL)
                _, err = proc.communicate()
                raise AssertionError(f"{phase}: no exit within 120 s of Ctrl-C ({state}); stderr: {err[-2000:]}")
            lines = [line for line in err.splitlines() if line.strip()]
            assert flag.exists(), (phase, err)
            # -2: killed by SIGINT, which a shell also reports as 130 (Python 3.11 re-raises SIGINT at exit
            # when the KeyboardInterrupt passed through an eval() on its way, e.g. inside an import)
            assert proc.returncode in (130, -signal.SIGINT) and len(lines) == 1 and "Traceback" not in err, (phase, err)
            assert lines[0].startswith("echosim sweep: interrupted"), (phase, err)
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def subprocess_popen(argv, env):
    import subprocess

    return subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


# --------------------------------------------------------------------------- limits and warnings


def test_config_trace_and_data_files_have_size_limits_and_must_be_regular_files(tiny, tmp_path, monkeypatch, capsys):
    from echosim.experiments import config
    from echosim.pipeline import traces

    big = tmp_path / "big.toml"
    big.write_text(TINY + "#" * 200)
    monkeypatch.setattr(config, "MAX_CONFIG_BYTES", len(TINY) + 10)
    one_line_error(capsys, call(["sweep", str(big), "--dry-run"]), str(big), "more than the limit")
    trace = tmp_path / "t.csv"
    trace.write_text("time\n" + "3.0\n" * 10)
    monkeypatch.setattr(traces, "MAX_TRACE_BYTES", 20)
    arrival = f"pipeline.arrival={{kind='trace', path='{trace}'}}"
    one_line_error(capsys, call(["sweep", str(tiny), "--set", arrival]), "pipeline.arrival", "more than the limit")
    for arrival in ("pipeline.arrival={kind='trace', path='/dev/zero'}", f"pipeline.arrival={{kind='trace', path='{tmp_path}'}}"):
        one_line_error(capsys, call(["sweep", str(tiny), "--set", arrival]), "pipeline.arrival", "is ")
    one_line_error(capsys, call(["sweep", str(tiny), "--set", "problem.kind=dataset", "--set", "problem.path='/dev/zero'"]),
                   "problem.path", "not a regular file")


@pytest.mark.parametrize("override, key", [
    ("pipeline.prefetch=1000000000000", "pipeline.prefetch"),
    ("pipeline.workers=100", "pipeline.workers"),
    ("sweep.log_points=1000000000000", "sweep.log_points"),
    ("sweep.window=1000", "sweep.window"),
])
def test_a_legal_but_pointless_value_is_said_once_in_one_line(tiny, override, key):
    from echosim.experiments.config import load_config
    from echosim.experiments.schema import ConfigWarning

    with pytest.warns(ConfigWarning) as seen:
        conf = load_config(tiny, overrides=[override])
    assert len(conf.runs) == 12 and [str(w.message).split(":")[0] for w in seen] == [key]
    assert all("\n" not in str(w.message) for w in seen)


def test_the_command_line_shows_each_warning_as_one_line_numpy_ones_after_the_output(tiny, tmp_path, capsys):
    import warnings

    from echosim.cli import _OneLineWarnings
    from echosim.experiments.schema import ConfigWarning

    assert call(["sweep", str(tiny), "--dry-run", "--quiet", "--out", str(tmp_path / "x"),
                 "--set", "pipeline.prefetch=1000000000000"]) == 0  # --quiet: no compile notice, warnings stay
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("echosim sweep: warning: pipeline.prefetch: ")
    shown = _OneLineWarnings("run")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = shown
        warnings.warn("overflow encountered\n  in exp", RuntimeWarning)
        warnings.warn("overflow encountered in exp", RuntimeWarning)  # the same, once
        warnings.warn("sweep.window: too long", ConfigWarning)
    assert capsys.readouterr().err == "echosim run: warning: sweep.window: too long\n"  # NumPy's wait for the end
    shown.flush()
    assert capsys.readouterr().err == "echosim run: warning: overflow encountered in exp (RuntimeWarning)\n"


# --------------------------------------------------------------------------- the base install


@pytest.fixture
def base_install(monkeypatch):
    """As after ``pip install echosim`` without extras: pyarrow and pandas cannot be imported."""
    for name in list(sys.modules):
        if name.split(".")[0] in ("pyarrow", "pandas"):
            monkeypatch.delitem(sys.modules, name)
    for name in ("pyarrow", "pandas"):
        monkeypatch.setitem(sys.modules, name, None)  # `import pyarrow` raises ModuleNotFoundError


def test_in_the_base_install_every_command_works_or_names_its_extra(base_install, tiny, tmp_path, capsys):
    store = tmp_path / "store"
    assert call(["sweep", str(tiny), "--dry-run", "--store", str(store)]) == 0  # a dry run needs no store
    assert "estimated time" in capsys.readouterr().out
    assert call(["run", "--n-batches", "20"]) == 0 and "status ok" in capsys.readouterr().out
    assert call(["bounds", "list"]) == 0 and call(["info"]) == 0
    capsys.readouterr()
    plan = ["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "64"]
    assert call([*plan, "--steps-to-target", "64=5000", "--steps-to-target", "512=900"]) == 0
    capsys.readouterr()
    for argv in (["sweep", str(tiny), "--store", str(store)], ["plot", str(tmp_path)],
                 ["figures", "--quick", "--only", "greedy_vs_fixed", "--out", str(tmp_path / "f")],
                 [*plan, "--problem", "logistic", "--seeds", "1", "--store", str(store)]):
        one_line_error(capsys, call(argv), "pip install 'echosim[sweep]'")
    assert not store.exists()  # refused before any run
    # figures: the extra is named first, in the one line, before any figure is tried or skipped
    assert call(["figures", "--quick", "--out", str(tmp_path / "f"), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipped" not in err and "pip install 'echosim[sweep]'" in err


def test_version(capsys):
    from echosim._version import __version__

    assert call(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"echosim {__version__}"


def _strict_json(text: str):
    """Parse as a strict parser would: NaN and Infinity are not JSON."""
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_info_json_holds_the_same_facts(capsys):
    assert main(["info", "--json"]) == 0
    facts = _strict_json(capsys.readouterr().out)
    assert facts["packages"]["numba"] and facts["cores"] >= 1
    assert {c["module"] for c in facts["kernel_caches"]} == {"echosim.training.kernel", "echosim.pipeline.kernel"}


@pytest.mark.parametrize("where", ["before", "after"])
def test_bounds_json(where, capsys):
    args = ["echoed_gd_bound", "--beta", "0.25", "--rho", "1", "--D", "2", "--B", "64", "--T", "500", "--K", "1,4"]
    argv = ["bounds", "--json", *args] if where == "before" else ["bounds", *args, "--json"]
    assert main(argv) == 0
    out = _strict_json(capsys.readouterr().out)
    assert out["function"] == "echoed_gd_bound" and out["arguments"]["K"] == [1.0, 4.0]
    assert len(out["value"]) == 2 and out["value"][1] < out["value"][0]
    assert main(["bounds", "list", "--json"]) == 0
    assert any(f["name"] == "saturation_echo" for f in _strict_json(capsys.readouterr().out))


def test_sweep_json_is_strict_and_says_its_units(tiny, swept, cli_store, capsys):
    rc = main(["sweep", str(tiny), "--out", str(swept), "--store", str(cli_store), "--quiet", "--no-plot", "--json"])
    out = _strict_json(capsys.readouterr().out)
    assert rc == 0 and out["n_resumed"] == out["n_runs"] and out["counts"]["failed"] == 0
    assert out["tuned"] and "conv_batches" in out["tuned"][0] and out["units"]["conv_batches"] == "fresh batches"
    rc = main(["sweep", str(tiny), "--out", str(swept), "--dry-run", "--json"])
    assert rc == 0 and 1 <= _strict_json(capsys.readouterr().out)["n_runs"] <= out["n_runs"]  # before lr extension
