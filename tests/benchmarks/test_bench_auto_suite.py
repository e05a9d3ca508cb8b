"""A smoke run of benchmarks/bench_auto_suite.py at tiny sizes with no sleeps: every kind of
case (bench_auto's least squares, the NumPy MLP, a PyTorch job, a scripted stream) goes
through its real loop and lands in the tables and the JSON; and the loader's frozen clock."""

import importlib.util
import json
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("PIL")
pytest.importorskip("sklearn")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_auto_suite", BENCH / "bench_auto_suite.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_quick_run_without_sleeps(tmp_path, capsys):
    suite = _load()
    out = tmp_path / "suite.json"
    cases = "ls-pays,mlp-digits,torch-digits-momentum,stream-hurts"
    assert suite.main(["--quick", "--time-scale", "0", "--budget", "12", "--cases", cases,
                       "--policies", "sync,4,auto", "--signals", "--cache", str(tmp_path / "cache"),
                       "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## Summary" in text and "stream-hurts" in text
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [r["case"] for r in doc["results"]] == cases.split(",")
    assert len(doc["runs"]) == 4 * 3
    for r in doc["runs"]:
        assert len(r["cap"]) == 12 and len(r["metric"]) == 13
        assert r["times"] == sorted(r["times"])
    # common random numbers: at a seed, sync and K = 4 start from the same weights and batches
    mlp = {r["policy"]: r for r in doc["runs"] if r["case"] == "mlp-digits"}
    assert mlp["sync"]["metric"][0] == mlp["K=4"]["metric"][0]
    assert {r["echo"][0] for r in doc["runs"] if r["policy"] == "K=4"} == {4}


def test_the_loaders_clock_stops_while_paused():
    sys.path.insert(0, str(BENCH))
    from auto_suite.loop import Gate

    now = [0.0]
    gate = Gate(clock=lambda: now[0])
    with gate.paused():
        now[0] = 5.0
        assert gate.now() == 0.0          # paused time is not the loader's time
    now[0] = 6.0
    assert gate.now() == 1.0
    # a loader sleeping through a pause does not wake before the pause ends
    real = Gate()
    done = []
    th = threading.Thread(target=lambda: (real.sleep(0.001), done.append(True)))
    with real.paused():
        th.start()
        th.join(0.05)
        assert th.is_alive() and not done
    th.join(5)
    assert done
