"""Every benchmark script runs: each in its own process with ``--smoke`` (tiny sizes, one
repeat; nothing is timed or compared with a target), exit status 0, and its ``--json``
output strict JSON with the session's fields and the script's own results. Scripts that
compare with another checkout run without it; the torch scripts skip without torch."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"

SCRIPTS = {  # script: (extra arguments, keys of its results, modules it needs)
    "bad_inputs.py": ([], {"mode", "counts", "cases"}, ()),
    "bad_inputs_api.py": ([], {"counts", "cases", "skipped"}, ()),
    "fuzz_loop.py": ([], {"seed", "sizes", "counts", "unclean"}, ()),
    "bench_compile.py": ([], {"repeats", "trees", "rows"}, ()),
    "bench_kernels.py": ([], {"kernel", "rows", "compile", "checks"}, ()),
    "bench_loop_memory.py": ([], {"steps", "bytes_per_step", "synthetic"}, ()),
    "bench_loop_overhead.py": ([], {"repeats", "batches", "rows"}, ()),
    "bench_memory.py": ([], {"rows", "growth"}, ()),
    "bench_pipeline.py": ([], {"rows", "numba_over_simpy", "first_call_s"}, ("simpy",)),
    "bench_risk.py": (["--sweep"], {"trees", "recorded", "per_1000_values_us", "options", "sweep"}, ()),
    "bench_runs.py": ([], {"T", "repeats", "per_step", "ratios"}, ()),
    "bench_seeds.py": ([], {"bases", "counts", "rows", "T"}, ("pandas",)),
    "bench_sweep.py": ([], {"runs", "runs_per_s", "machinery_s_per_run", "rows"}, ("pandas",)),
    "bench_auto.py": ([], {"results", "runs"}, ("scipy",)),
    "bench_auto_cost.py": ([], {"unit", "rows", "auto_minus_greedy", "torch"}, ()),
    "bench_auto_scripted.py": ([], {"jobs", "batches", "rows"}, ()),
    "bench_auto_suite.py": ([], {"policies", "results", "runs"}, ("scipy", "sklearn")),
    "bench_plan_loader.py": ([], {"rows", "worst"}, ("PIL",)),
    "bench_plan_model.py": ([], {"scores", "settings", "table"}, ("pandas",)),
    "bench_plan_validation.py": ([], {"truths", "cells", "scores"}, ("pandas", "scipy")),
    "trial_records_atomic.py": ([], {"seed", "kill", "full_disk"}, ()),
    "torch_job/check_optimizers.py": ([], {"largest_difference", "rows"}, ("torch",)),
    "torch_job/lr_scan.py": ([], {"budget", "targets", "rows"}, ("torch", "PIL", "sklearn")),
    "torch_job/howto_check.py": ([], {"jobs", "truth", "howto", "score"}, ("torch", "PIL", "sklearn")),
}


def _strict(text):
    """JSON that refuses the bare NaN and Infinity Python's json would accept."""
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def run(script, *args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def smoke(script, args, tmp_path):
    out = tmp_path / "out.json"
    res = run(script, "--smoke", "--json", out, *args, cwd=tmp_path)
    assert res.returncode == 0, f"{script} failed:\n{res.stdout[-1500:]}\n{res.stderr[-3000:]}"
    doc = _strict(out.read_text(encoding="utf-8"))
    name = script.removesuffix(".py")
    assert doc["bench"] == name and doc["smoke"] is True
    assert doc["command"][0] == f"benchmarks/{script}"
    assert {"cpu", "cores", "python", "numpy", "load"} <= doc["environment"].keys()
    assert len(doc["load_start"]) == 3 and len(doc["load_end"]) == 3 and doc["seconds"] >= 0
    assert res.stdout.startswith(f"# {name}\n"), res.stdout[:200]  # the environment line comes first
    assert "load average at the end" in res.stdout
    return doc["results"], res


@pytest.fixture(scope="module")
def jpeg_cache(tmp_path_factory):
    """The torch job's JPEG files, built once for the scripts that read them."""
    return tmp_path_factory.mktemp("torch-job-cache")


@pytest.mark.parametrize("script", list(SCRIPTS))
def test_script_runs_at_tiny_sizes(script, tmp_path, jpeg_cache):
    args, keys, needs = SCRIPTS[script]
    for module in needs:
        pytest.importorskip(module)
    if script.startswith("torch_job/") and script != "torch_job/check_optimizers.py":
        args = [*args, "--cache", jpeg_cache]
    results, _ = smoke(script, args, tmp_path)
    assert keys <= results.keys(), sorted(results)
    checks = CHECKS.get(script)
    if checks:
        checks(results)


def _bad_inputs(r):
    assert r["counts"]["all"]["tried"] == len(r["cases"]) == 4


def _risk(r):
    # the sweep ran (it was broken) and the risk calls inside it were timed
    (one,) = r["sweep"]["this tree"]
    assert 0 < one["risk"] <= one["cpu"] and one["wall"] > 0


def _check_optimizers(r):
    assert r["largest_difference"] < 1e-10 and len(r["rows"]) == 1


def _howto_check(r):
    # the whole chain ran on the smoke's job: every fixed policy's truth, the how-to's five
    # steps (the pilot's 10 fresh batches for each of its 4 policies), the table with both
    (job,) = r["jobs"]
    assert job == "memory" and r["jobs"][job]["budget"] == 10
    assert {run["policy"] for run in r["truth"][job]} == {"K=1", "K=2", "K=4", "K=8", "greedy", "greedy4"}
    h = r["howto"][job]
    assert h["pilot_fresh_batches"] == 40 and set(h["steps_to_target"]) == {"64", "128"}
    assert f"### {job}:" in r["score"] and "from the pilot's records" in r["score"]


CHECKS = {"bad_inputs.py": _bad_inputs, "bench_risk.py": _risk, "torch_job/check_optimizers.py": _check_optimizers,
          "torch_job/howto_check.py": _howto_check}


def test_torch_job_runs_and_its_plan_check_reads_it(tmp_path, jpeg_cache):
    for module in ("torch", "PIL", "sklearn"):
        pytest.importorskip(module)
    runs = tmp_path / "runs"
    results, _ = smoke("torch_job/run.py", ["--out", runs, "--cache", jpeg_cache], tmp_path)
    assert {p["label"] for p in results["policies"]} == {"K=1", "K=2"}
    assert len(results["runs"]) == 2
    out = tmp_path / "check.json"
    res = run("torch_job/plan_check.py", runs, "--pilot", 2, "--json", out, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    doc = _strict(out.read_text(encoding="utf-8"))
    assert len(doc["rows"]) == 2 and "environment" in doc and doc["pilot"] == 2
