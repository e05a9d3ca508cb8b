"""python -m echosim plan: the table, JSON, and one-line errors with exit 2 that write nothing."""

import json

import pytest

from echosim.cli import main

STEPS = ["--steps-to-target", "64=1100", "--steps-to-target", "1024=160"]


def test_table_and_recommendation(capsys):
    assert main(["plan", "--loader", "gamma(mean=80ms, cv=0.5)", "--step-time", "10ms", "--batch-size", "256",
                 *STEPS, "--seeds", "2"]) == 0
    out = capsys.readouterr().out
    assert "wall-clock (10-90%)" in out and "recommended:" in out and "ceiling" in out


def test_json_and_plot(capsys, tmp_path):
    fig = tmp_path / "k.png"
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256,1024", "--echo", "2-8",
                 *STEPS, "--seeds", "2", "--json", "--plot", str(fig)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["recommended"]["policy"] in ("sync", "fixed", "greedy")
    assert {c["echo"] for c in d["candidates"] if c["policy"] == "fixed"} == {2, 4, 8}
    assert fig.stat().st_size > 0


def test_json_to_a_file_is_written_atomically_and_the_table_printed(capsys, tmp_path):
    out = tmp_path / "plan.json"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out.symlink_to(victim)  # replaced by the plan, never written through
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256", *STEPS, "--seeds", "1",
                 "--json", str(out)]) == 0
    assert "recommended" in capsys.readouterr().out
    assert json.loads(out.read_text())["recommended"]["policy"] in ("sync", "fixed", "greedy")
    assert victim.read_text() == "precious" and not out.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "victim"]  # no temp file left


@pytest.mark.parametrize("args, word", [
    (["--loader", "gamma(mean=80qs, cv=0.5)"], "loader"),
    (["--loader", "80ms", "--step-time", "ten"], "step_time"),
    (["--loader", "80ms", "--steps-to-target", "64=100"], "--steps-to-target"),
    (["--loader", "80ms", "--steps-to-target", "64=100", "--steps-to-target", "128=-5"], "steps_to_target"),
    (["--loader-profile", "64=80ms"], "loader"),
    (["--loader", "trace(NEG)"], "loader"),
    (["--loader", "80ms", "--echo", "two"], "--echo"),
    (["--loader", "80ms", "--json", "/nonexistent/dir/plan.json"], "--json"),
    (["--loader", "80ms", "--steps-to-target", "64=1100,1024=160,256x4=3"], "steps_to_target: at B = 256, K = 4"),
    (["--loader", "80ms", "--steps-to-target", "64=1100,1024=160,256x100000000000000000000=300"], "<= 4096"),
    (["--loader", "80ms", "--batch-size", "100000000000000000000000"], "batch_size"),
    (["--loader", "80ms", "--step-time", "64=15ms", "--step-time", "64=20ms"],
     "--step-time: batch size 64 given twice ('15ms' and '20ms')"),
    (["--loader", "80ms", "--step-time", "10ms", "--step-time", "20ms"], "--step-time: given 2 times"),
    (["--loader", "80ms", "--problem", "logistic", "--method", "echoed_heavy_ball", "--method-option", "momentum=0.9",
      "--method-option", "momentum=0.5"], "--method-option: momentum given twice ('0.9' and '0.5')"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(args, word, capsys, tmp_path):
    neg = tmp_path / "neg.csv"
    neg.write_text("time\n0.1\n-0.2\n")
    args = [a.replace("NEG", str(neg)) for a in args]
    if "--step-time" not in args:
        args += ["--step-time", "10ms"]
    fig = tmp_path / "out.png"
    code = main(["plan", *args, *(["--batch-size", "256"] if "--batch-size" not in args else []),
                 *(STEPS if "--steps-to-target" not in args and "--problem" not in args else []), "--plot", str(fig)])
    err = capsys.readouterr()
    assert code == 2
    assert err.out == ""
    lines = err.err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0]
    assert not fig.exists()


@pytest.mark.parametrize("code, word", [(28, "No space left on device; the previous plan.json is left as it was; "
                                              "free some space and re-run the same command"),
                                        (30, "Read-only file system; the previous plan.json is left as it was "
                                             "(choose a writable place)")])
def test_a_failed_json_or_plot_write_keeps_the_previous_file_and_says_so(code, word, capsys, tmp_path, monkeypatch):
    import os

    from echosim import _files

    out = tmp_path / "plan.json"
    out.write_text("the previous plan")

    def fail(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(_files.os, "fsync", fail)
    assert main(["plan", "--loader", "80ms", "--step-time", "10ms", "--batch-size", "256", *STEPS, "--seeds", "1",
                 "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"echosim plan: error: {str(out)!r}: {word}\n"
    assert out.read_text() == "the previous plan" and sorted(p.name for p in tmp_path.iterdir()) == ["plan.json"]
