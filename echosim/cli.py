"""Command line: python -m echosim <subcommand>."""

from __future__ import annotations

import argparse
import sys


def _cmd_run(args) -> int:
    import echosim

    problem = echosim.Logistic(dim=20, design="sphere", radius=1.0, w_star_norm=2.0)
    optimizer = echosim.EchoedGD(lr=args.lr)
    traj = echosim.run(problem, optimizer, batch_size=args.batch_size, echo=args.echo,
                       n_batches=args.n_batches, seed=args.seed)
    for key, value in traj.summary().items():
        print(f"{key:>20}: {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m echosim", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run one echoed-GD simulation and print its summary")
    run.add_argument("--batch-size", type=int, default=64)
    run.add_argument("--echo", type=int, default=4)
    run.add_argument("--n-batches", type=int, default=500)
    run.add_argument("--lr", type=float, default=1.0)
    run.add_argument("--seed", type=int, default=0)
    run.set_defaults(func=_cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["run", *(argv or sys.argv[1:])])
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"echosim: error: {exc}", file=sys.stderr)
        return 2
