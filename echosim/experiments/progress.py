"""Progress of long work: a bar redrawn in place on a terminal, a plain line now and then
otherwise (batch logs, notebooks, pipes), and nothing at all when silenced.

One facility for every long wait (a sweep's runs, the planner's simulations):

>>> import io
>>> log = io.StringIO()
>>> with Progress(3, stream=log, unit="run", desc="sweep") as bar:
...     for _ in range(3):
...         bar.update()
>>> print(log.getvalue().strip().split(" [")[0])
sweep 100%|##########| 3/3

`Progress(total, enabled=False)` prints nothing; `echosim sweep --quiet` and
``run_sweep(progress=False)`` pass it down. No dependency beyond the standard library;
in a Jupyter kernel, where tqdm's notebook support works (``pip install
'echosim[notebook]'``: tqdm and ipywidgets), the bar is tqdm's widget instead of lines
in the cell's stderr, and it falls back to the lines wherever that fails.
"""

from __future__ import annotations

import math
import sys
import time

__all__ = ["Progress", "format_meter"]

_WIDTH = 10


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def format_meter(done: int, total: int, elapsed: float, unit: str = "it", desc: str = "") -> str:
    """``desc  40%|####      | 2/5 [00:03<00:04, 0.67 run/s]``: done/total, elapsed<ETA, rate."""
    frac = done / total if total else 1.0
    filled = min(_WIDTH, int(frac * _WIDTH))
    rate = done / elapsed if elapsed > 0 else math.nan
    eta = (total - done) / rate if done and rate > 0 else math.inf
    if not math.isfinite(rate):
        speed = f"? {unit}/s"
    elif rate >= 1 or rate == 0:
        speed = f"{rate:.2f} {unit}/s"
    else:
        speed = f"{1 / rate:.2f} s/{unit}"
    head = f"{desc} " if desc else ""
    return (f"{head}{100 * frac:3.0f}%|{'#' * filled}{' ' * (_WIDTH - filled)}| {done}/{total} "
            f"[{_clock(elapsed)}<{_clock(eta)}, {speed}]")


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (without importing IPython when it is not)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except Exception:  # noqa: BLE001 - any failure: not a notebook we can draw in
        return False
    return shell is not None and getattr(shell, "kernel", None) is not None


def _widget(total: int, unit: str, desc: str):
    """tqdm's notebook bar, or None where tqdm or its widgets (ipywidgets) are missing or fail."""
    if not _in_notebook():
        return None
    try:
        from tqdm.notebook import tqdm

        return tqdm(total=total, unit=unit, desc=desc or None, leave=True)
    except Exception:  # noqa: BLE001 - ImportError, or tqdm's "IProgress not found": plain lines then
        return None


class Progress:
    """done/total, rate and ETA on `stream` (default stderr).

    On a terminal the line is redrawn in place (a carriage return before each update,
    at most `refresh` seconds apart, and a newline at the end); elsewhere a plain line
    is written every `every` seconds and once at the end, so logs stay short.
    ``enabled=False`` (or a total of 0) writes nothing. A context manager: leaving the
    block ends the line, also on an interrupt. `desc` names the wait (which figure, which
    candidates); in a notebook, with the default stream, a tqdm widget replaces the lines.
    """

    def __init__(self, total: int, stream=None, enabled: bool = True, every: float = 10.0, unit: str = "run",
                 desc: str = "", refresh: float = 0.1):
        self.total, self.done, self.unit, self.desc = int(total), 0, unit, desc
        self.every, self.refresh = float(every), float(refresh)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = bool(enabled) and self.total > 0
        isatty = getattr(self.stream, "isatty", None)
        try:
            self.tty = bool(isatty()) if isatty is not None else False
        except (ValueError, OSError):  # a closed stream
            self.tty = False
        self.t0 = time.perf_counter()
        self._last = -math.inf if self.tty else self.t0
        self._drawn = -1  # `done` when the line was last drawn (terminal)
        self._closed = False
        self._widget = _widget(self.total, unit, desc) if self.enabled and stream is None else None
        if self._widget is not None:
            self.tty = False
            return
        if self.enabled and self.tty:
            self._draw()

    def text(self) -> str:
        """The current line (on a terminal, its name shortened to fit the width: a wrapped
        line could not be redrawn in place)."""
        elapsed = time.perf_counter() - self.t0
        line = format_meter(self.done, self.total, elapsed, self.unit, self.desc)
        if self.tty and self.desc:
            import shutil

            width = shutil.get_terminal_size((80, 24)).columns - 1
            if len(line) > width:
                room = max(0, len(self.desc) - (len(line) - width) - 1)
                line = format_meter(self.done, self.total, elapsed, self.unit, self.desc[:room] + "…")
        return line

    def _write(self, s: str) -> None:
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is not worth a crash
            self.enabled = False

    def _draw(self) -> None:
        self._write("\r" + self.text())
        self._drawn = self.done
        self._last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        """`n` more done."""
        self.done += n
        if not self.enabled or self._closed:
            return
        if self._widget is not None:
            self._widget.update(n)
            if self.done >= self.total:
                self.close()
            return
        now = time.perf_counter()
        if self.tty:
            if self.done >= self.total or now - self._last >= self.refresh:
                self._draw()
            if self.done >= self.total:
                self.close()
            return
        if self.done >= self.total or now - self._last >= self.every:
            self._write(self.text() + "\n")
            self._last = now

    def close(self) -> None:
        """End the line (on a terminal); later updates print nothing."""
        if self._closed:
            return
        self._closed = True
        if self._widget is not None:
            self._widget.close()
            return
        if self.enabled and self.tty and self._drawn >= 0:
            if self._drawn != self.done:
                self._draw()
            self._write("\n")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
