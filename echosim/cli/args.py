"""Argument parsing shared by the subcommands: one-line errors (exit 2) and numeric types."""

from __future__ import annotations

import argparse
import math

EXIT_BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of usage + message."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


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


def _number(text: str) -> int | float:
    """An argparse type: a number, passed on as a number (its range is its owner's to check:
    ``--echo`` goes to the echo policy's check_echo through the config)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    return int(v) if math.isfinite(v) and v == int(v) else v


def _nonneg_float(text: str) -> float:
    return _float(text, 0.0, False)




def _path(text: str) -> str:
    """An argparse type: a non-empty path (an empty one would silently mean the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return text


def _print_json(obj) -> None:
    """`obj` as strict JSON on stdout: NumPy values as Python ones, NaN and ±inf as null."""
    import json

    from echosim.experiments.specs import strict_jsonable

    print(json.dumps(strict_jsonable(obj), indent=1, allow_nan=False, default=str))
