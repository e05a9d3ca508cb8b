"""The experiment subcommands: sweep, run, plot and figures."""

from __future__ import annotations

import math
import sys

from echosim.cli.args import EXIT_BAD_INPUT, _print_json


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
        est = sweep.estimate(conf, out=out, workers=workers, store_dir=args.store,
                             announce=None if args.quiet else sys.stderr)
        if args.json:
            _print_json({"name": conf.name, "source": str(conf.source), "describe": conf.describe(), "out": str(out),
                         "n_runs": est["n_runs"], "n_pending": est["n_pending"], "workers": est["workers"],
                         "scheduler": args.scheduler, "estimated_seconds": est["seconds"],
                         "compile_seconds": est["compile_seconds"], "estimate_method": est["method"]})
            return 0
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
    if args.json:
        return _sweep_json(report, conf, args)
    print(f"{conf.name}: {report.n_runs} runs ({report.n_new} run now, {report.n_resumed} resumed) "
          f"in {report.elapsed:.1f} s{_where_it_ran(report)}")
    c = report.counts
    print(f"status: {c['ok']} ok, {c['diverged']} diverged, {c['failed']} failed; results in {report.out}")
    print()
    print(report_mod.format_tuned(report.tuned, conf, report.summary))
    check = report_mod.regime_check(report.tuned, report.summary, conf.settings)
    if check:
        print()
        print(check)
    words = report_mod.in_words(report.tuned, report.summary)
    if not args.no_plot:
        from echosim.plots.views import plot_results

        try:
            files = plot_results(report.out)
        except ValueError as exc:
            print(f"(no figure: {exc})")
        else:
            print()
            print("figures: " + ", ".join(str(f) for f in files))
    if words:
        print()
        print("In words:")
        for line in words:
            print("  " + line)
    if c["failed"]:
        first = report.summary.loc[report.summary["status"] == "failed", "error"].iloc[0]
        print(f"echosim sweep: {c['failed']} run(s) failed (first: {first}); re-run the same command "
              "to retry them", file=sys.stderr)
        return 1
    return 0


def _sweep_json(report, conf, args) -> int:
    """--json: what ran, the counts, the tuned table (one object per row) and the answer in words."""
    from echosim.experiments import report as report_mod

    tuned = report.tuned
    rows = [] if tuned is None else [{k: v for k, v in row.items()} for row in tuned.to_dict(orient="records")]
    files = []
    if not args.no_plot:
        from echosim.plots.views import plot_results

        try:
            files = [str(f) for f in plot_results(report.out)]
        except ValueError:
            files = []
    c = report.counts
    _print_json({"name": conf.name, "out": str(report.out), "n_runs": report.n_runs, "n_new": report.n_new,
                 "n_resumed": report.n_resumed, "elapsed_seconds": report.elapsed,
                 "compile_seconds": report.compile_seconds, "workers": report.workers, "scheduler": report.scheduler,
                 "counts": c, "tuned": rows, "in_words": report_mod.in_words(report.tuned, report.summary),
                 "figures": files,
                 "units": {"conv_batches": "fresh batches", "conv_steps": "optimizer steps",
                           "conv_samples": "examples", "conv_time": "simulated time units (one optimizer step "
                           "takes pipeline.step_time, 1 by default)", "elapsed_seconds": "s",
                           "null": "a time to target that is infinite (never reached) or undefined"}})
    if c["failed"]:
        first = report.summary.loc[report.summary["status"] == "failed", "error"].iloc[0]
        print(f"echosim sweep: {c['failed']} run(s) failed (first: {first}); re-run the same command "
              "to retry them", file=sys.stderr)
        return 1
    return 0


def _where_it_ran(report) -> str:
    """What computed the runs: Dask, local processes, or nothing (every run was stored)."""
    if report.n_new == 0:
        return "; nothing to compute: every run was in the store"
    if report.scheduler is not None:
        return f" on Dask at {report.scheduler}"
    return f" on {report.workers} worker process(es); kernels ready in {report.compile_seconds:.1f} s"


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

    values = {}  # the shorthand flags' numbers, passed as numbers (not text to parse again)
    for flag, key in (("method", "optimizer.method"), ("batch_size", "optimizer.batch_size"),
                      ("echo", "optimizer.echo"), ("n_batches", "sweep.n_batches"), ("lr", "optimizer.lr"),
                      ("seed", "sweep.seed"), ("policy", "pipeline.policy")):
        value = getattr(args, flag)
        if value is not None:
            values[key] = (value, f"--{flag.replace('_', '-')} ({key})")
    overrides = list(args.set or ())
    if args.config is not None:
        return cfg.load_config(args.config, overrides=overrides, values=values)
    # the default sweep's problem and pipeline, one setting of the optimizer
    text = resources.files("echosim").joinpath(cfg.DEFAULT_TOML).read_text(encoding="utf-8")
    data = tomllib.loads(text)
    data.pop("joint", None)
    from echosim.pipeline.model import ECHO_POLICIES

    for key, value in _RUN_DEFAULTS.items():
        section, name = key.split(".")
        data[section][name] = value
    if args.policy is not None and args.policy not in ECHO_POLICIES:
        data["optimizer"].pop("echo")  # sync takes none, greedy and auto choose K_t themselves
    return cfg.parse_config(data, source="<default run>", overrides=overrides, values=values, text=text)


def _cmd_run(args) -> int:
    from echosim.experiments import executors
    from echosim.experiments.analysis import run_convergence
    from echosim.experiments.assemble import execute_run

    conf = _single_run_config(args)
    if len(conf.runs) != 1:
        axes = ", ".join(conf.axes) or "sweep.repetitions"
        raise ValueError(f"the config gives {len(conf.runs)} runs, run needs exactly one: fix the varying "
                         f"keys with --set (varying: {axes})")
    spec = conf.runs[0]
    executors.warm_up(conf, executors.default_workers(), announce=sys.stderr)  # compiles on every core
    payload = execute_run(spec)
    row = dict(payload["summary"])
    if payload["curves"] is not None:
        row.update(run_convergence(row, payload["curves"], conf.settings))
    if args.json:
        _print_json(row)
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
    from echosim.experiments.analysis import analysis_settings
    from echosim.experiments.report import target_words

    settings = analysis_settings(settings)
    opt = spec.optimizer
    K = spec.echo if spec.echo is not None else spec.pipeline["policy"]  # greedy, auto: K_t chosen as it goes
    what = (f"{opt['method']} (lr={opt['lr']:g}, B={opt['batch_size']}, K={K}) "
            f"on {spec.problem['kind']}" + (f" {spec.problem.get('name', '')}".rstrip()))
    lines = [f"run {row['run_id']}: {what}, status {row['status']}"]
    if row["status"] == "failed":
        return lines
    F = row["F_star"]
    if settings.get("atol") is not None:
        target = f"excess risk F(w) - F* <= {settings['atol']:g}"
    else:
        rtol = settings["rtol"] if settings["rtol"] is not None else settings["fraction"]
        target = (f"loss <= (1 + {rtol:g}) F* = {(1 + rtol) * F:.6g}" if settings["rtol"] is not None
                  else f"excess risk <= {rtol:g} of its value at w0")
    lines.append(f"  target:      {target}")
    lines.append(f"  converged:   at {target_words(settings)}")
    if row.get("converged"):
        t = row.get("conv_time")
        at_time = f", simulated time {t:.6g} time units" if isinstance(t, float) and math.isfinite(t) else ""
        lines.append(f"  reached:     yes, after {row['conv_batches']:.0f} fresh batches, {row['conv_steps']:.0f} "
                     f"steps{at_time}")
    else:
        why = f" (diverged at fresh batch {row['diverged_at']:.0f})" if row["status"] == "diverged" else ""
        lines.append(f"  reached:     no, not within {row['n_batches']} fresh batches{why}")
    last = " at the last point before it diverged" if row["status"] == "diverged" else ""
    lines.append(f"  final risk:  {row['final_risk'] + F:.6g} (excess {row['final_risk']:.4g} over F* = {F:.6g}){last}")
    lines.append(f"  steps:       {row['n_steps']} on {row['n_batches']} fresh batches (mean K {row['mean_echo']:.3g})")
    if "auto.caps" in row:
        more = row["auto.cap_changes"] - row["auto.caps"].count(" ")
        lines.append(f"  auto caps:   {row['auto.caps']}{' ...' if more > 0 else ''} (fresh batch:cap; "
                     f"decisions: {row['auto.decisions'] or 'none'})")
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
    if not formats:
        raise ValueError(f"--format: expected png, pdf or svg (comma-separated), got {args.format!r}")
    echoes = None
    if args.echo:
        try:
            echoes = [float(k) for k in args.echo.split(",") if k.strip()]
        except ValueError:
            raise ValueError(f"--echo: expected comma-separated numbers such as 1,4,16, got {args.echo!r}") from None
    files = plot_results(args.results, out=args.out, formats=formats, echoes=echoes)
    for f in files:
        print(f)
    return 0


# --------------------------------------------------------------------------- figures


def _cmd_figures(args) -> int:
    from echosim.plots.figures import make_figures

    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only is not None else None
    if only is not None and not only:
        raise ValueError(f"--only: expected comma-separated figure names, got {args.only!r}")
    from echosim.experiments.extras import require
    from echosim.plots.figures import FIGURES

    bad = [n for n in only or () if n not in FIGURES]
    if bad:
        raise ValueError(f"--only: unknown figure {bad[0]!r}; allowed: {', '.join(FIGURES)}")
    # every figure is a sweep: say which extra that needs before any figure is tried or skipped
    require("pyarrow.parquet", "figures (each one is a sweep, kept in the run store)")
    require("pandas", "figures (each one is a sweep, with its tables)")
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
  python -m echosim figures --docs                # maintainers: also rewrite docs/figures/*.png and captions
Each figure is a sweep (echosim/plots/figure_configs/<name>.toml): finished runs are
reused from the run store, so running it again recomputes nothing."""


