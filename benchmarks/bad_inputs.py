"""Malformed input, as a demanding user would type it: how much of it gets one clean line?

    python benchmarks/bad_inputs.py                 # every case, 2 at a time, a fork per case
    python benchmarks/bad_inputs.py --subprocess    # every case as its own `python -m echosim ...`
    python benchmarks/bad_inputs.py --only sweep.seed --show

Each case is a command line (and, for some, a file it reads) with what a clean answer
looks like:

* ``error``: exit status 2, nothing on stdout, exactly one non-empty line on stderr,
  no traceback, and the line names the field (every needle of the case is in it; a
  needle ``a|b`` accepts either spelling, e.g. the planner's ``step_time`` for ``--step-time``),
  within the case's time limit (10 s for the Dask scheduler cases, 60 s otherwise);
* ``warn``: the command works (exit status 0) and says, on one stderr line starting
  with ``warning:``, which field holds a legal but pointless value.

Anything else is counted against the rate, with its class: ``traceback``, ``lines``
(more than one line on stderr, e.g. NumPy's RuntimeWarning lines), ``status``,
``field`` (the line does not name the field), ``silent`` (accepted without a word),
``stdout`` (work done before the refusal) or ``hang`` (killed at the time limit).

The default mode imports echosim once and forks a child per case (its stdout and
stderr redirected to files, its own session, killed with its children at the limit),
which is fast; ``--subprocess`` starts a fresh interpreter per case, which is what a
user sees. The cases that cover the planner (``plan ...``) are counted apart.
Prints a Markdown report: load average, counts and rate, and every unclean case.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

TINY = textwrap.dedent("""\
    [problem]
    kind = "logistic"
    dim = 3
    [pipeline]
    arrival = {kind = "exponential", mean = 3.0}
    [optimizer]
    lr = [1.0, 3.0]
    batch_size = 8
    echo = [1, 2]
    [sweep]
    n_batches = 40
    name = "bad"
""")

NOPIPE = textwrap.dedent("""\
    [problem]
    kind = "logistic"
    dim = 3
    [optimizer]
    lr = 1.0
    batch_size = 8
    [sweep]
    n_batches = 40
    name = "nopipe"
""")

WITH_QUICK = TINY + '[quick]\n"sweep.n_batches" = 20\n'
GREEDY = TINY.replace("echo = [1, 2]", "").replace("[pipeline]", '[pipeline]\npolicy = "greedy"')
EXAMPLE = TINY.replace("echo = [1, 2]", "echo = 2").replace("[pipeline]", '[pipeline]\npolicy = "example"')


def _files(d: Path) -> dict[str, str]:
    """The files the cases read, written into `d`; placeholder name -> path."""
    f = {}

    def put(name, data, mode="w"):
        p = d / name
        if mode == "wb":
            p.write_bytes(data)
        else:
            p.write_text(data, encoding="utf-8")
        f[name.replace(".", "_")] = str(p)
        return p

    put("tiny.toml", TINY)
    put("nopipe.toml", NOPIPE)
    put("quick.toml", WITH_QUICK)
    put("greedy.toml", GREEDY)
    put("example.toml", EXAMPLE)
    put("empty.toml", "")
    put("bad.toml", "[optimizer\n")
    put("garbage.toml", bytes(range(256)) * 64, "wb")
    put("latin1.toml", "[problem]\nkind = 'logistique é'\n".encode("latin-1"), "wb")
    put("huge.toml", "# padding\n" * (3 << 20))  # 30 MiB of comments
    put("toplevel.toml", "foo = 1\n" + TINY)
    put("nosweep.toml", TINY.split("[sweep]")[0])
    put("noproblem.toml", "[optimizer]\nlr = 1.0\nbatch_size = 8\n[sweep]\nn_batches = 10\n")
    put("notable.toml", "problem = 3\n[optimizer]\nlr = 1.0\nbatch_size = 8\n[sweep]\nn_batches = 10\n")
    put("quickbad.toml", TINY + '[quick]\n"optimizer.nope" = 1\n')
    put("quicknotable.toml", TINY + 'quick = 3\n')
    put("quickplain.toml", TINY + '[quick]\nn_batches = 3\n')
    put("jointbad.toml", TINY + '[joint]\n"optimizer.batch_size, sweep.n_batches" = [[4, 10], [8]]\n')
    put("jointnolist.toml", TINY + '[joint]\n"optimizer.batch_size, sweep.n_batches" = 3\n')
    put("jointone.toml", TINY + '[joint]\n"optimizer.batch_size" = [[4]]\n')
    put("jointwide.toml", TINY + '[joint]\n"sweep.seed, sweep.n_batches" = [[1, 10]]\n')
    put("jointtwice.toml", TINY + '[joint]\n"optimizer.batch_size, sweep.n_batches" = [[4, 10]]\n')
    put("trace_empty.csv", "")
    put("trace_text.csv", "time\nfast\nslow\n")
    put("trace_neg.csv", "time\n1.0\n-2.0\n")
    put("trace_zero.csv", "0\n0\n")
    put("trace_nan.csv", "time\nnan\n1\n")
    put("trace_inf.csv", "time\ninf\n1\n")
    put("trace_big.csv", "time\n" + "1e308\n" * 1000)
    put("trace_wide.csv", "1,2\n3,4\n")
    put("trace_hdr.csv", "a,b\n1,2\n")
    put("trace_ok.csv", "time\n" + "".join(f"{3 + (i % 7) * 0.5}\n" for i in range(200)))
    put("trace_huge.csv", "time\n" + "3.0\n" * ((257 << 20) // 4))  # 257 MiB: over the size limit
    put("trace_ms.csv", "time\n" + "80\n" * 100)
    put("trace.npy", b"not numpy at all", "wb")
    put("trace.txt", "1\n2\n")
    put("data_garbage.csv", "a,b\nx,y\n")
    put("data_empty.csv", "")
    manifest_dir = d / "bad_manifest"
    manifest_dir.mkdir()
    (manifest_dir / "manifest.json").write_text("{not json")
    f["bad_manifest"] = str(manifest_dir)
    ids_dir = d / "bad_ids"
    ids_dir.mkdir()
    (ids_dir / "manifest.json").write_text('{"run_ids": ["../../etc/passwd"]}')
    f["bad_ids"] = str(ids_dir)
    empty_dir = d / "empty_dir"
    empty_dir.mkdir()
    f["empty_dir"] = str(empty_dir)
    loop = d / "loop.toml"
    loop.symlink_to(loop)
    f["loop_toml"] = str(loop)
    put("a_file", "x")
    f["file"] = f.pop("a_file")
    return f


@dataclass
class Case:
    argv: str
    needles: tuple = ()
    expect: str = "error"
    timeout: float = 60.0

    @property
    def group(self) -> str:
        return "plan" if self.argv.startswith("plan") else "other"


def _c(argv, *needles, expect="error", timeout=60.0):
    return Case(argv, tuple(needles), expect, timeout)


S = "sweep {tiny_toml} --out {tmp}/o --store {tmp}/s --workers 1 --no-plot --quiet"
D = "sweep {tiny_toml} --dry-run --out {tmp}/o --store {tmp}/s"
P = "sweep {nopipe_toml} --out {tmp}/o --store {tmp}/s --workers 1 --no-plot --quiet"
BIG = 2 ** 70


def _set(key, value, base=S):
    return f"{base} --set '{key}={value}'"


def _field_cases() -> list[Case]:
    """Bad values for every config key, set with --set on a tiny sweep."""
    cases = []

    def bad(key, values, *extra, base=S, expect="error"):
        for v in values:
            cases.append(_c(_set(key, v, base), key, *extra, expect=expect))

    # problem
    bad("problem.kind", ['"nope"', "3", "true", "[]"])
    bad("problem.dim", ["0", "-1", "1.5", '"x"', "true", str(BIG), "1000000000000", "[0, 3]"])
    bad("problem.design", ['"x"', "1"])
    bad("problem.decay", ["-1", "nan", "inf", '"x"'])
    bad("problem.radius", ["0", "-1", "nan", "inf", "1e300"])
    bad("problem.w_star_norm", ["-1", "nan", "inf", "1e300"])
    bad("problem.noise", ['"x"'])
    bad("problem.noise_std", ["-1", "nan"])
    bad("problem.name", ['"iris"'])
    bad("problem.l2", ["0.1"])
    bad("problem.frob", ["1"])
    # pipeline
    bad("pipeline.arrival", ["0", "-1", '"x"', "nan", "inf", "1e308", "[]", "true",
                             '{kind="nope"}', '{kind="gamma"}', '{kind="gamma", mean=-1}',
                             '{kind="gamma", mean=8, cv=-1}', '{kind="gamma", mean=8, cv=1e300}',
                             '{kind="exponential", mean=8, frob=1}', '{kind="affine", fixed=-1, per_example=0.1}',
                             '{kind="pareto", mean=8, alpha=0.5}', '{kind="lognormal", mean=1e300, cv=1e300}',
                             '{kind="trace", path="/nonexistent.csv"}', '{kind="trace", path="/dev/zero"}',
                             '{kind="trace", times=[]}', '{kind="trace", times=[1, -1]}',
                             '{kind="trace", times=[1e308, 1e308]}', '{kind="trace", times=["a"]}',
                             '{kind="trace", path="{trace_empty_csv}"}', '{kind="trace", path="{trace_text_csv}"}',
                             '{kind="trace", path="{trace_neg_csv}"}', '{kind="trace", path="{trace_zero_csv}"}',
                             '{kind="trace", path="{trace_nan_csv}"}', '{kind="trace", path="{trace_inf_csv}"}',
                             '{kind="trace", path="{trace_big_csv}"}', '{kind="trace", path="{trace_wide_csv}"}',
                             '{kind="trace", path="{trace_hdr_csv}"}', '{kind="trace", path="{trace_npy}"}',
                             '{kind="trace", path="{trace_txt}"}', '{kind="trace", path="{trace_huge_csv}"}',
                             '{kind="trace", path="{empty_dir}"}',
                             '{kind="trace", path="{trace_ok_csv}", mode="x"}',
                             '{kind="trace", path="{trace_ok_csv}", column="nope"}',
                             '{kind="trace", path="{trace_ok_csv}", scale=-1}'])
    bad("pipeline.workers", ["0", "-1", "1.5", '"x"', str(BIG), "1000000000", "1000000000000"])
    bad("pipeline.workers", ["100"], expect="warn")
    bad("pipeline.prefetch", ["0", "-1", "2.5", str(BIG)])
    bad("pipeline.prefetch", ["1000000000000"], expect="warn")
    bad("pipeline.step_time", ["0", "-1", '"x"', "nan", "inf", "1e308", '{kind="gamma", mean=1, cv=1e300}'])
    bad("pipeline.policy", ['"nope"', "1", '"Greedy"'])
    bad("pipeline.max_echo", ["5"])  # policy fixed: applies to no run
    bad("pipeline.shuffle_buffer", ["100"])  # policy fixed
    bad("pipeline.delivery", ['"x"'])
    bad("pipeline.blocking", ['"x"'])
    bad("pipeline.switch_overhead", ["-1", "nan", "inf", "1e308"])
    bad("pipeline.echo", ["2"])
    G = S.replace("{tiny_toml}", "{greedy_toml}")
    bad("pipeline.max_echo", ["0", "-1", "2.5", str(BIG)], base=G)
    bad("pipeline.max_echo", ["1000000000000"], base=G, expect="warn")
    E = S.replace("{tiny_toml}", "{example_toml}")
    bad("pipeline.shuffle_buffer", ["0", "-1", "1000000000000", str(BIG)], base=E)
    # optimizer
    bad("optimizer.method", ['"nope"', "1"])
    bad("optimizer.lr", ["-1", "nan", "inf", '"x"', "[]", "true", "{start=0, stop=1, num=3}",
                         "{start=1, stop=0.1, num=3}", "{start=1e-300, stop=1e300, per_decade=1000}",
                         "{start=1, stop=10, per_decade=0}", "{start=1, stop=10, num=0}",
                         "{start=1, stop=10, num=1000000000000}", "{start=1, stop=10, per_decade=1e308}",
                         "{start=1, stop=10, step=2}", "{start=1}", "{start=1, stop=10}",
                         "{start=1, stop=10, per_decade=2, num=3}", "{start=1, stop=10, per_decade=-1}",
                         "[1, -1]", "[1, nan]", '"Paper"'])
    bad("optimizer.batch_size", ["0", "-1", "1.5", '"x"', str(BIG), "1000000000000", "[]"])
    bad("optimizer.echo", ["0", "0.5", "-1", "nan", "inf", '"x"', "1000000000000", "1e300", str(BIG), "[1, 0]"])
    bad("optimizer.sub_batch", ["4"])  # echoed_gd: applies to no run
    SG = S + " --set optimizer.method=echoed_sgd"
    bad("optimizer.sub_batch", ["0", "-1", '"x"'], base=SG)
    bad("optimizer.replace", ['"x"', "1"], base=SG)
    bad("optimizer.sub_batch", ["64"], "batch_size", base=SG + " --set optimizer.replace=false")
    NE = S + " --set optimizer.method=echoed_nesterov"
    bad("optimizer.momentum", ["1", "-0.1", '"x"', "nan"], base=NE)
    PR = S + " --set optimizer.method=echoed_prox"
    bad("optimizer.lam", ["-1", "nan", "inf"], base=PR)
    bad("optimizer.frob", ["1"])
    # sweep
    bad("sweep.name", ["3", '["a", "b"]'])
    bad("sweep.seed", ["-1", str(BIG), str(2 ** 64), "1.5", '"x"', "[1, 2]"])
    bad("sweep.repetitions", ["0", "-1", str(BIG), "1000000000", "[1, 2]"])
    bad("sweep.n_batches", ["0", "-1", "1.5", str(BIG), "1000000000000", "[]"])
    bad("sweep.time_budget", ["100"], "n_batches")
    bad("sweep.log_every", ["0", "-1", '"x"', "1.5", "1000"])
    bad("sweep.log_points", ["0", "-1", '"x"'])
    bad("sweep.log_points", ["1000000000000"], expect="warn")
    bad("sweep.log_points", ["10"], "log_every", base=S + " --set sweep.log_every=2")
    bad("sweep.log_unit", ['"x"'])
    bad("sweep.max_steps", ["0", "-1", '"x"'])
    bad("sweep.dtype", ['"float16"', "64"])
    bad("sweep.rtol", ["0", "-1", "nan", "inf", '"x"', "[0.1, 0.2]"])
    bad("sweep.atol", ["0.1"], "rtol", base=S + " --set sweep.rtol=0.1")
    bad("sweep.atol", ["0", "-1", "nan"])
    bad("sweep.fraction", ["0", "1", "2", "nan"])
    bad("sweep.window", ["0", "-1", "1.5"])
    bad("sweep.window", ["1000000000", "100"], expect="warn")
    bad("sweep.rule", ['"x"'])
    bad("sweep.lr_extend", ["-1", "1.5", "1000000000"])
    bad("sweep.iterate", ['"x"'])
    bad("sweep.tune_by", ['"x"'])
    bad("sweep.tune_by", ['"time"'], base=P)
    bad("sweep.frob", ["1"])
    cases.append(_c(f"{P} --set sweep.time_budget=10", "sweep.time_budget", "sweep.n_batches"))
    return cases


def _file_cases() -> list[Case]:
    return [
        _c("sweep /nonexistent/x.toml", "/nonexistent/x.toml"),
        _c("sweep {empty_dir}", "{empty_dir}"),
        _c("sweep /dev/zero", "/dev/zero"),
        _c("sweep /dev/null", "problem"),
        _c("sweep {empty_toml}", "problem"),
        _c("sweep {bad_toml}", "TOML"),
        _c("sweep {garbage_toml}", "{garbage_toml}"),
        _c("sweep {latin1_toml}", "{latin1_toml}"),
        _c("sweep {huge_toml}", "{huge_toml}"),
        _c("sweep {toplevel_toml}", "foo"),
        _c("sweep {nosweep_toml}", "sweep"),
        _c("sweep {noproblem_toml}", "problem"),
        _c("sweep {notable_toml}", "problem"),
        _c("sweep {loop_toml}", "{loop_toml}"),
        _c("sweep {tiny_toml} --quick --dry-run", "--quick", "[quick]"),
        _c("sweep {quickbad_toml} --quick --dry-run", "optimizer.nope"),
        _c("sweep {quicknotable_toml} --quick --dry-run", "quick"),
        _c("sweep {quickplain_toml} --quick --dry-run", "n_batches"),
        _c("sweep {jointbad_toml} --dry-run", "joint"),
        _c("sweep {jointnolist_toml} --dry-run", "joint"),
        _c("sweep {jointone_toml} --dry-run", "joint"),
        _c("sweep {jointwide_toml} --dry-run", "sweep.seed"),
        _c("sweep {jointtwice_toml} --dry-run", "optimizer.batch_size"),
        _c(_set("problem.path", '"/dev/zero"', S + " --set problem.kind=dataset"), "problem.path"),
        _c(_set("problem.path", '"/nonexistent.csv"', S + " --set problem.kind=dataset"), "problem.path"),
        _c(_set("problem.path", '"{data_garbage_csv}"', S + " --set problem.kind=dataset"), "problem"),
        _c(_set("problem.path", '"{data_empty_csv}"', S + " --set problem.kind=dataset"), "problem"),
        _c(_set("problem.path", '"{empty_dir}"', S + " --set problem.kind=dataset"), "problem.path"),
        _c(_set("problem.name", '"nope"', S + " --set problem.kind=dataset"), "problem"),
        _c(S + " --set problem.kind=dataset", "problem."),
    ]


def _cli_cases() -> list[Case]:
    c = []
    # --set syntax
    for item in ["noequals", "=1", "optimizer=1", "optimizer.lr", ".lr=1", "optimizer..lr=1"]:
        c.append(_c(f"{S} --set '{item}'", "--set"))
    for item, needle in [("optimizer.lr.x=1", "optimizer.lr"), ("sweep.n_batches=1=2", "sweep.n_batches"),
                         ("optimizer.lr=[1,", "optimizer.lr"), ("optimizer.lr=", "optimizer.lr")]:
        c.append(_c(f"{S} --set '{item}'", needle))
    # sweep flags
    for w in ["0", "-1", "x", "1.5", ""]:
        c.append(_c(f"sweep {{tiny_toml}} --workers '{w}'", "--workers"))
    for addr, t in [("not-an-address", 10), ("tcp://127.0.0.1:1", 10), ("tcp://host-without-port", 10),
                    ("tcp://:8786", 10), ("tcp://127.0.0.1:99999", 10), ("", 10), ("http://127.0.0.1:1", 10),
                    ("tcp://256.1.1.1:8786", 10), ("tcp://127.0.0.1:port", 10)]:
        c.append(_c(f"{S} --scheduler '{addr}'", "scheduler", timeout=t))
    c += [
        _c("sweep {tiny_toml} --out {file} --store {tmp}/s", "{file}"),
        _c("sweep {tiny_toml} --out {file}/sub --store {tmp}/s", "{file}/sub"),
        _c("sweep {tiny_toml} --out /proc/echosim --store {tmp}/s --workers 1", "/proc/echosim"),
        _c("sweep {tiny_toml} --out '' --store {tmp}/s", "--out"),
        _c("sweep {tiny_toml} --out {tmp}/o --store {file}", "{file}"),
        _c("sweep {tiny_toml} --out {tmp}/o --store {file}/sub", "{file}/sub"),
        _c("sweep {tiny_toml} --out {tmp}/o --store /proc/echosim --workers 1 --quiet", "/proc/echosim"),
        _c("sweep {tiny_toml} --out {tmp}/o --store ''", "--store"),
        _c("sweep {tiny_toml} --bogus", "--bogus"),
        _c("sweep {tiny_toml} {tiny_toml}", "unrecognized"),
        _c("sweep {tiny_toml} --set", "--set"),
    ]
    # run
    for flag, vals in {"--echo": ["0", "0.5", "x", "inf", "nan", "-1", "1e300"],
                       "--lr": ["-1", "inf", "nan", "x"],
                       "--n-batches": ["0", "-1", "x", "1e3", "1000000000000"],
                       "--batch-size": ["0", "-1", "x", "1000000000000"],
                       "--seed": ["-1", "x", str(BIG)]}.items():
        key = {"--n-batches": "n-batches", "--batch-size": "batch"}.get(flag, flag)
        for v in vals:
            needle = {"1000000000000": "sweep.n_batches" if flag == "--n-batches" else "batch_size",
                      "1e300": "echo", str(BIG): "seed"}.get(v, key)
            c.append(_c(f"run {flag} '{v}'", needle))
    c += [
        _c("run {tiny_toml}", "runs", "--set"),
        _c("run {empty_dir}", "{empty_dir}"),
        _c("run /dev/zero", "/dev/zero"),
        _c("run --set optimizer.method=nope", "optimizer.method"),
        _c("run --set optimizer.lr=[1,2]", "optimizer.lr"),
        _c("run --json --verbose --set sweep.seed=-1", "sweep.seed"),
        _c("run --set problem.w_star_norm=1e300", "problem.w_star_norm"),
    ]
    # plot
    c += [
        _c("plot /nonexistent/results", "/nonexistent/results"),
        _c("plot {file}", "{file}"),
        _c("plot {empty_dir}", "{empty_dir}"),
        _c("plot {bad_manifest}", "manifest.json"),
        _c("plot {bad_ids}", "run_ids"),
        _c("plot {empty_dir} --format xyz", "format"),
        _c("plot {empty_dir} --format ''", "--format"),
        _c("plot {empty_dir} --echo x", "--echo"),
        _c("plot", "results"),
    ]
    # figures
    c += [
        _c("figures --only nope --out {tmp}/f", "only"),
        _c("figures --only , --out {tmp}/f", "only"),
        _c("figures --workers 0", "--workers"),
        _c("figures --quick --only greedy_vs_fixed --out {file}", "{file}"),
    ]
    # bounds
    base = "bounds echoed_gd_bound --beta 0.25 --rho 1 --D 2 --B 64 --T 500 --K 4"
    c += [
        _c("bounds nope", "nope"),
        _c("bounds echoed_gd_bound", "missing", "--beta"),
        _c("bounds echoed_gd_bound --beta", "--beta"),
        _c("bounds echoed_gd_bound --beta 1 --beta 2", "--beta"),
        _c("bounds echoed_gd_bound --zeta 1", "--zeta"),
        _c("bounds echoed_gd_bound beta 1", "beta"),
        _c("bounds echoed_gd_bound --K 1,2 --B 1,2,3 --beta 1 --rho 1 --D 1 --T 10", "B of shape"),
        _c("bounds list extra", "list"),
        _c("bounds saturation_echo --eps 0 --beta 1 --rho 1 --B 64", "eps"),
    ]
    for name, vals in {"beta": ["x", "-1", "nan", "inf", "0"], "K": ["0", "0.5", "-1"],
                       "B": ["0", "-1"], "T": ["0", "-1", "nan"], "D": ["-1", "inf"],
                       "rho": ["-1", "nan"]}.items():
        for v in vals:
            argv = re.sub(rf"--{name} \S+", f"--{name} '{v}'", base)
            c.append(_c(argv, name))
    c += [_c("info extra", "extra"), _c("frobnicate", "invalid choice"), _c("", "subcommand")]
    return c


def _plan_cases() -> list[Case]:
    base = "plan --loader 'gamma(mean=80ms, cv=0.5)' --step-time 10ms --batch-size 256 --steps-to-target 64=5000 " \
           "--steps-to-target 1024=900"
    c = []
    for loader in ["x", "gamma(mean=-1ms)", "gamma(mean=80ms, cv=-1)", "gamma(mean=80)", "nope(mean=1ms)",
                   "trace(/dev/zero)", "trace(/nonexistent.csv)", "trace({trace_big_csv})", "trace({trace_text_csv})",
                   "trace({trace_empty_csv})", "0ms", "-5ms", "inf", "nan ms", "80 parsecs", "gamma(mean=80ms"]:
        c.append(_c(base.replace("gamma(mean=80ms, cv=0.5)", loader), "loader"))
    for st in ["0", "x", "-1ms", "0ms", "nan", "inf s"]:
        c.append(_c(base.replace("--step-time 10ms", f"--step-time '{st}'"), "step_time|step-time"))
    for bs in ["0", "x", "-4", "1.5", "4-2"]:
        c.append(_c(base.replace("--batch-size 256", f"--batch-size '{bs}'"), "batch_size|batch-size"))
    c += [
        _c(base + " --workers 0", "workers"),
        _c(base + " --workers x", "workers"),
        _c(base + " --echo 0", "echo"),
        _c(base + " --echo x", "echo"),
        _c(base + " --max-echo 0", "max-echo|max_echo"),
        _c(base + " --prefetch 0", "prefetch"),
        _c(base + " --seeds 0", "seeds"),
        _c(base + " --policies nope", "policies"),
        _c(base + " --plot x.txt", "plot"),
        _c(base + " --plot /nonexistent/x.png", "plot"),
        _c(base + f" --seed {BIG}", "seed"),
        _c(base + " --target -1", "target"),
        _c(base + " --target nan", "target"),
        _c(base + " --problem logistic", "problem"),
        _c(base.split(" --steps-to-target")[0] + " --steps-to-target 64=5000", "steps_to_target|steps-to-target"),
        _c(base.split(" --steps-to-target")[0] + " --steps-to-target x=1 --steps-to-target 2=3",
           "steps_to_target|steps-to-target"),
        _c(base.split(" --steps-to-target")[0] + " --steps-to-target 64=-1 --steps-to-target 128=10",
           "steps_to_target|steps-to-target"),
        _c(base.split(" --steps-to-target")[0] + " --problem nope", "problem"),
        _c(base + " --loader-profile 64=x.csv", "loader_profile|loader-profile"),
        _c("plan --step-time 10ms --batch-size 256", "loader"),
    ]
    return c


def all_cases() -> list[Case]:
    return _field_cases() + _file_cases() + _cli_cases() + _plan_cases()


# --------------------------------------------------------------------------- running


def classify(case: Case, outcome) -> str:
    """'clean' or the reason it is not (see the module docstring): `harness.classify_cli`."""
    return harness.classify_cli(outcome, case.expect, case.needles, timeout=case.timeout)


def _argv(case: Case, files: dict, tmp: str) -> list[str]:
    text = case.argv
    for k, v in files.items():
        text = text.replace("{" + k + "}", v)
    text = text.replace("{tmp}", tmp)
    return shlex.split(text)


def _needles(case: Case, files: dict, tmp: str) -> tuple:
    out = []
    for n in case.needles:
        for k, v in files.items():
            n = n.replace("{" + k + "}", v)
        out.append(n.replace("{tmp}", tmp))
    return tuple(out)


def _fork_run(argv, tmp, timeout):
    """main(argv) in a forked child (own session, cwd `tmp`): a `harness.Outcome`."""
    return harness.fork_call(lambda: harness.cli_status(argv), tmp, timeout,
                             env={"ECHOSIM_STORE": str(Path(tmp) / "store")})


def _subprocess_run(argv, tmp, timeout):
    """``python -m echosim ARGV`` in a fresh interpreter (own session): a `harness.Outcome`."""
    env = dict(os.environ, ECHOSIM_STORE=str(Path(tmp) / "store"))
    return harness.run_command([sys.executable, "-m", "echosim", *argv], cwd=tmp, env=env, timeout=timeout,
                               session=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subprocess", action="store_true", help="a fresh `python -m echosim` per case")
    ap.add_argument("--jobs", type=int, default=2, help="cases at once (default 2)")
    ap.add_argument("--only", help="only the cases whose command line contains this text")
    ap.add_argument("--show", action="store_true", help="print every case's stderr")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    harness.add_options(ap, smoke="the first case of each kind (field, file, command line, plan) only")
    args = ap.parse_args(argv)

    cases = all_cases()
    if args.only:
        cases = [c for c in cases if args.only in c.argv]
    if args.smoke:
        cases = [make()[0] for make in (_field_cases, _file_cases, _cli_cases, _plan_cases)]
    if args.list:
        for c in cases:
            print(f"{c.expect:5} {c.argv}")
        return 0
    mode = "a fresh interpreter per case" if args.subprocess else "a forked child per case"
    with harness.Session("bad_inputs", args, argv) as session:
        t_start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="echosim-bad-") as root:
            files = _files(Path(root))
            from echosim.experiments import executors

            executors.warm_up(None)  # forked children inherit the kernels, fresh interpreters load them from the cache
            run = _subprocess_run if args.subprocess else _fork_run
            results = [None] * len(cases)

            def one(i):
                case = cases[i]
                tmp = tempfile.mkdtemp(dir=root, prefix=f"case{i}-")
                o = run(_argv(case, files, tmp), tmp, case.timeout + 5)
                case_n = Case(case.argv, _needles(case, files, tmp), case.expect, case.timeout)
                results[i] = (classify(case_n, o), o)

            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                list(pool.map(one, range(len(cases))))
        wall = time.perf_counter() - t_start

        print("# Malformed input: one clean line?")
        print()
        print(f"({mode}, {args.jobs} at once): {len(cases)} cases in {wall:.0f} s.")
        print()
        print("| cases | tried | clean | rate |")
        print("| --- | ---: | ---: | ---: |")
        counts = {}
        for label, keep in (("all but plan", lambda c: c.group != "plan"), ("plan", lambda c: c.group == "plan"),
                            ("all", lambda c: True)):
            idx = [i for i, c in enumerate(cases) if keep(c)]
            if not idx:
                continue
            clean = sum(results[i][0] == "clean" for i in idx)
            counts[label] = {"tried": len(idx), "clean": clean, "rate": clean / len(idx)}
            print(f"| {label} | {len(idx)} | {clean} | {100 * clean / len(idx):.1f}% |")
        bad = [(c, r) for c, r in zip(cases, results) if r[0] != "clean"]
        if bad:
            print()
            print("| class | expected | command | status | s | stderr (first lines) |")
            print("| --- | --- | --- | ---: | ---: | --- |")
            for c, (cls, o) in bad:
                first = " / ".join(line.strip() for line in o.err.strip().splitlines()[-3:])[:300].replace("|", "\\|")
                print(f"| {cls} | {c.expect} | `{c.argv}` | {o.status} | {o.seconds:.1f} | {first} |")
        if args.show:
            for c, (cls, o) in zip(cases, results):
                print(f"\n## {cls}: {c.argv} (exit {o.status}, {o.seconds:.1f} s)\n```\n{o.err.strip()}\n```")
        session.results = {"mode": mode, "jobs": args.jobs, "counts": counts,
                           "cases": [{"argv": c.argv, "expect": c.expect, "class": cls, "status": o.status,
                                      "seconds": o.seconds, "stderr": o.err.strip()[-300:]}
                                     for c, (cls, o) in zip(cases, results)]}
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
