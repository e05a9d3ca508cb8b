"""The plan subcommand: should I echo, with which K, and what will it save?"""

from __future__ import annotations


from echosim.cli.args import _Formatter, _nonneg_float, _nonneg_int, _positive_int


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


