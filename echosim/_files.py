"""Files echosim writes, written atomically: a temp file in the same directory, fsync,
rename; never through a symbolic link; a failed write leaves the previous file as it was.

The one writer every layer uses (the run store's packs and failure records, a sweep's
tables and manifest, the planner's figure, a trace saved to a file). Standard library only.
"""

from __future__ import annotations

import errno
import os
import secrets
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_file", "open_dir", "temp_name", "temp_pid", "writer_gone", "lock"]

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
DIR_FD = os.open in os.supports_dir_fd and os.replace in os.supports_dir_fd


def temp_name(name: str) -> str:
    """A fresh temp name next to `name`: the writer's pid (for a cleaner) and a random token."""
    return f".{name}.{os.getpid()}.{secrets.token_hex(8)}.tmp"


def temp_pid(name: str) -> int | None:
    """The writer's pid in a temp file name (this version's or the older ``.<name>.<pid>.tmp``)."""
    parts = name.split(".")
    if len(parts) >= 4 and parts[-1] == "tmp":
        for candidate in (parts[-3], parts[-2]):
            if candidate.isdigit():
                return int(candidate)
    return None


def open_dir(d: Path, follow: bool, error=ValueError) -> int | None:
    """Create directory `d` and open it; with `follow` False it must not be a symbolic link
    (else `error`, one line naming it).

    Files are then created and renamed relative to this descriptor, so a link planted
    in place of the directory, or of a temp file, cannot redirect a write. Returns None
    where the platform has no directory descriptors.
    """
    d.mkdir(parents=True, exist_ok=True)
    if not DIR_FD:  # pragma: no cover - not POSIX
        if not follow and d.is_symlink():
            raise error(f"{str(d)!r} is a symbolic link; echosim never writes through one (remove it)")
        return None
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | (0 if follow else NOFOLLOW)
    try:
        return os.open(d, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (not follow and d.is_symlink()):
            raise error(f"{str(d)!r} is a symbolic link; echosim never writes through one "
                        "(remove it, or point the path at the directory itself)") from None
        raise OSError(exc.errno, exc.strerror, str(d)) from None


@contextmanager
def atomic_file(path, follow: bool = True, error=ValueError):
    """A binary file that becomes `path` only when the block ends without error.

    The temp file has a random name in `path`'s directory and is created exclusively
    (``O_EXCL``, never through a link); its data are flushed to disk (``fsync``) before
    ``os.replace`` puts it in place of whatever `path` was (a link there is replaced,
    never written through), then the directory entry is synced too. With `follow` False
    the directory itself must not be a link either (`error` if it is). The writer holds
    an advisory lock on its temp file while writing, so a cleaner can tell a temp file
    whose writer is gone from one a live writer still owns.

    On error the temp file is removed and the previous `path`, if any, is left as it
    was; an `OSError` (a full disk, a read-only file system) names `path` and says so
    in its one line.
    """
    path = Path(path)
    dfd = open_dir(path.parent, follow, error)
    tmp = temp_name(path.name)
    where = (lambda name: name) if dfd is not None else (lambda name: str(path.with_name(name)))  # noqa: E731
    kw = {"dir_fd": dfd} if dfd is not None else {}
    try:
        try:
            fd = os.open(where(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644, **kw)
        except FileExistsError:
            raise
        except OSError as exc:
            raise OSError(exc.errno, _kept(exc.strerror or str(exc), path), str(path)) from None
        try:
            with os.fdopen(fd, "wb") as f:
                lock(f, blocking=True)
                yield f
                f.flush()
                os.fsync(f.fileno())
                rkw = {"src_dir_fd": dfd, "dst_dir_fd": dfd} if dfd is not None else {}
                os.replace(where(tmp), where(path.name), **rkw)
            if dfd is not None:
                try:
                    os.fsync(dfd)
                except OSError:  # pragma: no cover - a file system that cannot sync a directory
                    pass
        except BaseException as exc:
            try:
                os.unlink(where(tmp), **kw)
            except FileNotFoundError:
                pass
            if isinstance(exc, OSError) and not isinstance(exc, FileExistsError) and \
                    exc.filename in (None, str(path), where(tmp)):
                raise OSError(exc.errno, _kept(exc.strerror or str(exc), path), str(path)) from exc
            raise
    finally:
        if dfd is not None:
            os.close(dfd)


def _kept(cause: str, path: Path) -> str:
    """The cause of a failed write and what became of the file."""
    try:
        there = path.exists() or path.is_symlink()
    except OSError:  # pragma: no cover
        there = False
    return f"{cause}; the previous {path.name} is left as it was" if there else f"{cause}; {path.name} was not written"


def lock(f, blocking: bool) -> bool:
    """Take an exclusive advisory lock on an open file; False if another process holds it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: liveness falls back to the pid
        return True
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def writer_gone(path: Path, pid: int) -> bool:
    """Whether the temp file `path` was left by a writer that is gone (killed mid-write):
    nobody holds its lock and its pid no longer runs (a zombie counts as gone)."""
    try:  # never through a link, never blocking (a planted FIFO)
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:  # its writer just renamed it into place
        return False
    except OSError:  # a link or something else that is not our temp file: leave it
        return False
    with os.fdopen(fd, "rb") as f:
        if not lock(f, blocking=False):
            return False
    return not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):  # no /proc (macOS): a zombie cannot be told apart, keep its file
        return True
    return state not in ("Z", "X")
