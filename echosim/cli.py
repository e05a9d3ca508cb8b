"""Command line: python -m echosim <subcommand>.

Subcommands: ``sweep`` (a grid of runs, resumable, local processes or Dask), ``run``
(one configuration), ``plot`` (figures from a results directory), ``bounds`` (evaluate
a theory function), ``info`` (versions, Numba, cores, kernel cache), ``plan`` (should I echo?). Bad input anywhere
prints one line on stderr and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import math
import sys

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage + message."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


# --------------------------------------------------------------------------- sweep


def _cmd_sweep(args) -> int:
    from echosim.experiments import config as cfg
    from echosim.experiments import report as report_mod
    from echosim.experiments import sweep
    from echosim.experiments.executors import default_workers

    conf = cfg.load_config(args.config, overrides=args.set or (), quick=args.quick)
    out = args.out if args.out is not None else conf.default_out()
    workers = default_workers() if args.workers is None else args.workers
    if args.dry_run:
        est = sweep.estimate(conf, out=out, workers=workers, store_dir=args.store)
        print(f"{conf.name} ({conf.source}): {conf.describe()}")
        print(f"output: {out} ({est['n_runs'] - est['n_pending']} of {est['n_runs']} runs already finished)")
        where = f"the Dask cluster at {args.scheduler}" if args.scheduler else f"{est['workers']} local worker(s)"
        print(f"estimated time: {_seconds(est['seconds'])} for {est['n_pending']} runs on {where}, plus "
              f"{_seconds(est['compile_seconds'])} compile/load of the kernels")
        print(f"estimate: {est['method']}")
        return 0
    report = sweep.run_sweep(conf, out=out, workers=workers, scheduler=args.scheduler,
                             progress=not args.quiet, on_done=_log_run if args.verbose else None,
                             store_dir=args.store)
    how = f"Dask at {args.scheduler}" if args.scheduler else f"{report.workers} worker process(es)"
    print(f"{conf.name}: {report.n_runs} runs ({report.n_new} run now, {report.n_resumed} resumed) "
          f"in {report.elapsed:.1f} s on {how}; kernels ready in {report.compile_seconds:.1f} s")
    c = report.counts
    print(f"status: {c['ok']} ok, {c['diverged']} diverged, {c['failed']} failed; results in {report.out}")
    print()
    print(report_mod.format_tuned(report.tuned, conf))
    check = report_mod.regime_check(report.tuned, report.summary, conf.settings.get("rtol"))
    if check:
        print()
        print(check)
    if not args.no_plot:
        from echosim.plots.views import plot_results

        try:
            files = plot_results(report.out)
        except ValueError as exc:
            print(f"(no figure: {exc})")
        else:
            print()
            print("figures: " + ", ".join(str(f) for f in files))
    if c["failed"]:
        first = report.summary.loc[report.summary["status"] == "failed", "error"].iloc[0]
        print(f"echosim sweep: {c['failed']} run(s) failed (first: {first}); re-run the same command "
              "to retry them", file=sys.stderr)
        return 1
    return 0


def _log_run(payload) -> None:
    row = payload["summary"]
    error = f": {row['error']}" if row["status"] == "failed" else ""
    print(f"run {row['run_id']} {row['status']} in {row['elapsed_s']:.2f} s{error}", file=sys.stderr, flush=True)


def _seconds(s: float) -> str:
    if s < 120:
        return f"{s:.1f} s"
    return f"{s / 60:.1f} min"


# --------------------------------------------------------------------------- run


_RUN_DEFAULTS = {"optimizer.lr": 1.0, "optimizer.batch_size": 64, "optimizer.echo": 4,
                 "sweep.n_batches": 500, "sweep.repetitions": 1}


def _single_run_config(args):
    import tomllib
    from importlib import resources

    from echosim.experiments import config as cfg

    shorthand = []
    for flag, key in (("batch_size", "optimizer.batch_size"), ("echo", "optimizer.echo"),
                      ("n_batches", "sweep.n_batches"), ("lr", "optimizer.lr"), ("seed", "sweep.seed")):
        value = getattr(args, flag)
        if value is not None:
            shorthand.append(f"{key}={value}")
    overrides = [*shorthand, *(args.set or ())]
    if args.config is not None:
        return cfg.load_config(args.config, overrides=overrides)
    # the default sweep's problem and pipeline, one setting of the optimizer
    text = resources.files("echosim").joinpath(cfg.DEFAULT_TOML).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    data.pop("joint", None)
    for key, value in _RUN_DEFAULTS.items():
        section, name = key.split(".")
        data[section][name] = value
    return cfg.parse_config(data, source="<default run>", overrides=overrides, text=text)


def _cmd_run(args) -> int:
    from echosim.experiments import store
    from echosim.experiments.assemble import execute_run

    conf = _single_run_config(args)
    if len(conf.runs) != 1:
        axes = ", ".join(conf.axes) or "sweep.repetitions"
        raise ValueError(f"the config gives {len(conf.runs)} runs, run needs exactly one: fix the varying "
                         f"keys with --set (varying: {axes})")
    spec = conf.runs[0]
    payload = execute_run(spec)
    row = dict(payload["summary"])
    if payload["curves"] is not None:
        row.update(store._analysis(row, payload["curves"], conf.settings))
    if args.json:
        import json

        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        print(json.dumps(clean, indent=1, default=str))
    elif args.verbose:
        keys = [k for k in row if not k.startswith("version.")]
        width = max(len(k) for k in keys)
        for k in keys:
            v = row[k]
            if isinstance(v, float):
                v = "never" if math.isinf(v) else f"{v:.6g}"
            print(f"{k:>{width}}: {v}")
    else:
        for line in _run_summary(spec, row, conf.settings):
            print(line)
    if row["status"] == "failed":
        print(f"echosim run: the run failed: {row['error']}", file=sys.stderr)
        return 1
    return 0


def _run_summary(spec, row: dict, settings: dict) -> list[str]:
    """A short, labelled account of one run (the full record: --verbose or --json)."""
    opt = spec.optimizer
    what = (f"{opt['method']} (lr={opt['lr']:g}, B={opt['batch_size']}, K={spec.echo if spec.echo is not None else 'greedy'}) "
            f"on {spec.problem['kind']}" + (f" {spec.problem.get('name', '')}".rstrip()))
    lines = [f"run {row['run_id']}: {what}, status {row['status']}"]
    if row["status"] == "failed":
        return lines
    F = row["F_star"]
    if settings.get("atol") is not None:
        target = f"excess risk F(w) - F* <= {settings['atol']:g}"
    else:
        rtol = settings.get("rtol", 0.01)
        target = f"loss <= (1 + {rtol:g}) F* = {(1 + rtol) * F:.6g}"
    target += f", trailing mean of {settings.get('window', 10)} logged points, {settings.get('iterate', 'last')} iterate"
    lines.append(f"  target:      {target}")
    if row.get("converged"):
        t = row.get("conv_time")
        at_time = f", simulated time {t:.6g}" if isinstance(t, float) and math.isfinite(t) else ""
        lines.append(f"  reached:     yes, after {row['conv_batches']:.0f} fresh batches, {row['conv_steps']:.0f} "
                     f"steps{at_time}")
    else:
        why = f" (diverged at fresh batch {row['diverged_at']:.0f})" if row["status"] == "diverged" else ""
        lines.append(f"  reached:     no, not within {row['n_batches']} fresh batches{why}")
    last = " at the last point before it diverged" if row["status"] == "diverged" else ""
    lines.append(f"  final risk:  {row['final_risk'] + F:.6g} (excess {row['final_risk']:.4g} over F* = {F:.6g}){last}")
    lines.append(f"  steps:       {row['n_steps']} on {row['n_batches']} fresh batches (mean K {row['mean_echo']:.3g})")
    t_end = row.get("final_time")
    if isinstance(t_end, float) and math.isfinite(t_end):
        step = (spec.pipeline or {}).get("step_time_mean", 1.0)
        lines.append(f"  sim. time:   {t_end:.6g} time units (the config's unit: one optimizer step takes {step:g})")
    else:
        lines.append("  sim. time:   none (no [pipeline]: steps are not timed)")
    lines.append("  (the full record: --verbose, or --json)")
    return lines


# --------------------------------------------------------------------------- plot


def _cmd_plot(args) -> int:
    from echosim.plots.views import plot_results

    formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
    files = plot_results(args.results, out=args.out, formats=formats)
    for f in files:
        print(f)
    return 0


# --------------------------------------------------------------------------- figures


def _cmd_figures(args) -> int:
    from echosim.plots.figures import make_figures

    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    written, failed = make_figures(out_dir=args.out, quick=args.quick, only=only, workers=args.workers,
                                   store_dir=args.store, docs=args.docs, progress=not args.quiet)
    for path in written.values():
        print(path)
    for name, reason in failed.items():
        print(f"echosim figures: {name}: {reason}", file=sys.stderr)
    return EXIT_BAD_INPUT if failed else 0


_FIGURES_EXAMPLES = """\
examples:
  python -m echosim figures                       # every docs figure, tables and PNGs in echosim-results/figures
  python -m echosim figures --quick --out /tmp/f  # the small [quick] variants (CI, previews)
  python -m echosim figures --only speedup_vs_R,greedy_vs_fixed
  python -m echosim figures --docs                # maintainers: also rewrite docs/figures/*.png
Each figure is a sweep (echosim/plots/figure_configs/<name>.toml): finished runs are
reused from the run store, so running it again recomputes nothing."""


# --------------------------------------------------------------------------- bounds


def _theory_functions() -> dict:
    import theory

    return {name: getattr(theory, name) for name in theory.__all__}


def _bound_value(text: str, name: str):
    import numpy as np

    if text.lower() == "none":
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--{name}: expected a number or comma-separated numbers, got {text!r}") from None
    return values[0] if len(values) == 1 else np.array(values)


def _cmd_bounds(args) -> int:
    import inspect

    import numpy as np

    funcs = _theory_functions()
    if args.function in (None, "list"):
        for name, f in funcs.items():
            print(f"{name}{inspect.signature(f)}")
        return 0
    if args.function not in funcs:
        raise ValueError(f"unknown theory function {args.function!r}; allowed: {', '.join(funcs)}")
    f = funcs[args.function]
    sig = inspect.signature(f)
    rest = list(args.params)
    if any(r in ("-h", "--help") for r in rest):
        doc = inspect.getdoc(f) or ""
        print(f"python -m echosim bounds {args.function} " +
              " ".join(f"--{p} X" if p.default is inspect.Parameter.empty else f"[--{p} X]"
                       for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD))
        print()
        print(doc)
        return 0
    kwargs = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--") or tok == "--":
            raise ValueError(f"bounds {args.function}: expected --NAME VALUE, got {tok!r}")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest):
                raise ValueError(f"--{name}: missing a value")
            value = rest[i + 1]
            i += 1
        i += 1
        if name not in sig.parameters:
            raise ValueError(f"{args.function} has no argument --{name}; allowed: "
                             + ", ".join(f"--{p}" for p in sig.parameters))
        if name in kwargs:
            raise ValueError(f"--{name} given twice")
        kwargs[name] = _bound_value(value, name)
    missing = [p for p, v in sig.parameters.items() if v.default is inspect.Parameter.empty
               and v.kind is v.POSITIONAL_OR_KEYWORD and p not in kwargs]
    if missing:
        raise ValueError(f"{args.function}: missing " + ", ".join(f"--{m}" for m in missing))
    value = f(**kwargs)
    what = _plain((inspect.getdoc(f) or args.function).splitlines()[0]).rstrip(".")
    if args.function.endswith("_bound"):
        what += " (it bounds the expected excess risk E[F(w)] − F* of the method's output)"
    shown = ", ".join(f"{k}={_show_arg(v)}" for k, v in kwargs.items())
    values = value if isinstance(value, tuple) else (value,)
    arrays = [np.asarray(v, dtype=float) for v in values]
    print(f"{args.function}({shown}): {what}")
    if all(a.ndim == 0 for a in arrays):
        print("  = " + ", ".join(f"{float(a):.10g}" for a in arrays))
        return 0
    varying = [k for k, v in kwargs.items() if np.ndim(v) > 0]
    grid = np.broadcast_arrays(*[np.asarray(kwargs[k]) for k in varying]) if varying else []
    for i in range(arrays[0].size):
        where = ", ".join(f"{k}={float(g.reshape(-1)[i]):g}" for k, g in zip(varying, grid)) if grid and \
            grid[0].size == arrays[0].size else f"[{i}]"
        print(f"  {where}: " + ", ".join(f"{float(a.reshape(-1)[i]):.10g}" for a in arrays))
    return 0


def _plain(text: str) -> str:
    """A docstring's first line without LaTeX/RST markup, for a terminal."""
    import re

    text = text.replace("``", "")
    text = re.sub(r"\\mathrm\{(\w+)\}", r"\1", text)
    for a, b in ((r"\varepsilon", "ε"), (r"\beta", "β"), (r"\lambda", "λ"), (r"\gamma", "γ"),
                 (r"\rho", "ρ"), (r"\eta", "η")):
        text = text.replace(a, b)
    return text.replace("$", "").replace("{", "").replace("}", "")


def _show_arg(v) -> str:
    import numpy as np

    if v is None:
        return "None"
    if np.ndim(v) == 0:
        return f"{float(v):g}"
    return "[" + ",".join(f"{float(x):g}" for x in np.asarray(v).reshape(-1)) + "]"


# --------------------------------------------------------------------------- info


def _kernel_cache_status() -> list[str]:
    from pathlib import Path

    root = Path(__file__).parent
    lines = []
    for layer in ("training", "pipeline"):
        cache = root / layer / "__pycache__"
        nbi = sorted(cache.glob("kernel.*.nbi")) if cache.is_dir() else []
        nbc = sorted(cache.glob("kernel.*.nbc")) if cache.is_dir() else []
        state = f"cached ({len(nbi)} index files, {len(nbc)} compiled objects)" if nbc else "not cached yet " \
            "(compiled on first use, ~seconds)"
        lines.append(f"  echosim.{layer}.kernel: {state}")
    return lines


def _cmd_info(args) -> int:
    import os
    import platform
    from importlib import metadata

    import numba

    print(f"python {platform.python_version()} on {platform.platform()}")
    for name in ("echosim", "numpy", "numba", "scipy", "matplotlib", "pyarrow", "pandas", "dask", "distributed"):
        try:
            v = metadata.version(name)
        except metadata.PackageNotFoundError:
            v = "not installed" + (" (optional: pip install 'echosim[dask]')" if name in ("dask", "distributed")
                                   else " (optional: pip install 'echosim[sweep]')" if name in ("pyarrow", "pandas")
                                   else "")
        print(f"  {name}: {v}")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        cores = os.cpu_count()
    print(f"cores: {os.cpu_count()} (usable by this process: {cores}; sweep --workers defaults to {cores})")
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = "not initialised (no parallel Numba code has run in this process)"
    available = []
    for name, mod in (("tbb", "numba.np.ufunc.tbbpool"), ("omp", "numba.np.ufunc.omppool"),
                      ("workqueue", "numba.np.ufunc.workqueue")):
        try:
            __import__(mod)
            available.append(name)
        except Exception:  # noqa: BLE001 - any import failure means unavailable
            pass
    print(f"numba threading layer: {layer}; configured: {numba.config.THREADING_LAYER}; "
          f"available: {', '.join(available) or 'none'}; NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}")
    print("  (echosim's kernels are serial; sweeps run in parallel across processes)")
    cache_dir = numba.config.CACHE_DIR or "next to the sources (__pycache__)"
    print(f"numba kernel cache: {cache_dir}")
    for line in _kernel_cache_status():
        print(line)
    return 0


# --------------------------------------------------------------------------- plan


def _pairs(items, name: str, value) -> dict:
    """``B=VALUE`` items (repeatable, comma-separated) → {B: value or [values]}."""
    out: dict = {}
    for item in items or ():
        for part in _split_top(item):
            b, eq, v = part.partition("=")
            try:
                B = int(b)
            except ValueError:
                B = 0
            if not eq or B < 1:
                raise ValueError(f"--{name}: expected B=VALUE with B an integer >= 1, got {part!r}")
            out.setdefault(B, []).append(value(v.strip()))
    return {B: (v[0] if len(v) == 1 else v) for B, v in out.items()}


def _split_top(text: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def _int_items(text: str, name: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            if dash:  # a range a-b: the powers of two in it (and a, b)
                a, b = int(lo), int(hi)
                if a < 1 or b < a:
                    raise ValueError
                out += sorted({a, b, *(2 ** i for i in range(0, 31) if a <= 2 ** i <= b)})
            else:
                out.append(int(part))
        except ValueError:
            raise ValueError(f"--{name}: expected integers or ranges like 1-16, got {text!r}") from None
    return out


def _steps_value(v: str) -> float:
    try:
        x = float(v)
    except ValueError:
        raise ValueError(f"--steps-to-target: expected B=STEPS with STEPS a number, got {v!r}") from None
    return x


def _cmd_plan(args) -> int:
    from echosim.plan import plan

    loader = args.loader
    if args.loader_profile:
        if loader is not None:
            raise ValueError("--loader-profile: give either --loader or --loader-profile, not both")
        loader = _pairs(args.loader_profile, "loader-profile", str)
        loader = {B: v if isinstance(v, str) else ",".join(v) for B, v in loader.items()}
    if loader is None:
        raise ValueError("--loader: required (a time per batch such as 'gamma(mean=80ms, cv=0.5)', a trace "
                         "'trace(times.csv, unit=ms)', or --loader-profile B=FILE at two or more batch sizes)")
    steps = _pairs(args.steps_to_target, "steps-to-target", _steps_value) if args.steps_to_target else None
    if steps is not None and len(steps) < 2:
        raise ValueError(f"--steps-to-target: the T(K) model needs steps to target at two or more batch sizes, "
                         f"got {len(steps)}")
    if args.problem is not None and steps is not None:
        raise ValueError("--problem: give either --problem or --steps-to-target, not both")
    if args.plot:
        from pathlib import Path

        suffix = Path(args.plot).suffix.lower()
        if suffix not in (".png", ".pdf", ".svg"):
            raise ValueError(f"--plot: expected a .png, .pdf or .svg file name, got {args.plot!r}")
        if not Path(args.plot).resolve().parent.is_dir():
            raise ValueError(f"--plot: directory {str(Path(args.plot).parent)!r} does not exist")
    result = plan(
        loader, args.step_time, batch_size=_int_items(args.batch_size, "batch-size"),
        problem=None if steps is not None else (args.problem or "logistic"),
        steps_to_target=steps, model=args.model, workers=_int_items(args.workers, "workers"),
        prefetch=args.prefetch, policies=args.policies,
        echoes=None if args.echo is None else _int_items(args.echo, "echo"), max_echo=args.max_echo,
        target=args.target, seeds=args.seeds, accelerator_price=args.accelerator_price,
        worker_price=args.worker_price, seed=args.seed, processes=args.processes, results=args.store)
    print(result.to_json() if args.json else result.table())
    if args.plot:
        result.plot(args.plot)
        if not args.json:
            print(f"figure: {args.plot}")
    return 0


_PLAN_EXAMPLES = """\
examples:
  python -m echosim plan --loader "gamma(mean=80ms, cv=0.5)" --step-time 10ms --batch-size 256 --problem logistic
  python -m echosim plan --loader "trace(loader.csv, unit=ms)" --step-time 10ms --batch-size 256 \\
      --steps-to-target 64=5200 --steps-to-target 1024=900          # your own model, measured without echoing
  python -m echosim plan --loader-profile 64=b64.csv --loader-profile 512=b512.csv --step-time 12ms \\
      --batch-size 64,512 --workers 1,2,4 --accelerator-price 2.5 --worker-price 0.05 --json
times take units (ns, us, ms, s, min, h; a bare number is seconds); trace files hold seconds unless unit= says otherwise"""


def _add_plan_parser(sub) -> None:
    pn = sub.add_parser("plan", help="should I echo, with which K, and what will it save me?",
                        description="Candidates (sync, fixed K, greedy; batch sizes; loader workers) with their "
                        "fresh batches, steps and wall-clock to target (10-90% band), utilisation, speedup and "
                        "the theory's ceiling, then one recommendation. The problem's response to echoing is "
                        "simulated on an echosim problem (--problem) or predicted from steps to target measured "
                        "without echoing at two or more batch sizes (--steps-to-target).",
                        epilog=_PLAN_EXAMPLES, formatter_class=_Formatter)
    pn.add_argument("--loader", help="time per batch per loader worker: '80ms', 'gamma(mean=80ms, cv=0.5)', "
                    "'trace(times.csv, unit=ms)'")
    pn.add_argument("--loader-profile", action="append", metavar="B=SPEC",
                    help="loader time measured at batch size B (a trace or distribution); two or more B fit "
                    "time per batch = a + b*B (repeatable)")
    pn.add_argument("--step-time", required=True, help="time of one optimizer step: '10ms', a distribution or a trace")
    pn.add_argument("--batch-size", required=True, help="B, or several: 256,1024")
    pn.add_argument("--problem", help="form (a): logistic (default), least_squares or dataset:NAME, simulated")
    pn.add_argument("--steps-to-target", action="append", metavar="B=STEPS",
                    help="form (b): steps to target without echoing at batch size B (repeatable; two or more B)")
    pn.add_argument("--model", choices=("bound", "mccandlish"),
                    help="form (b)'s T(K) model (default bound, see docs/background/plan-model.md)")
    pn.add_argument("--workers", default="1", help="loader workers, or several to compare: 1,2,4 (default 1)")
    pn.add_argument("--prefetch", type=_positive_int, default=2, help="prefetch buffer capacity (default 2)")
    pn.add_argument("--policies", default="sync,fixed,greedy", help="candidates (default sync,fixed,greedy)")
    pn.add_argument("--echo", help="K for fixed: 2,4,8 or a range 2-16 (default: powers of two bracketing R)")
    pn.add_argument("--max-echo", type=_positive_int, default=64, help="bound on K under greedy (default 64)")
    pn.add_argument("--target", type=float, default=0.002,
                    help="form (a): loss <= (1 + TARGET) F* (default 0.002)")
    pn.add_argument("--seeds", type=_positive_int, default=5, help="repetitions behind the 10-90%% band (default 5)")
    pn.add_argument("--accelerator-price", type=_nonneg_float, help="accelerator price per hour")
    pn.add_argument("--worker-price", type=_nonneg_float, help="price per hour of one loader worker")
    pn.add_argument("--seed", type=_nonneg_int, default=0, help="base seed (default 0)")
    pn.add_argument("--processes", type=_positive_int, default=2, help="simulation processes (default 2)")
    pn.add_argument("--store", help="run store for form (a)'s runs, reused next time (default $ECHOSIM_STORE, "
                    "else echosim-results/store)")
    pn.add_argument("--json", action="store_true", help="print JSON instead of the table")
    pn.add_argument("--plot", metavar="FILE", help="draw wall-clock to target against K (.png, .pdf, .svg)")
    pn.set_defaults(func=_cmd_plan)


# --------------------------------------------------------------------------- parser


_MAIN_EXAMPLES = """\
examples:
  python -m echosim sweep --dry-run        # the default Figure-2-style sweep: runs, estimated time
  python -m echosim sweep                  # run it; re-run to resume
  python -m echosim run --echo 4 --lr 0.5  # one run, its summary
  python -m echosim plot echosim-results/figure2-<hash>
  python -m echosim figures --quick --out /tmp/figures
  python -m echosim bounds echoed_gd_bound --beta 0.25 --rho 1 --D 2 --B 64 --T 500 --K 4
  python -m echosim info
Each subcommand has --help with examples."""

_SWEEP_EXAMPLES = """\
examples:
  python -m echosim sweep                         # the default Figure-2-style sweep
  python -m echosim sweep examples/sweep.toml --workers 2
  python -m echosim sweep my.toml --dry-run       # number of runs and estimated time
  python -m echosim sweep my.toml --set optimizer.echo=[1,2,4] --set sweep.repetitions=5
  python -m echosim sweep my.toml --scheduler tcp://127.0.0.1:8786   # on a Dask cluster
Re-running the same command resumes: finished runs are skipped, failed ones retried.
The config schema is documented in docs/sweep.md."""

_RUN_EXAMPLES = """\
examples:
  python -m echosim run                           # one run of the default problem/pipeline
  python -m echosim run --batch-size 64 --echo 4 --lr 0.5 --n-batches 500
  python -m echosim run my.toml --set optimizer.lr=0.3 --set optimizer.echo=2"""

_PLOT_EXAMPLES = """\
examples:
  python -m echosim plot echosim-results/figure2-1a2b3c4d5e
  python -m echosim plot RESULTS --out figs --format png"""

_BOUNDS_EXAMPLES = """\
examples:
  python -m echosim bounds list
  python -m echosim bounds echoed_gd_bound --beta 0.25 --rho 1 --D 2 --B 64 --T 500 --K 4
  python -m echosim bounds echoed_gd_bound --beta 0.25 --rho 1 --D 2 --B 64 --T 500 --K 1,2,4,8
  python -m echosim bounds saturation_echo --eps 0.01 --beta 1 --rho 1 --B 6400
  python -m echosim bounds echoed_gd_bound --help   # its arguments and docstring"""

_INFO_EXAMPLES = """\
examples:
  python -m echosim info"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m echosim", formatter_class=_Formatter,
                     description="Simulate data echoing under laggard data pipelines, next to the theory "
                     "that bounds it. Bad input prints one line on stderr and exits with status 2.",
                     epilog=_MAIN_EXAMPLES)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="{sweep,run,plot,figures,bounds,info,plan}")

    sw = sub.add_parser("sweep", help="run a grid of simulations (resumable; local processes or Dask)",
                        description="Run every run of a sweep config that has no result yet, merge the "
                        "results and print the tuned table.", epilog=_SWEEP_EXAMPLES, formatter_class=_Formatter)
    sw.add_argument("config", nargs="?", help="TOML config (default: the embedded Figure-2-style sweep)")
    sw.add_argument("--out", help="the sweep's tables (default: echosim-results/<name>-<config hash>)")
    sw.add_argument("--store", help="where finished runs are kept and reused by any sweep "
                    "(default: $ECHOSIM_STORE or echosim-results/store)")
    sw.add_argument("--workers", type=_positive_int, help="local worker processes (default: all cores)")
    sw.add_argument("--scheduler", metavar="ADDRESS", help="run on an existing Dask distributed cluster")
    sw.add_argument("--dry-run", action="store_true", help="print the number of runs and an estimated time")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config key (TOML value), e.g. optimizer.echo=[1,2]; repeatable")
    sw.add_argument("--quick", action="store_true", help="apply the config's [quick] table: a small variant")
    sw.add_argument("--no-plot", action="store_true", help="do not write the figures")
    sw.add_argument("--quiet", action="store_true", help="no progress output")
    sw.add_argument("--verbose", action="store_true",
                    help="one line on stderr per finished run: its id, status and seconds")
    sw.set_defaults(func=_cmd_sweep)

    rn = sub.add_parser("run", help="run one configuration and print its summary",
                        description="Run one configuration (a config that expands to a single run) "
                        "and print its summary.", epilog=_RUN_EXAMPLES, formatter_class=_Formatter)
    rn.add_argument("config", nargs="?", help="TOML config giving one run (default: the default problem "
                    "and pipeline with B=64, K=4, lr=1, T=500)")
    rn.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key; repeatable")
    rn.add_argument("--batch-size", type=_positive_int, help="B (optimizer.batch_size)")
    rn.add_argument("--echo", type=_positive_float, help="K (optimizer.echo)")
    rn.add_argument("--n-batches", type=_positive_int, help="T (sweep.n_batches)")
    rn.add_argument("--lr", type=_nonneg_float, help="learning rate (optimizer.lr)")
    rn.add_argument("--seed", type=_nonneg_int, help="base seed (sweep.seed)")
    rn.add_argument("--verbose", action="store_true", help="print the full record, one key per line")
    rn.add_argument("--json", action="store_true", help="print the full record as JSON")
    rn.set_defaults(func=_cmd_run)

    pl = sub.add_parser("plot", help="figures from a results directory (PNG and PDF)",
                        description="Convergence time vs K per B (KT, BT, wall-clock, tuned lr) and "
                        "excess risk vs wall-clock with the theory bound.", epilog=_PLOT_EXAMPLES,
                        formatter_class=_Formatter)
    pl.add_argument("results", help="a sweep's results directory")
    pl.add_argument("--out", help="where to write the figures (default: the results directory)")
    pl.add_argument("--format", default="png,pdf", help="comma-separated: png, pdf, svg (default png,pdf)")
    pl.set_defaults(func=_cmd_plot)

    fg = sub.add_parser("figures", help="make every docs figure: each is a sweep config plus a view",
                        description="Run each figure's sweep (echosim/plots/figure_configs/*.toml), reusing "
                        "finished runs from the store, and draw it.", epilog=_FIGURES_EXAMPLES,
                        formatter_class=_Formatter)
    fg.add_argument("--out", help="tables and PNGs (default: echosim-results/figures)")
    fg.add_argument("--quick", action="store_true", help="each config's [quick] variant: small, for CI")
    fg.add_argument("--only", help="comma-separated figure names (default: all)")
    fg.add_argument("--workers", type=_positive_int, help="local worker processes (default: all cores)")
    fg.add_argument("--store", help="the run store (default: $ECHOSIM_STORE or echosim-results/store)")
    fg.add_argument("--docs", action="store_true", help="also write docs/figures/*.png (maintainers)")
    fg.add_argument("--quiet", action="store_true", help="no progress output")
    fg.set_defaults(func=_cmd_figures)

    bd = sub.add_parser("bounds", help="evaluate a theory function, e.g. echoed_gd_bound",
                        description="Evaluate a function of the theory module with --NAME VALUE "
                        "arguments (comma-separated values broadcast).", epilog=_BOUNDS_EXAMPLES,
                        formatter_class=_Formatter, add_help=True)
    bd.add_argument("function", nargs="?", help="theory function name, or 'list'")
    bd.add_argument("params", nargs=argparse.REMAINDER, help="--NAME VALUE pairs")
    bd.set_defaults(func=_cmd_bounds)

    inf = sub.add_parser("info", help="versions, Numba threading layer, cores, kernel cache",
                         description="Versions, the Numba threading layer, cores, and whether the "
                         "kernels are cached.", epilog=_INFO_EXAMPLES, formatter_class=_Formatter)
    inf.set_defaults(func=_cmd_info)
    _add_plan_parser(sub)
    return parser


def _int_at_least(lo: int):
    """An argparse type: an integer >= lo."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = lo - 1
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        return v

    return parse


_positive_int = _int_at_least(1)
_nonneg_int = _int_at_least(0)


def _float(text: str, lo: float, strict: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < lo or (strict and v == lo):
        raise argparse.ArgumentTypeError(f"expected a number {'>' if strict else '>='} {lo:g}, got {text!r}")
    return v


def _positive_float(text: str) -> float:
    v = _float(text, 1.0, False)
    return int(v) if v == int(v) else v


def _nonneg_float(text: str) -> float:
    return _float(text, 0.0, False)


def _os_error(exc: OSError) -> str:
    """One line naming the path and the cause (and, for a full disk, that the store resumes)."""
    import errno

    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    where = " -> ".join(repr(str(p)) for p in paths) or "(no path)"
    cause = exc.strerror or type(exc).__name__
    hint = {
        errno.EEXIST: " (a file is in the way of a directory)",
        errno.ENOTDIR: " (a parent of the path is a file, not a directory)",
        errno.EROFS: " (choose a writable place with --out)",
        errno.EACCES: " (no permission: choose another place with --out)",
        errno.ENOSPC: ("; finished runs are saved and the store is resumable: free some space and "
                       "re-run the same command"),
        errno.EDQUOT: ("; finished runs are saved and the store is resumable: free some space and "
                       "re-run the same command"),
    }.get(exc.errno, "")
    return f"{where}: {cause}{hint}"


def _broken_pipe() -> int:
    """The reader of stdout went away (`... | head`): stop quietly, as a killed pipe writer does."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by the pipe


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 runs failed, 2 bad input, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        print("python -m echosim: error: choose a subcommand: sweep, run, plot, figures, bounds, info, plan (see --help)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return args.func(args)
    except BrokenPipeError:
        return _broken_pipe()
    except OSError as exc:
        print(f"echosim {args.command}: error: {_os_error(exc)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as exc:  # ConfigError included: bad input, not a bug
        msg = " ".join(str(exc).split())
        print(f"echosim {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:
        from echosim.experiments.executors import SweepError

        if not isinstance(exc, SweepError):
            raise
        print(f"echosim {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\nechosim {args.command}: interrupted; finished runs are saved — re-run the same command to resume",
              file=sys.stderr)
        return 130

