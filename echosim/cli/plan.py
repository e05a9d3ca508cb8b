"""The plan subcommand: should I echo, with which K, and what will it save?"""

from __future__ import annotations

import re

from echosim.cli.args import _Formatter, _nonneg_float, _nonneg_int, _positive_int
from echosim.pipeline.model import MAX_ECHO
from echosim.training.methods import DEFAULT_METHOD, METHODS

_B_KEY = re.compile(r"^\s*(\d+)\s*(?:[xX]\s*(\d+))?\s*$")


def _split_top(text: str) -> list[str]:
    from echosim.planner.timing import split_args

    return split_args(text)


def _pairs(items, name: str, value, echo: bool = False, repeats: bool = True) -> dict:
    """``B=VALUE`` (or ``BxK=VALUE`` where `echo`) items, repeatable and comma-separated →
    {B or (B, K): value or [values]}; without `repeats`, a key given twice is an error."""
    out: dict = {}
    for item in items or ():
        for part in _split_top(item):
            key, eq, v = part.partition("=")
            m = _B_KEY.match(key)
            form = "B=VALUE or BxK=VALUE (B and K integers >= 1)" if echo else "B=VALUE with B an integer >= 1"
            if not eq or not m or (m.group(2) is not None and not echo) or \
                    max(len(m.group(1)), len(m.group(2) or "")) > 30 or int(m.group(1)) < 1:
                raise ValueError(f"--{name}: expected {form}, got {part!r}")
            B = int(m.group(1))
            if m.group(2) is not None:
                K = int(m.group(2))
                if K < 1:
                    raise ValueError(f"--{name}: the echo factor K in {part!r} must be an integer >= 1")
                k = B if K == 1 else (B, K)
            else:
                k = B
            if not repeats and k in out:
                raise ValueError(f"--{name}: batch size {B} given twice ({out[k][0]!r} and {v.strip()!r}); "
                                 "give one value per batch size")
            out.setdefault(k, []).append(value(v.strip()))
    return {k: (v[0] if len(v) == 1 else v) for k, v in out.items()}


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
        raise ValueError(f"--steps-to-target: expected B=STEPS or BxK=STEPS with STEPS a number, got {v!r}") from None
    return x


def _timing_arg(items, name: str):
    """--step-time given once as a time, or as B=TIME items (each batch size once)."""
    plain = [i for i in items if "=" not in i.split("(")[0]]
    if len(items) == 1 and plain:
        return items[0]
    if plain:
        raise ValueError(f"--{name}: given {len(items)} times ({', '.join(map(repr, items))}); give one time, "
                         "or one B=TIME per batch size (e.g. 64=15ms,512=40ms)")
    return _pairs(items, name, str, repeats=False)


def _method_options(items) -> dict | None:
    """--method-option KEY=VALUE (repeatable) as a dict: numbers, true/false, else text."""
    if not items:
        return None
    out, raw = {}, {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip() or not text.strip():
            raise ValueError(f"--method-option: expected KEY=VALUE (e.g. momentum=0.9), got {item!r}")
        text = text.strip()
        if key.strip() in raw:
            raise ValueError(f"--method-option: {key.strip()} given twice ({raw[key.strip()]!r} and {text!r}); "
                             "give each hyper-parameter once")
        raw[key.strip()] = text
        value: object = {"true": True, "false": False}.get(text.lower(), text)
        if isinstance(value, str):
            try:
                value = int(text)
            except ValueError:
                try:
                    value = float(text)
                except ValueError:
                    pass
        out[key.strip()] = value
    return out


def _cmd_plan(args) -> int:
    from echosim.planner import plan

    loader = args.loader
    if args.loader_profile:
        if loader is not None:
            raise ValueError("--loader-profile: give either --loader or --loader-profile, not both")
        loader = _pairs(args.loader_profile, "loader-profile", str)
        loader = {B: v if isinstance(v, str) else ",".join(v) for B, v in loader.items()}
    records = None
    if args.records:
        from echosim.loop.records import load_records

        if loader is not None or args.step_time:
            raise ValueError("--records: give either --records (timing from your own run) or --loader and "
                             "--step-time, not both")
        records = [load_records(p) for p in args.records]
    elif loader is None:
        raise ValueError("--loader: required (a time per batch such as 'gamma(mean=80ms, cv=0.5)', a trace "
                         "'trace(times.csv, unit=ms)', --loader-profile B=FILE at two or more batch sizes, or "
                         "--records from a run through echosim.echoing)")
    if records is None and not args.step_time:
        raise ValueError("--step-time: required (the time of one optimizer step, e.g. 10ms, or per batch size: "
                         "64=15ms,512=40ms), unless --records gives it")
    step = _timing_arg(args.step_time, "step-time") if args.step_time else None
    steps = _pairs(args.steps_to_target, "steps-to-target", _steps_value, echo=True) if args.steps_to_target else None
    if (args.curves is None) != (args.target_loss is None):
        raise ValueError(f"--{'target-loss' if args.curves else 'curves'}: give --curves and --target-loss together")
    if steps is not None and not args.curves and len({k if isinstance(k, int) else None for k in steps} - {None}) < 2:
        n = len({k for k in steps if isinstance(k, int)})
        raise ValueError(f"--steps-to-target: the T(K) model needs steps to target without echoing at two or more "
                         f"batch sizes (B=STEPS), got {n}")
    if args.problem is not None and (steps is not None or args.curves):
        raise ValueError("--problem: give either --problem or --steps-to-target/--curves, not both")
    if args.json not in (None, "-"):
        from pathlib import Path

        if Path(args.json).is_dir() or not Path(args.json).resolve().parent.is_dir():
            raise ValueError(f"--json: {args.json!r} is a directory or its directory does not exist; give a file "
                             "name in an existing directory")
    if args.plot:
        from pathlib import Path

        suffix = Path(args.plot).suffix.lower()
        if suffix not in (".png", ".pdf", ".svg"):
            raise ValueError(f"--plot: expected a .png, .pdf or .svg file name, got {args.plot!r}")
        if not Path(args.plot).resolve().parent.is_dir():
            raise ValueError(f"--plot: directory {str(Path(args.plot).parent)!r} does not exist")
    result = plan(
        loader, step, batch_size=_int_items(args.batch_size, "batch-size"), records=records,
        problem=None if (steps is not None or args.curves) else (args.problem or "logistic"),
        curves=args.curves, target_loss=args.target_loss,
        steps_to_target=steps, workers=_int_items(args.workers, "workers"),
        prefetch=args.prefetch, policies=args.policies,
        echoes=None if args.echo is None else _int_items(args.echo, "echo"), max_echo=args.max_echo,
        target=args.target, seeds=args.seeds, accelerator_price=args.accelerator_price,
        worker_price=args.worker_price, seed=args.seed, processes=args.processes, results=args.store,
        progress=False if args.quiet else None, method=args.method or DEFAULT_METHOD,
        method_options=_method_options(args.method_option))
    if args.json not in (None, "-"):  # a temp file, fsync, rename: a failed write keeps the previous file
        from echosim._files import atomic_file

        with atomic_file(args.json) as f:
            f.write((result.to_json() + "\n").encode("utf-8"))
    print(result.to_json() if args.json == "-" else result.table())
    if records is not None and args.json != "-":
        from echosim.planner.verdict import verdict

        print(f"verdict: {verdict(records, plan=result)}")
    if args.plot:
        result.plot(args.plot)
        if args.json != "-":
            print(f"figure: {args.plot}")
    if result.failed:  # told in the plan's notes too; the status says the plan rests on fewer runs
        import sys

        first = result.failed[0]
        print(f"echosim plan: {len(result.failed)} simulated run(s) failed (first: {first['policy']} at B = "
              f"{first['batch_size']}: {first['error']}); re-run the same command to retry them", file=sys.stderr)
        return 1
    return 0


_PLAN_EXAMPLES = """\
examples:
  python -m echosim plan --loader "gamma(mean=80ms, cv=0.5)" --step-time 10ms --batch-size 256 --problem logistic
  python -m echosim plan --loader "trace(loader.csv, unit=ms)" --step-time 10ms --batch-size 256 \\
      --steps-to-target 64=5200 --steps-to-target 1024=900          # your own model, measured without echoing
  python -m echosim plan --records sync.npz --records greedy.npz --batch-size 256 \\
      --steps-to-target 64=5200,1024=900,256x4=2400                 # timing and one echoed point from a pilot
  python -m echosim plan --loader-profile 64=b64.csv --loader-profile 512=b512.csv --step-time 64=15ms,512=40ms \\
      --batch-size 64,512 --workers 1,2,4 --accelerator-price 2.5 --worker-price 0.05 --json
times need units (ns, us, ms, s, min, h); trace files hold seconds unless unit= says otherwise"""


def _add_plan_parser(sub) -> None:
    pn = sub.add_parser("plan", help="should I echo, with which K, and what will it save me?",
                        description="Candidates (sync, fixed K, greedy; batch sizes; loader workers) with their "
                        "fresh batches, steps and wall-clock to target (10-90% band), utilisation, speedup over "
                        "sync and the theory's ceiling, then the best per batch size and overall. The problem's "
                        "response to echoing is simulated on an echosim problem (--problem) or predicted from "
                        "steps to target you measured (--steps-to-target), at K = 1 and optionally with echoing.",
                        epilog=_PLAN_EXAMPLES, formatter_class=_Formatter)
    pn.add_argument("--loader", help="time per batch per loader worker: '80ms', 'gamma(mean=80ms, cv=0.5)', "
                    "'trace(times.csv, unit=ms)'")
    pn.add_argument("--loader-profile", action="append", metavar="B=SPEC",
                    help="loader time measured at batch size B (a trace or distribution); two or more B fit "
                    "time per batch = a + b*B (repeatable)")
    pn.add_argument("--step-time", action="append", metavar="TIME|B=TIME",
                    help="time of one optimizer step: '10ms', a distribution or a trace; or per batch size, "
                    "64=15ms,512=40ms (a + b*B is fitted between and beyond them)")
    pn.add_argument("--records", action="extend", nargs="+", metavar="FILE",
                    help="records of runs through echosim.echoing (Records.save, .npz): the loader and step "
                    "times per policy come from them, with your host's contention (one or more files, e.g. "
                    "pilot-*.npz; repeatable); a verdict line follows the table")
    pn.add_argument("--batch-size", required=True, help="B, or several: 256,1024")
    pn.add_argument("--problem", help="form (a): logistic (default), least_squares or dataset:NAME, simulated")
    pn.add_argument("--method", choices=[m for m, row in METHODS.items() if not row.one_step],
                    help="form (a): the optimizer simulated (default echoed_gd), e.g. echoed_heavy_ball, echoed_adam")
    pn.add_argument("--method-option", action="append", metavar="KEY=VALUE",
                    help="form (a): a hyper-parameter of --method, e.g. momentum=0.9 (repeatable)")
    pn.add_argument("--steps-to-target", action="append", metavar="B=STEPS|BxK=STEPS",
                    help="form (b): steps to target without echoing at batch size B (two or more B), or with "
                    "echo factor K (1024x4=20: 20 steps = 5 fresh batches); repeatable, several values are repeats")
    pn.add_argument("--curves", action="append", metavar="FILE",
                    help="form (b) from whole runs: loss per fresh batch in a CSV (columns batch_size, loss, "
                    "optionally echo, run, fresh_batch) or records (.npz) of sync/fixed-K runs; steps to "
                    "--target-loss are read off every curve (repeatable)")
    pn.add_argument("--target-loss", type=float, metavar="LOSS",
                    help="with --curves: the loss to reach (and keep, trailing mean over 10 fresh batches)")
    pn.add_argument("--workers", default="1", help="loader workers, or several to compare: 1,2,4 (default 1)")
    pn.add_argument("--prefetch", type=_positive_int, default=2, help="prefetch buffer capacity (default 2)")
    pn.add_argument("--policies", default=None, help="candidates (default sync,fixed,greedy,auto on --problem; "
                    "sync,fixed,greedy from --steps-to-target)")
    pn.add_argument("--echo", help="K for fixed: 2,4,8 or a range 2-16 (default: powers of two bracketing R)")
    pn.add_argument("--max-echo", type=_positive_int, default=MAX_ECHO,
                    help=f"bound on K under greedy (default {MAX_ECHO})")
    pn.add_argument("--target", type=float, default=0.002,
                    help="form (a): loss <= (1 + TARGET) F*, reached and kept (default 0.002)")
    pn.add_argument("--seeds", type=_positive_int, default=5, help="repetitions behind the 10-90%% band (default 5)")
    pn.add_argument("--accelerator-price", type=_nonneg_float, help="accelerator price per hour")
    pn.add_argument("--worker-price", type=_nonneg_float, help="price per hour of one loader worker")
    pn.add_argument("--seed", type=_nonneg_int, default=0, help="base seed (default 0)")
    pn.add_argument("--processes", type=_positive_int, default=2, help="simulation processes (default 2)")
    pn.add_argument("--store", help="run store for form (a)'s runs, reused next time (default $ECHOSIM_STORE, "
                    "else echosim-results/store)")
    pn.add_argument("--json", nargs="?", const="-", metavar="FILE",
                    help="print JSON instead of the table; with FILE, write the JSON there (atomically) and print "
                    "the table")
    pn.add_argument("--quiet", action="store_true", help="no progress on stderr")
    pn.add_argument("--plot", metavar="FILE", help="draw wall-clock to target against K (.png, .pdf, .svg)")
    pn.set_defaults(func=_cmd_plan)
