"""Size checks: refuse, before anything is allocated, a size whose arrays cannot fit in
this machine's memory, with one line naming the argument and the largest value that fits.

The memory limit is the machine's physical memory (or the container's limit, if lower),
a fixed number per machine, so the same input is accepted or refused every time.
"""

from __future__ import annotations

import functools
import math
import os

__all__ = ["memory_limit", "check_fits", "format_bytes", "read_bounded", "check_file_size"]

_FALLBACK = 16 << 30


@functools.lru_cache(maxsize=1)
def memory_limit() -> int:
    """Bytes of memory a run may use: physical memory, or the cgroup limit if lower
    (read once per process: every size check asks)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        total = _FALLBACK
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
    return int(total) if total > 0 else _FALLBACK


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_fits(name: str, value, bytes_per_unit: float, fixed_bytes: float = 0.0, what: str = "") -> None:
    """ValueError if `value` units of `bytes_per_unit` (plus `fixed_bytes`) exceed `memory_limit()`.

    The message names `name`, the memory it needs and the largest value that fits, e.g.
    ``n_batches=10**12 needs 37.3 TiB of memory (the schedule), more than this
    machine's 23.5 GiB: at most 631,672,800``.
    """
    need = float(value) * float(bytes_per_unit) + float(fixed_bytes)
    limit = memory_limit()
    if need <= limit:
        return
    most = max(0, math.floor((limit - fixed_bytes) / bytes_per_unit)) if bytes_per_unit > 0 else 0
    shown = f"{value:g}" if isinstance(value, float) else f"{value}"
    for_what = f" ({what})" if what else ""
    raise ValueError(f"{name}={shown} needs {format_bytes(need)} of memory{for_what}, more than this machine's "
                     f"{format_bytes(limit)}: at most {most:,} fit")


def check_file_size(path, limit: int, what: str) -> int:
    """The size of regular file `path`; ValueError naming it if it is not a regular file
    (a directory, a device such as /dev/zero, a pipe) or holds more than `limit` bytes."""
    import stat

    p = os.fspath(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise ValueError(f"{what} {p!r}: {exc.strerror or type(exc).__name__}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise ValueError(f"{what} {p!r} is {kind}")
    if st.st_size > limit:
        raise ValueError(f"{what} {p!r} holds {format_bytes(st.st_size)}, more than the limit of "
                         f"{format_bytes(limit)}")
    return int(st.st_size)


def read_bounded(path, limit: int, what: str) -> bytes:
    """The bytes of `path`, refusing (ValueError naming it) one that holds more than
    `limit`: reads at most `limit` + 1 bytes, so /dev/zero or an endless pipe ends at once."""
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"cannot read {what} {p!r}: {exc.strerror or type(exc).__name__}") from None
    if len(data) > limit:
        raise ValueError(f"{what} {p!r} holds more than the limit of {format_bytes(limit)}")
    return data
