"""benchmarks/harness.py: its statistics against NumPy's, the interleaving order, strict
JSON, the command and fork runners (status, output, time limit, peak memory, what a child
returns) and the bad-input classifier, class by class."""

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import harness


@pytest.mark.parametrize("n", [1, 2, 5, 10, 37])
def test_summary_matches_numpy_percentiles(n):
    v = np.random.default_rng(n).lognormal(size=n)
    s = harness.summary(list(v))
    q10, q25, q50, q75, q90 = np.percentile(v, [10, 25, 50, 75, 90])
    assert s["n"] == n and s["failed"] == 0
    assert s["median"] == pytest.approx(q50, rel=1e-12)
    assert (s["q25"], s["q75"], s["p10"], s["p90"]) == pytest.approx((q25, q75, q10, q90), rel=1e-12)
    assert s["iqr"] == pytest.approx(q75 - q25, rel=1e-12, abs=1e-15)
    assert (s["min"], s["max"]) == (v.min(), v.max())


def test_summary_leaves_failed_repeats_out_and_ratio_of_medians():
    s = harness.summary([3.0, None, float("nan"), 1.0, 2.0])
    assert (s["n"], s["failed"], s["median"]) == (3, 2, 2.0)
    empty = harness.summary([None])
    assert empty["n"] == 0 and empty["median"] is None
    assert harness.ratio(harness.summary([4.0, 6.0]), harness.summary([1.0, 3.0])) == 2.5
    assert harness.ratio(1.0, 0.0) is None and harness.ratio(None, 2.0) is None and harness.ratio(empty, s) is None


def test_interleave_rotates_the_order_every_repeat():
    calls = []
    got = harness.interleave({k: (lambda k=k: calls.append(k) or len(calls)) for k in "ABC"}, 4)
    assert "".join(calls) == "ABC" "BCA" "CAB" "ABC"
    assert got == {"A": [1, 6, 8, 10], "B": [2, 4, 9, 11], "C": [3, 5, 7, 12]}
    calls.clear()
    harness.interleave({k: (lambda k=k: calls.append(k)) for k in "AB"}, 2, rotate=False)
    assert "".join(calls) == "ABAB"


def test_clocked_measures_the_call_and_divides_by_units():
    wall = harness.clocked(lambda: time.sleep(0.05), "wall", units=10)()
    assert wall >= 0.005  # at least the 50 ms slept, over 10 units
    cpu = harness.clocked(lambda: time.sleep(0.05), "thread")()
    assert cpu < 0.04  # sleeping costs the thread (almost) no CPU


def test_jsonable_is_strict_json():
    obj = {"nan": float("nan"), "inf": np.inf, "ninf": -math.inf, "i": np.int64(3), "f": np.float32(0.5),
           "a": np.arange(3), "t": (1, 2), "s": {2, 1}, "p": Path("/x"), 4: "key"}
    out = harness.jsonable(obj)
    assert out == {"nan": None, "inf": "inf", "ninf": "-inf", "i": 3, "f": 0.5, "a": [0, 1, 2], "t": [1, 2],
                   "s": [1, 2], "p": "/x", "4": "key"}
    assert harness.jsonable([math.inf], infinite="null") == [None]
    with pytest.raises(ValueError, match="infinite"):
        harness.jsonable(1.0, infinite="big")
    json.dumps(out, allow_nan=False)


def test_write_json_is_atomic_and_strict(tmp_path):
    path = harness.write_json(tmp_path / "sub" / "r.json", {"x": float("nan"), "y": [np.float64(1.5)]})
    assert json.loads(path.read_text()) == {"x": None, "y": [1.5]}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temp file left


def test_run_command_status_output_peak_and_time_limit():
    code = "import sys; b = bytearray(80 * 2**20); print('out'); print('err', file=sys.stderr); sys.exit(3)"
    o = harness.run_command([sys.executable, "-c", code], timeout=120)
    assert (o.status, o.out, o.err) == (3, "out\n", "err\n")
    assert o.peak_mb > 80  # the child's own peak, from its rusage
    with pytest.raises(SystemExit, match="exit 3"):
        o.check("the child")
    slow = harness.run_command([sys.executable, "-c", "import time; time.sleep(60)"], timeout=0.5, session=True)
    assert slow.status is None  # killed at the limit


def test_fork_call_returns_status_value_traceback_or_none_at_the_limit(tmp_path):
    assert harness.fork_call(lambda: 7, tmp_path, 60).status == 7
    o = harness.fork_call(lambda: {"v": np.float64(2.0), "bad": float("nan")}, tmp_path, 60)
    assert (o.status, o.result) == (0, {"v": 2.0, "bad": None})
    o = harness.fork_call(lambda: print("said") or 1 / 0, tmp_path, 60)
    assert o.status == 1 and o.out == "said\n" and "ZeroDivisionError" in o.err and o.result is None
    o = harness.fork_call(lambda: sys.exit(2), tmp_path, 60, env={"HARNESS_TEST": "1"})
    assert o.status == 2
    o = harness.fork_call(lambda: time.sleep(60), tmp_path, 0.3)
    assert o.status is None


def _o(status, err="", out="", seconds=0.1):
    return harness.Outcome(status, out, err, seconds)


@pytest.mark.parametrize("outcome, expect, cls", [
    (_o(2, "error: --seed: must be >= 0\n"), "error", "clean"),
    (_o(2, "error: --lr wrong\n"), "error", "field"),
    (_o(2, "error: seed bad\nmore\n"), "error", "lines"),
    (_o(2, "Traceback (most recent call last):\n"), "error", "traceback"),
    (_o(0, ""), "error", "silent"),
    (_o(1, "error: seed\n"), "error", "status"),
    (_o(2, "error: seed\n", out="work\n"), "error", "stdout"),
    (_o(2, "error: seed\n", seconds=99), "error", "hang"),
    (_o(None), "error", "hang"),
    (_o(0, "warning: seed is pointless\n"), "warn", "clean"),
    (_o(0, ""), "warn", "silent"),
    (_o(0, "ok"), "ok", "clean"),
    (_o(2, "error: seed\n"), "ok", "broken (exit 2)"),
    (_o(2, "error: seed\n"), "either", "clean"),
])
def test_classify_cli_names_each_class(outcome, expect, cls):
    assert harness.classify_cli(outcome, expect, ("seed|--seed",), timeout=60) == cls


def test_classify_cli_needles_all_and_case():
    o = _o(2, "error: File /x: Seed wrong\n")
    assert harness.classify_cli(o, "error", ("seed", "/x")) == "field"
    assert harness.classify_cli(o, "error", ("seed", "/x"), ignore_case=True) == "clean"


def test_environment_names_the_machine_and_software():
    env = harness.environment()
    assert env["cores"] >= 1 and len(env["load"]) == 3 and env["numpy"] == np.__version__
    line = harness.environment_line(env)
    assert f"NumPy {np.__version__}" in line and f"{env['cores']} cores" in line
