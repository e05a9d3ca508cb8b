"""Which compiled kernel a run uses, compiling kernels ahead of the runs, and the line a
run prints when Numba compiles: kernel names (`kernel_key`), their lookup, `kernel_cached`
and `compile_kernels` (public through `echosim.training.runner`).
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import numpy as np

from echosim.training.losses import get_loss
from echosim.training.methods import get_method

__all__ = [
    "QUIET_ENV",
    "compile_kernels",
    "compile_notice",
    "kernel_cached",
    "kernel_key",
    "kernel_named",
    "kernel_of",
]

QUIET_ENV = "ECHOSIM_QUIET"
"""Set to 1 to silence the line a run prints on stderr when it must compile its kernels."""


def kernel_key(method: str, loss: str, many: bool, first_loss: bool = False) -> str:
    """The name of the kernel a run of `method` on `loss` uses (`run_many` if `many`; one
    recording first-step losses if `first_loss`), e.g. ``"echoed_gd:logistic:wide"``: what
    `compile_kernels` and `kernel_cached` take."""
    get_method(method)
    layout = "wide" if many and get_loss(loss).margin else "rows"
    return f"{method}:{loss}:{layout}" + (":first_loss" if first_loss else "")



def kernel_named(key: str):
    """The kernel of name `key` (`kernel_key`), compiled on its first call."""
    method, loss, layout, *first = key.split(":")
    row = get_method(method)
    return kernel_of(row.code, get_loss(loss).code, layout == "wide", row.sub_batches, first == ["first_loss"])


def kernel_of(method_code, loss_code, wide, sub, first):
    """The kernel of a method row's and a loss row's codes, layout and options (`kernel_for`)."""
    from echosim.training.kernel import kernel_for  # compiles on first call, not at import

    return kernel_for(method_code, loss_code, wide, sub, first)


@contextmanager
def compile_notice(quiet: bool, what: str = "this run"):
    """Say once on stderr, when Numba starts compiling inside the block, what it compiles
    (`what`: the kernel's name and dtype) and when that comes back (loading from Numba's
    cache says nothing); silent with `quiet` or $ECHOSIM_QUIET=1."""
    if quiet or os.environ.get(QUIET_ENV, "") not in ("", "0"):
        yield
        return
    from numba.core import event

    class _Notice(event.Listener):
        said = False

        def on_start(self, ev):
            if not self.said:
                self.said = True
                print(f"echosim: compiling the Numba kernels of {what}: each kernel compiles once per machine and "
                      "is cached for later runs; a run of another method, loss or dtype compiles its own "
                      f"({QUIET_ENV}=1 or quiet=True silences this)", file=sys.stderr, flush=True)

        def on_end(self, ev):
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield


def kernel_cached(key: str) -> bool:
    """Whether Numba's on-disk cache holds code of kernel `key` (`kernel_key`; "draws": the
    synthetic problems' batch draws) compiled from the current source. A guess, used only
    to skip work and to say when compiling starts: it reads Numba's private cache index
    (whose keys hash the kernel's specialisation), and any surprise counts as not cached."""
    try:
        if key == "draws":
            from echosim.training.sampling import draw_block as kernel
        else:
            check_key(key)
            kernel = kernel_named(key)
        cache = kernel._cache
        _, magic, hashes = cache._index_key(None, kernel.targetctx.codegen())
        return any(k[1] == magic and k[2] == hashes for k in cache._cache_file._load_index())
    except Exception:  # noqa: BLE001 - another Numba version: count it as not cached
        return False


def compile_kernels(dtypes=("float64",), *, kernels=("draws",)) -> None:
    """Compile (or load from Numba's cache) the kernels named in `kernels` for `dtypes`.

    kernels: "draws" (the synthetic problems' batch draws) and kernel names of
    `kernel_key` (e.g. "echoed_gd:logistic:wide"). Call it once in a parent process
    before starting workers, so that forked workers inherit the compiled code instead
    of compiling it again each. The kernels are called on tiny arrays of the types
    `Run` passes (a test holds that a real run adds no signature), so each compiles
    alone: two processes can compile two at once.
    """
    for key in kernels:
        if key != "draws":
            check_key(key)
    from echosim.training.kernel import warm_up

    for dtype in map(np.dtype, dtypes):
        for key in kernels:
            if key == "draws":
                from echosim.training.problems import LeastSquares

                LeastSquares(dim=1).batches(0, 0, 1, 1, dtype)
                continue
            warm_up(kernel_named(key), get_method(key.split(":")[0]), dtype, key.endswith(":first_loss"))


def check_key(key):
    """ValueError unless `key` names a kernel of a known method and loss (`kernel_key`'s form)."""
    parts = key.split(":") if isinstance(key, str) else ()
    if len(parts) not in (3, 4) or parts[2] not in ("rows", "wide") or parts[3:] not in ([], ["first_loss"]):
        raise ValueError(f"kernels must be 'draws' or names such as 'echoed_gd:logistic:wide', got {key!r}")
    get_method(parts[0])
    get_loss(parts[1])
