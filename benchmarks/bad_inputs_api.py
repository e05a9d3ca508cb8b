"""Malformed input beyond bad_inputs.py: the planner's measurements and batch sizes (through
the command line and through `echosim.plan`), ``--method-option``, ``--step-time``,
``figures`` in the base install, echosim 0.1's module paths, and a sweep's tables and
the planner's figure written to a read-only or full target.

    python benchmarks/bad_inputs_api.py                  # every case, 2 at a time, a fork per case
    python benchmarks/bad_inputs_api.py --only plan --show
    PYTHONPATH=/path/to/other/tree python benchmarks/bad_inputs_api.py   # another tree's echosim

Four kinds of case, each run in a forked child (own session, killed with its children
at the time limit):

* ``cli``: a command line, classified as in bad_inputs.py (``error``: exit 2, one stderr
  line naming the argument, nothing on stdout); a setup may hide pyarrow and pandas
  first (the base install).
* ``api``: a call of `echosim.plan` that must raise one `ValueError` whose message names
  the argument, before any work (the pipeline simulator and the sweep are replaced by
  tripwires: reaching one is class ``work``); no exception is ``silent``, another
  exception ``traceback``.
* ``moved``: ``from <0.1 path> import <name>`` for every public name a 0.1 module had: it
  must resolve (else ``missing``) with a DeprecationWarning naming the path (else
  ``nowarn``).
* ``write``: a file echosim writes (a sweep's tables, plan's ``--plot`` and ``--json FILE``),
  on a target that fails: a tmpfs filled up, or
  remounted read-only (needs root and mount; else ``skipped``), or a symbolic link in
  place of the file. Clean: exit 2 and one line that names the file and says the
  previous one is left as it was (``field`` if it does not), the previous files
  byte-identical (else ``damaged``), no temp file left (``litter``); for a link, the
  command works and the file it pointed to is untouched.

Prints a Markdown report: counts per group and every unclean case.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from bad_inputs import TINY

PLAN_B = ("plan --loader 80ms --step-time 10ms --batch-size 256 --steps-to-target 64=5000 "
          "--steps-to-target 1024=900")
PLAN_A = "plan --loader 40ms --step-time 10ms --batch-size 256 --problem least_squares --seeds 1 --quiet"
STEPS = {64: 5000, 1024: 900}

NAMES_0_1 = {
    "echosim.arrivals": ("Deterministic", "Exponential", "Gamma", "LogNormal", "Pareto", "ServiceTime", "Stall",
                         "Trace", "as_service_time", "service_time_from_dict"),
    "echosim.config": ("ConfigError", "DEFAULT_TOML", "FIELDS", "Field", "PAPER_LRS", "RunSpec", "SCHEMA", "SECTIONS",
                       "SweepConfig", "build_optimizer", "build_pipeline", "build_problem", "canonical_json",
                       "default_config", "load_config", "lr_grid", "parse_config", "stable_hash"),
    "echosim.experiment": ("AUTO_LOG_ALL", "AUTO_LOG_POINTS", "BATCHES_PER_BLOCK", "CHUNK_BYTES", "EchoedGD",
                           "EchoedNesterov", "EchoedSGD", "LOSS_CODES", "Optimizer", "Problem", "STREAM_OPTIMIZER",
                           "Trajectory", "block_rng", "chunk_batches", "compile_kernels", "learning_rates",
                           "log_points", "run"),
    "echosim.figures": ("BATCHES_PER_BLOCK", "CONFIG_DIR", "DPI", "FIGURES", "Problem", "bounds_vs_simulation_data",
                        "convergence_vs_echo_data", "draw_bounds_vs_simulation", "draw_convergence_vs_echo",
                        "draw_greedy_vs_fixed", "draw_predicted_vs_simulated", "draw_speedup_vs_R",
                        "greedy_vs_fixed_data", "load_figure_config", "make_figures", "paper_lr_grid",
                        "predicted_vs_simulated_data", "speedup_vs_R_data"),
    "echosim.metrics": ("ITERATES", "UNITS", "convergence", "convergence_index", "fit_saturation", "loss_threshold",
                        "regime", "trailing_mean", "tune"),
    "echosim.optimizers": ("EchoedGD", "EchoedNesterov", "EchoedProx", "EchoedSGD", "LearningRate", "MinibatchSGD",
                           "OPTIMIZERS", "Optimizer", "learning_rates"),
    "echosim.problems": ("BATCHES_PER_BLOCK", "DESIGNS", "Dataset", "LOSSES", "LeastSquares", "Logistic", "Problem",
                         "STREAM_DATA", "STREAM_OPTIMIZER", "SeparableDataError", "block_rng"),
    "echosim.profiling": ("Deterministic", "Exponential", "FAMILIES", "Fit", "Gamma", "LogNormal", "Pareto",
                          "ServiceTime", "Trace", "fit_service_times", "profile"),
    "echosim.results": ("CURVE_COLUMNS", "FAILED", "RESULTS_SCHEMA", "Results", "SHARDS", "clean_temp",
                        "finished_ids", "load", "merge", "provenance", "read_failure", "read_manifest", "read_shard",
                        "shard_path", "write_failure", "write_manifest", "write_run", "write_shard"),
    "echosim.sweep": ("Progress", "SweepConfig", "SweepError", "SweepReport", "build_optimizer", "build_pipeline",
                      "build_problem", "default_workers", "estimate", "execute_run", "format_tuned", "regime_check",
                      "results", "run_sweep", "simulate_budget", "truncate_schedule", "warm_up"),
}
"""Every public name of echosim 0.1's flat modules (commit 3054723), read from its source:
``__all__``, what each defined, and what each imported from echosim. A copy made apart
from echosim._moved, so the fuzz does not grade the package against its own list."""
PUBLIC_0_1 = {"echosim.datasets": ("DATASETS", "DEFAULT_L2", "DataFileNotFoundError", "Dataset", "INSTALL_HINT",
                                   "LOSSES", "NAMES", "SCALINGS", "SeparableDataError", "from_csv", "from_npz",
                                   "from_svmlight", "load_arrays", "load_dataset")}
"""0.1's echosim.datasets: a supported path (no warning)."""


@dataclass
class Case:
    kind: str  # cli, api, moved, write
    label: str
    needles: tuple = ()
    argv: str = ""
    call: dict = field(default_factory=dict)
    setup: str = ""
    expect: str = "error"
    timeout: float = 120.0

    @property
    def group(self) -> str:
        if self.kind == "moved":
            return "0.1 paths"
        if self.kind == "write":
            return "writes"
        if self.argv.startswith("figures"):
            return "figures"
        return "plan (CLI)" if self.kind == "cli" else "plan (API)"


def _cli(argv, *needles, setup="", expect="error", timeout=120.0):
    return Case("cli", argv, tuple(needles), argv=argv, setup=setup, expect=expect, timeout=timeout)


def _api(label, needle, **kw):
    return Case("api", label, (needle,), call=kw)


def cases() -> list[Case]:
    c = []
    # the planner's measurements, from the command line
    base = PLAN_B.split(" --steps-to-target")[0] + " --steps-to-target 64=5000,1024=900"
    for item in ["256x4=3", "256x4=1", "256x4=3.9", "256x4=2,256x4=8", "256x100000000000000000000=300",
                 "256x5000=100000", "256x4097=5000", "100000000000000000000000=5", "100000000000000000000000x2=10",
                 "256x1000000000000000000000000000000000000000=5", "99999999999999999999999999999999999999999=3"]:
        c.append(_cli(f"{base} --steps-to-target '{item}'", "steps_to_target|steps-to-target"))
    for bs in ["100000000000000000000000", "64,100000000000", "1000000000", "1-100000000000"]:
        c.append(_cli(PLAN_B.replace("--batch-size 256", f"--batch-size '{bs}'"), "batch_size|batch-size"))
    c.append(_cli(f"{PLAN_B} --workers 10000000", "workers"))
    c.append(_cli(f"{PLAN_A} --batch-size 100000000", "batch_size"))
    # --step-time given twice
    for st in ["--step-time 64=15ms --step-time 64=20ms", "--step-time 64=15ms,64=20ms", "--step-time 10ms --step-time 20ms",
               "--step-time 64=15ms --step-time 10ms", "--step-time 64=15ms,512=40ms --step-time 512=41ms"]:
        c.append(_cli(PLAN_B.replace("--step-time 10ms", st), "step_time|step-time"))
    # --method-option given twice
    hb = f"{PLAN_A} --method echoed_heavy_ball"
    for mo in ["--method-option momentum=0.9 --method-option momentum=0.5",
               "--method-option momentum=0.9 --method-option ' momentum =0.5'",
               "--method-option momentum=0.9 --method-option momentum=0.9"]:
        c.append(_cli(f"{hb} {mo}", "method-option|method_options"))
    c.append(_cli(f"{PLAN_A} --method echoed_adam --method-option beta2=0.9 --method-option beta2=0.99",
                  "method-option|method_options"))
    # figures and the planner's form (a) in the base install (no pyarrow, no pandas)
    for argv in ["figures --quick --out {tmp}/f", "figures --quick --only greedy_vs_fixed --out {tmp}/f",
                 "figures --quick --only convergence_vs_echo,greedy_vs_fixed --out {tmp}/f", f"{PLAN_A}"]:
        c.append(_cli(argv, "echosim[sweep]", setup="base"))
    # echosim.plan's measurements and batch sizes
    for label, steps in [("(256, 4): 3", {(256, 4): 3}), ("(256, 4): [8, 3]", {(256, 4): [8, 3]}),
                         ("(256, 4): 3.99", {(256, 4): 3.99}), ("(256, 10**20): 10**21", {(256, 10 ** 20): 10 ** 21}),
                         ("(256, 4097): 10**5", {(256, 4097): 10 ** 5}), ("10**23: 20", {10 ** 23: 20}),
                         ("(10**23, 2): 20", {(10 ** 23, 2): 20}), ("2**63: 5", {2 ** 63: 5}),
                         ("(2**70, 2**70): 2**71", {(2 ** 70, 2 ** 70): 2 ** 71})]:
        c.append(_api(f"plan(steps_to_target={{64: 5000, 1024: 900, {label}}})", "steps_to_target",
                      steps_to_target={**STEPS, **steps}))
    for label, kw, needle in [
        ("batch_size=10**23", {"batch_size": 10 ** 23}, "batch_size"),
        ("batch_size=[256, 10**12]", {"batch_size": [256, 10 ** 12]}, "batch_size"),
        ("batch_size=2**63", {"batch_size": 2 ** 63}, "batch_size"),
        ("batch_size=10**7, problem='logistic'", {"batch_size": 10 ** 7, "problem": "logistic"}, "batch_size"),
        ("workers=10**7", {"workers": 10 ** 7}, "workers"),
        ("max_echo=10**20", {"max_echo": 10 ** 20}, "max_echo"),
        ("echoes=[2, 10**6]", {"echoes": [2, 10 ** 6]}, "echo"),
    ]:
        c.append(_api(f"plan({label})", needle, **kw))
    # 0.1 paths
    for module, names in {**NAMES_0_1, **PUBLIC_0_1}.items():
        for name in names:
            c.append(Case("moved", f"from {module} import {name}", (module,), call={"module": module, "name": name},
                          expect="public" if module in PUBLIC_0_1 else "warn"))
    # writes on a target that fails
    for target in ("full", "readonly"):
        c.append(Case("write", f"sweep --out on a {target} target (previous tables there)", ("{out}",),
                      argv="sweep {toml} --out {out} --store {tmp}/s --workers 1 --no-plot --quiet", setup=target))
        c.append(Case("write", f"plan --plot on a {target} target (previous figure there)", ("{out}",),
                      argv=f"{PLAN_B} --seeds 1 --plot {{out}}/k.png", setup=target))
        c.append(Case("write", f"plan --json FILE on a {target} target (previous JSON there)", ("{out}",),
                      argv=f"{PLAN_B} --seeds 1 --json {{out}}/k.json", setup=target))
    c.append(Case("write", "sweep --out with summary.parquet a link to another file", (),
                  argv="sweep {toml} --out {out} --store {tmp}/s --workers 1 --no-plot --quiet", setup="link",
                  expect="ok"))
    c.append(Case("write", "plan --plot onto a link to another file", (),
                  argv=f"{PLAN_B} --seeds 1 --plot {{out}}/k.png", setup="link", expect="ok"))
    c.append(Case("write", "plan --json FILE onto a link to another file", (),
                  argv=f"{PLAN_B} --seeds 1 --json {{out}}/k.json", setup="link", expect="ok"))
    return c


# --------------------------------------------------------------------------- children


class _Work(BaseException):
    """Raised by a tripwire: the planner started simulating before refusing its input."""


def _hide_extras():
    for name in list(sys.modules):
        if name.split(".")[0] in ("pyarrow", "pandas"):
            del sys.modules[name]
    for name in ("pyarrow", "pandas"):
        sys.modules[name] = None


def _child_cli(argv, setup):
    if setup == "base":
        _hide_extras()
    return harness.cli_status(argv)


def _child_api(kw):
    from echosim.pipeline import schedule
    from echosim.planner import plan, simulated

    def tripwire(*a, **k):
        raise _Work()

    schedule.simulate = tripwire
    simulated.run_config = tripwire
    args = {"batch_size": 256, "steps_to_target": STEPS, "seeds": 1, "processes": 1, **kw}
    if "problem" in kw:
        args.pop("steps_to_target")
    try:
        plan("80ms", "10ms", **args)
    except _Work:
        return {"outcome": "work"}
    except ValueError as exc:
        return {"outcome": "ValueError", "message": " ".join(str(exc).split())}
    except BaseException as exc:  # noqa: BLE001
        return {"outcome": type(exc).__name__, "message": str(exc)[:300]}
    return {"outcome": "returned"}


def _child_moved(module, name):
    import importlib
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mod = importlib.import_module(module)
            getattr(mod, name)
        except Exception as exc:  # noqa: BLE001
            return {"outcome": type(exc).__name__, "message": str(exc)[:300]}
    warned = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning) and module in str(w.message)]
    return {"outcome": "resolved", "warned": warned}


def _fork(fn, tmp: str, timeout: float):
    """fn() in a forked child (`harness.fork_call`, the run store inside `tmp`):
    (rc or None, out, err, result, seconds)."""
    o = harness.fork_call(fn, tmp, timeout, env={"ECHOSIM_STORE": str(Path(tmp) / "store")})
    return o.status, o.out, o.err, o.result, o.seconds


# --------------------------------------------------------------------------- targets that fail


def _mount(point: Path, size: str) -> bool:
    point.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)],
                          capture_output=True, check=False).returncode == 0


def _umount(point: Path) -> None:
    subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


def _snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file() and not p.is_symlink()}


def _write_case(case: Case, tmp: str, toml: str):
    """Run a write case in a child; returns its class."""
    root = Path(tmp)
    out = root / "mnt" / "o"
    if case.setup in ("full", "readonly") and not _mount(root / "mnt", "1m"):
        return "skipped", None, "", "", 0.0
    try:
        out.mkdir(parents=True)
        (root / "first").mkdir()
        argv = case.argv.replace("{toml}", toml).replace("{out}", str(out)).replace("{tmp}", tmp)
        name = "summary.parquet" if argv.startswith("sweep") else "k.json" if "--json" in argv else "k.png"
        if argv.startswith("plan"):  # a small previous file: an in-place write could not fit where it was
            (root / "first" / name).write_bytes(b"the previous file")
        else:
            first = shlex.split(argv.replace(str(out), str(root / "first")))
            rc, _, err, _, _ = _fork(lambda: _child_cli(first, ""), tmp, case.timeout)  # the previous tables
            if rc != 0:
                return "setup failed", rc, "", err, 0.0
        for p in (root / "first").iterdir():
            if p.is_file() and not p.name.startswith("."):
                shutil.copyfile(p, out / p.name)
        victim = root / "victim"
        if case.setup == "link":
            victim.write_bytes(b"precious")
            (out / name).unlink(missing_ok=True)
            (out / name).symlink_to(victim)
        before = _snapshot(out)
        if case.setup == "full":
            fd = os.open(root / "mnt" / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(fd)
        elif case.setup == "readonly":
            subprocess.run(["mount", "-o", "remount,ro", str(root / "mnt")], check=True, capture_output=True)
        rc, stdout, err, _, secs = _fork(lambda: _child_cli(shlex.split(argv), ""), tmp, case.timeout)
        after = _snapshot(out)
        litter = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
        if case.expect == "ok":
            cls = "clean" if rc == 0 and victim.read_bytes() == b"precious" and not (out / name).is_symlink() \
                else ("followed" if rc == 0 else "status")
            return cls, rc, stdout, err, secs
        lines = [line for line in err.splitlines() if line.strip()]
        if "Traceback" in err:
            cls = "traceback"
        elif rc != 2:
            cls = "status"
        elif len(lines) != 1:
            cls = "lines"
        elif any(before[n] != after.get(n) for n in before):
            cls = "damaged"
        elif litter:
            cls = "litter"
        elif str(out) not in lines[0] or not ("left as it was" in lines[0] or "read-only" in lines[0].lower()):
            cls = "field"
        else:
            cls = "clean"
        return cls, rc, stdout, err, secs
    finally:
        if case.setup in ("full", "readonly"):
            _umount(root / "mnt")


# --------------------------------------------------------------------------- running


def run_case(case: Case, tmp: str, toml: str):
    if case.kind == "cli":
        argv = shlex.split(case.argv.replace("{tmp}", tmp))
        rc, out, err, _, secs = _fork(lambda: _child_cli(argv, case.setup), tmp, case.timeout)
        o = harness.Outcome(rc, out, err, secs)
        return harness.classify_cli(o, case.expect, case.needles, timeout=case.timeout), rc, err
    if case.kind == "api":
        rc, out, err, res, secs = _fork(lambda: _child_api(case.call), tmp, case.timeout)
        if res is None:
            return ("hang" if rc is None else "traceback"), rc, err
        o = res["outcome"]
        if o == "ValueError":
            return ("clean" if any(alt in res["message"] for alt in case.needles[0].split("|")) else "field"), rc, \
                res["message"]
        return {"work": "work", "returned": "silent"}.get(o, "traceback"), rc, res.get("message", o)
    if case.kind == "moved":
        rc, out, err, res, secs = _fork(lambda: _child_moved(**case.call), tmp, case.timeout)
        if res is None:
            return "traceback", rc, err
        if res["outcome"] != "resolved":
            return "missing", rc, f"{res['outcome']}: {res['message']}"
        if case.expect == "public":
            return ("clean" if not res["warned"] else "warned"), rc, ""
        return ("clean" if res["warned"] else "nowarn"), rc, ""
    cls, rc, out, err, secs = _write_case(case, tmp, toml)
    return cls, rc, err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2, help="cases at once (default 2)")
    ap.add_argument("--only", help="only the cases whose label or group contains this text")
    ap.add_argument("--show", action="store_true", help="print every case's stderr")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    harness.add_options(ap, smoke="the first case of each group but the writes: checks the script runs")
    args = ap.parse_args(argv)

    todo = cases()
    if args.only:
        todo = [c for c in todo if args.only in c.label or args.only in c.group]
    if args.smoke:
        firsts = {}
        for c in todo:
            if c.kind != "write":
                firsts.setdefault(c.group, c)
        todo = list(firsts.values())
    if args.list:
        for c in todo:
            print(f"{c.group:12} {c.expect:6} {c.label}")
        return 0
    with harness.Session("bad_inputs_api", args, argv) as session:
        t_start = time.perf_counter()
        results = [None] * len(todo)
        with tempfile.TemporaryDirectory(prefix="echosim-bad-api-") as root:
            toml = Path(root) / "tiny.toml"
            toml.write_text(TINY)
            from echosim.experiments import executors

            executors.warm_up(None)  # forked children inherit the kernels

            def one(i):
                tmp = tempfile.mkdtemp(dir=root, prefix=f"case{i}-")
                results[i] = run_case(todo[i], tmp, str(toml))

            from concurrent.futures import ThreadPoolExecutor

            serial = [i for i, c in enumerate(todo) if c.kind == "write"]  # mounts: one at a time
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                list(pool.map(one, [i for i in range(len(todo)) if i not in serial]))
            for i in serial:
                one(i)
        wall = time.perf_counter() - t_start
        print("# Malformed input beyond the command lines: one clean answer?")
        print()
        print(f"(a forked child per case, {args.jobs} at once): {len(todo)} cases in {wall:.0f} s.")
        print()
        print("| cases | tried | clean | rate |")
        print("| --- | ---: | ---: | ---: |")
        counts = {}
        groups = list(dict.fromkeys(c.group for c in todo))
        for g in groups + ["all"]:
            idx = [i for i, c in enumerate(todo) if g in ("all", c.group) and results[i][0] != "skipped"]
            if idx:
                clean = sum(results[i][0] == "clean" for i in idx)
                counts[g] = {"tried": len(idx), "clean": clean, "rate": clean / len(idx)}
                print(f"| {g} | {len(idx)} | {clean} | {100 * clean / len(idx):.1f}% |")
        skipped = [c.label for c, r in zip(todo, results) if r[0] == "skipped"]
        if skipped:
            print(f"\nskipped (no tmpfs mount here): {len(skipped)}")
        bad = [(c, r) for c, r in zip(todo, results) if r[0] not in ("clean", "skipped")]
        if bad:
            print()
            print("| class | group | case | status | what it said (last lines) |")
            print("| --- | --- | --- | ---: | --- |")
            for c, (cls, rc, err) in bad:
                text = " / ".join(line.strip() for line in str(err).strip().splitlines()[-2:])[:240].replace("|", "\\|")
                print(f"| {cls} | {c.group} | `{c.label}` | {rc} | {text} |")
        if args.show:
            for c, (cls, rc, err) in zip(todo, results):
                print(f"\n## {cls}: {c.label} (exit {rc})\n```\n{str(err).strip()}\n```")
        session.results = {"jobs": args.jobs, "counts": counts, "skipped": skipped,
                           "cases": [{"group": c.group, "label": c.label, "class": cls, "status": rc,
                                      "said": str(err).strip()[-300:]} for c, (cls, rc, err) in zip(todo, results)]}
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
