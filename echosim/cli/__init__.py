"""Command line: python -m echosim <subcommand>.

Subcommands: ``sweep`` (a grid of runs, resumable, local processes or Dask), ``run``
(one configuration), ``plot`` (figures from a results directory), ``bounds`` (evaluate
a theory function), ``info`` (versions, Numba, cores, kernel cache), ``plan`` (should I echo?). Bad input anywhere
prints one line on stderr and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys

from echosim.cli.args import (
    EXIT_BAD_INPUT,
    _Formatter,
    _nonneg_float,
    _nonneg_int,
    _number,
    _Parser,
    _path,
    _positive_int,
)
from echosim.cli.bounds import _cmd_bounds, _cmd_info
from echosim.pipeline.model import POLICIES
from echosim.training.methods import METHODS
from echosim.cli.plan import _add_plan_parser
from echosim.cli.runs import _FIGURES_EXAMPLES, _cmd_figures, _cmd_plot, _cmd_run, _cmd_sweep

__all__ = ["main", "build_parser"]


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
  python -m echosim --version
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
  python -m echosim run --method echoed_adam --lr 0.05 --echo 4     # torch's Adam, echoed
  python -m echosim run --policy auto --lr 0.5    # echo cap tuned from the losses, simulated
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
  python -m echosim bounds echoed_gd_bound --help   # its arguments and docstring
  python -m echosim bounds echoed_gd_bound --beta 0.25 --rho 1 --D 2 --B 64 --T 500 --K 1,2 --json"""

_INFO_EXAMPLES = """\
examples:
  python -m echosim info
  python -m echosim info --json"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m echosim", formatter_class=_Formatter,
                     description="Simulate data echoing under laggard data pipelines, next to the theory "
                     "that bounds it. Bad input prints one line on stderr and exits with status 2.",
                     epilog=_MAIN_EXAMPLES)
    from echosim._version import __version__

    parser.add_argument("--version", action="version", version=f"echosim {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="{sweep,run,plot,figures,bounds,info,plan}")

    sw = sub.add_parser("sweep", help="run a grid of simulations (resumable; local processes or Dask)",
                        description="Run every run of a sweep config that has no result yet, merge the "
                        "results and print the tuned table.", epilog=_SWEEP_EXAMPLES, formatter_class=_Formatter)
    sw.add_argument("config", nargs="?", help="TOML config (default: the embedded Figure-2-style sweep)")
    sw.add_argument("--out", type=_path, help="the sweep's tables (default: echosim-results/<name>-<config hash>)")
    sw.add_argument("--store", type=_path, help="where finished runs are kept and reused by any sweep "
                    "(default: $ECHOSIM_STORE or echosim-results/store)")
    sw.add_argument("--workers", type=_positive_int, help="local worker processes (default: all cores)")
    sw.add_argument("--scheduler", metavar="ADDRESS", type=_scheduler,
                    help="run on an existing Dask distributed cluster: tcp://host:port")
    sw.add_argument("--dry-run", action="store_true", help="print the number of runs and an estimated time")
    sw.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override a config key (TOML value), e.g. optimizer.echo=[1,2]; repeatable")
    sw.add_argument("--quick", action="store_true", help="apply the config's [quick] table: a small variant")
    sw.add_argument("--no-plot", action="store_true", help="do not write the figures")
    sw.add_argument("--quiet", action="store_true", help="no progress output")
    sw.add_argument("--verbose", action="store_true",
                    help="one line on stderr per finished run: its id, status and seconds")
    sw.add_argument("--json", action="store_true", help="print the summary (counts, tuned table, in words; with "
                    "--dry-run the estimate) as JSON")
    sw.set_defaults(func=_cmd_sweep)

    rn = sub.add_parser("run", help="run one configuration and print its summary",
                        description="Run one configuration (a config that expands to a single run) "
                        "and print its summary.", epilog=_RUN_EXAMPLES, formatter_class=_Formatter)
    rn.add_argument("config", nargs="?", help="TOML config giving one run (default: the default problem "
                    "and pipeline with B=64, K=4, lr=1, T=500)")
    rn.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config key; repeatable")
    rn.add_argument("--method", choices=tuple(METHODS), help="the optimizer (optimizer.method), e.g. echoed_adam")
    rn.add_argument("--batch-size", type=_positive_int, help="B (optimizer.batch_size)")
    rn.add_argument("--echo", type=_number, help="K (optimizer.echo)")
    rn.add_argument("--policy", choices=tuple(POLICIES), help="the pipeline's echo policy (pipeline.policy), e.g. "
                    "auto: greedy under a cap tuned from the losses")
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
    pl.add_argument("--out", type=_path, help="where to write the figures (default: the results directory)")
    pl.add_argument("--format", default="png,pdf", help="comma-separated: png, pdf, svg (default png,pdf)")
    pl.add_argument("--echo", metavar="K,K,...", help="the echo factors whose risk curves to draw, e.g. 1,4,16 "
                    "(default: the smallest, the largest and the fastest)")
    pl.set_defaults(func=_cmd_plot)

    fg = sub.add_parser("figures", help="make every docs figure: each is a sweep config plus a view",
                        description="Run each figure's sweep (echosim/plots/figure_configs/*.toml), reusing "
                        "finished runs from the store, and draw it.", epilog=_FIGURES_EXAMPLES,
                        formatter_class=_Formatter)
    fg.add_argument("--out", type=_path, help="tables and PNGs (default: echosim-results/figures)")
    fg.add_argument("--quick", action="store_true", help="each config's [quick] variant: small, for CI")
    fg.add_argument("--only", help="comma-separated figure names (default: all)")
    fg.add_argument("--workers", type=_positive_int, help="local worker processes (default: all cores)")
    fg.add_argument("--store", type=_path, help="the run store (default: $ECHOSIM_STORE or echosim-results/store)")
    fg.add_argument("--docs", action="store_true", help="also write docs/figures/*.png, their facts and the captions "
                    "in docs/figures.md (maintainers)")
    fg.add_argument("--quiet", action="store_true", help="no progress output")
    fg.set_defaults(func=_cmd_figures)

    bd = sub.add_parser("bounds", help="evaluate a theory function, e.g. echoed_gd_bound",
                        description="Evaluate a function of the theory module with --NAME VALUE "
                        "arguments (comma-separated values broadcast).", epilog=_BOUNDS_EXAMPLES,
                        formatter_class=_Formatter, add_help=True)
    bd.add_argument("function", nargs="?", help="theory function name, or 'list'")
    bd.add_argument("--json", action="store_true", help="print the arguments and the value(s) as JSON (also "
                    "accepted after the function's arguments)")
    bd.add_argument("params", nargs=argparse.REMAINDER, help="--NAME VALUE pairs")
    bd.set_defaults(func=_cmd_bounds)

    inf = sub.add_parser("info", help="versions, Numba threading layer, cores, kernel cache",
                         description="Versions, the Numba threading layer, cores, and whether the "
                         "kernels are cached.", epilog=_INFO_EXAMPLES, formatter_class=_Formatter)
    inf.add_argument("--json", action="store_true", help="print the same facts as JSON")
    inf.set_defaults(func=_cmd_info)
    _add_plan_parser(sub)
    return parser


def _scheduler(text: str) -> str:
    """argparse type of --scheduler: the address checked before any work."""
    from echosim.experiments.executors import check_scheduler

    try:
        return check_scheduler(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("scheduler: ")) from None


def _os_error(exc: OSError, command: str | None = None) -> str:
    """One line naming the path (when the error has one) and the cause (and, for a full
    disk, that the store resumes; for a command without --out, no --out in the hint)."""
    import errno

    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    cause = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
    if not paths:
        return cause
    where = "" if command in ("plan", "run", "bounds", "info") else " with --out"
    full = ("; finished runs are saved and the store is resumable: free some space and re-run the same command"
            if command not in ("plan", "run", "bounds", "info") else "; free some space and re-run the same command")
    hint = {
        errno.EEXIST: " (a file is in the way of a directory)",
        errno.ENOTDIR: " (a parent of the path is a file, not a directory)",
        errno.EROFS: f" (choose a writable place{where})",
        errno.EACCES: f" (no permission: choose another place{where})",
        errno.ENOSPC: full,
        errno.EDQUOT: full,
    }.get(exc.errno, "")
    return " -> ".join(repr(str(p)) for p in paths) + f": {cause}{hint}"


def _broken_pipe() -> int:
    """The reader of stdout went away (`... | head`): stop quietly, as a killed pipe writer does."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    except (OSError, ValueError):  # pragma: no cover - stdout without a file descriptor
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a writer killed by the pipe


_RESUMABLE = ("sweep", "figures", "plan")


def _interrupted(command: str | None) -> int:
    """Ctrl-C: one line (after the ^C the terminal echoed), exit status 130."""
    where = f"echosim {command}" if command else "echosim"
    tail = "; finished runs are saved — re-run the same command to resume" if command in _RESUMABLE else ""
    lead = "\n" if getattr(sys.stderr, "isatty", lambda: False)() else ""
    try:
        print(f"{lead}{where}: interrupted{tail}", file=sys.stderr)
    except (OSError, ValueError):  # pragma: no cover - stderr gone
        pass
    return 130


def _missing_extra(exc: ImportError) -> str | None:
    """One line for an optional package that is not installed, or None for any other ImportError."""
    from echosim.experiments.extras import EXTRAS, MissingExtra

    if isinstance(exc, MissingExtra):
        return str(exc)
    top = (exc.name or "").split(".")[0]
    if isinstance(exc, ModuleNotFoundError) and top in EXTRAS:
        return f"this command needs {top}, which is not installed: pip install 'echosim[{EXTRAS[top]}]'"
    return None


class _OneLineWarnings:
    """Each distinct warning once, as one line ``echosim CMD: warning: ...`` on stderr.

    A config warning (a legal but pointless value) is shown at once. NumPy's
    RuntimeWarnings (overflow and the like, no source lines under them) are kept for
    the end: after a command that worked they follow its output, one line each; when
    bad input stops the command, its error line says what went wrong and they are
    dropped, so the answer stays one line.
    """

    def __init__(self, command: str):
        self.command = command
        self.seen: set[str] = set()
        self.later: list[str] = []

    def __call__(self, message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        if text in self.seen:
            return
        self.seen.add(text)
        schema = sys.modules.get("echosim.experiments.schema")  # not imported: no config warning
        if schema is not None and issubclass(category, schema.ConfigWarning):
            self._print(text)
        elif issubclass(category, RuntimeWarning):
            self.later.append(f"{text} ({category.__name__})")
        else:
            self._print(f"{text} ({category.__name__})")

    def _print(self, text: str) -> None:
        try:
            print(f"echosim {self.command}: warning: {text}", file=sys.stderr, flush=True)
        except (OSError, ValueError):  # pragma: no cover - stderr gone
            pass

    def flush(self) -> None:
        for text in self.later:
            self._print(text)
        self.later = []


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 1 runs failed, 2 bad input, 130 interrupted)."""
    import warnings

    command = None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = args.command
        if args.command is None:
            print("python -m echosim: error: choose a subcommand: sweep, run, plot, figures, bounds, info, plan "
                  "(see --help)", file=sys.stderr)
            return EXIT_BAD_INPUT
        shown = _OneLineWarnings(args.command)
        with warnings.catch_warnings():  # restores the caller's showwarning afterwards
            warnings.showwarning = shown
            status = args.func(args)
        shown.flush()
        return status
    except BrokenPipeError:
        return _broken_pipe()
    except KeyboardInterrupt:
        return _interrupted(command)
    except OSError as exc:
        print(f"echosim {command}: error: {_os_error(exc, command)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ValueError as exc:  # ConfigError included: bad input, not a bug
        msg = " ".join(str(exc).split())
        print(f"echosim {command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ImportError as exc:
        msg = _missing_extra(exc)
        if msg is None:
            raise
        print(f"echosim {command}: error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RuntimeError as exc:
        from echosim.experiments.executors import SweepError

        if not isinstance(exc, SweepError):
            raise
        print(f"echosim {command}: error: {exc}", file=sys.stderr)
        return 1
