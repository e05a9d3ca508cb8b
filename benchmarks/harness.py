"""The one harness every benchmark script uses: the machine and its load, interleaved
timing, medians with their spread, strict JSON out, and the subprocess and fork runners
of the bad-input and fuzz scripts.

A script opens a `Session` (it prints the environment line and the load at the start,
and at the end the load again; with ``--json PATH`` it writes everything it measured
there), times its variants with `interleave` (every variant once per repeat, the order
rotated each repeat: A B C, B C A, ..., so drift on a shared machine hits all alike),
summarises them with `summary` (median, IQR and the 10-90% range) and compares them
with `ratio`. Commands run through `run_command` (exit status, stdout, stderr, wall
seconds and peak RSS, killed with their process group at a time limit); a Python
callable runs in a forked child through `fork_call` (same answer, plus what it
returned, as JSON). `classify_cli` grades a command line's answer to bad input.

Only the standard library at import: NumPy, Numba and torch versions are read from the
installed distributions, so a script that never imports torch never pays for it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIGS = HERE / "configs"

ONE_THREAD = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread-count variables set to 1 for timings of one core (BLAS, OpenMP, Numba)."""

XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


# --------------------------------------------------------------------------- environment


def one_thread(environ=None) -> dict:
    """Set every thread-count variable to 1 where unset (before NumPy is imported); returns the mapping."""
    environ = os.environ if environ is None else environ
    for name in ONE_THREAD:
        environ.setdefault(name, "1")
    return environ


def env_for(root=None, *, numba_cache=None, threads_one=True, **extra) -> dict:
    """The environment of a child process: ``PYTHONPATH=root`` (the code tree it imports),
    one thread for BLAS, OpenMP, Numba and XLA, ``NUMBA_CACHE_DIR`` if given, and `extra`."""
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = str(root)
    if threads_one:
        for name in ONE_THREAD:
            env[name] = "1"
        env["XLA_FLAGS"] = XLA_ONE_THREAD
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def load() -> list[float]:
    """The 1, 5 and 15-minute load averages."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo, else the platform's processor string)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "?"


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """The machine and the software a timing depends on, and the load now."""
    try:
        affinity = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        affinity = None
    echosim_dir = None
    try:
        import echosim

        echosim_dir = str(Path(echosim.__file__).resolve().parent.parent)
    except ImportError:
        pass
    return {
        "machine": platform.machine(), "system": platform.system(), "cpu": cpu_model(), "cores": os.cpu_count(),
        "affinity": affinity, "python": platform.python_version(),
        "numpy": _version("numpy"), "numba": _version("numba"), "torch": _version("torch"),
        "echosim": _version("echosim"), "echosim_tree": echosim_dir,
        "threads": {name: os.environ.get(name) for name in ONE_THREAD if name in os.environ},
        "load": load(),
    }


def environment_line(env: dict | None = None) -> str:
    """One line for a report: CPU, cores, Python, NumPy, Numba, torch, load average."""
    e = environment() if env is None else env
    soft = ", ".join(f"{name} {e[key]}" for name, key in (("Python", "python"), ("NumPy", "numpy"),
                                                           ("Numba", "numba"), ("torch", "torch")) if e.get(key))
    return (f"{e['cpu']} ({e['machine']}), {e['cores']} cores; {soft}; "
            f"load average {' '.join(f'{x:.2f}' for x in e['load'])}")


# --------------------------------------------------------------------------- statistics


def _quantile(sorted_values, q: float) -> float:
    """Linear interpolation between order statistics (NumPy's default rule)."""
    n = len(sorted_values)
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summary(values) -> dict:
    """Median and spread of repeated measurements: n, median, q25, q75, iqr, p10, p90, min, max.

    Values that are None or NaN (a repeat that failed) are left out and counted in
    ``failed``; with nothing left every statistic is None."""
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    failed = len(list(values)) - len(vals)
    if not vals:
        return {"n": 0, "failed": failed, "median": None, "q25": None, "q75": None, "iqr": None, "p10": None,
                "p90": None, "min": None, "max": None}
    s = sorted(vals)
    q25, q75 = _quantile(s, 0.25), _quantile(s, 0.75)
    return {"n": len(s), "failed": failed, "median": statistics.median(s), "q25": q25, "q75": q75,
            "iqr": q75 - q25, "p10": _quantile(s, 0.10), "p90": _quantile(s, 0.90), "min": s[0], "max": s[-1]}


def median(values):
    """The median of the values that are not None, or None."""
    return summary(values)["median"]


def ratio(a, b) -> float | None:
    """a / b of two numbers or two summaries (their medians); None if either is missing or b is 0."""
    a = a["median"] if isinstance(a, dict) else a
    b = b["median"] if isinstance(b, dict) else b
    if a is None or b is None or b == 0:
        return None
    return a / b


def spread(s: dict, scale: float = 1.0, digits: int = 1) -> str:
    """A summary as text: ``median (q25–q75)``, scaled."""
    if s["median"] is None:
        return "n/a"
    return f"{s['median'] * scale:.{digits}f} ({s['q25'] * scale:.{digits}f}–{s['q75'] * scale:.{digits}f})"


# --------------------------------------------------------------------------- timing


def interleave(tasks: dict, repeats: int, *, rotate: bool = True) -> dict:
    """Call every task once per repeat, the order rotated by one each repeat (A B, B A, ...);
    returns, per task, the list of what each call returned (a time it measured itself, or a
    dict of several)."""
    names = list(tasks)
    out = {name: [] for name in names}
    for r in range(repeats):
        k = r % len(names) if rotate and names else 0
        for name in names[k:] + names[:k]:
            out[name].append(tasks[name]())
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time, "thread": time.thread_time}


def clocked(fn, clock: str = "wall", units: float = 1.0):
    """A task for `interleave`: calls fn() and returns the seconds it took on `clock`
    (wall, cpu: the process, thread: this thread), divided by `units`."""
    now = CLOCKS[clock]

    def task():
        t0 = now()
        fn()
        return (now() - t0) / units

    return task


# --------------------------------------------------------------------------- JSON


def jsonable(obj, infinite: str = "string"):
    """Plain JSON values: NumPy scalars and arrays to numbers and lists, NaN to None, an
    infinity to the string "inf" or "-inf" (``infinite="null"``: to None), tuples and sets
    to lists, paths to strings, dataclasses to dicts, other objects to their repr."""
    if infinite not in ("string", "null"):
        raise ValueError(f"infinite: expected 'string' or 'null', got {infinite!r}")
    return _plain(obj, infinite == "string")


def _plain(obj, inf_as_string: bool):
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            return ("inf" if obj > 0 else "-inf") if inf_as_string else None
        return obj
    if isinstance(obj, dict):
        return {str(k): _plain(v, inf_as_string) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, inf_as_string) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return [_plain(v, inf_as_string) for v in sorted(obj, key=repr)]
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _plain(dataclasses.asdict(obj), inf_as_string)
    item = getattr(obj, "item", None)  # NumPy scalars
    if callable(item) and getattr(obj, "shape", None) == ():
        return _plain(item(), inf_as_string)
    tolist = getattr(obj, "tolist", None)  # NumPy arrays
    if callable(tolist):
        return _plain(tolist(), inf_as_string)
    return repr(obj)


def write_json(path, obj, infinite: str = "string") -> Path:
    """Write `obj` as strict JSON (no bare NaN or Infinity; see `jsonable`), atomically
    (a temp file beside it, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(jsonable(obj, infinite), allow_nan=False, indent=1)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def last_json(text: str):
    """The JSON value on the last non-empty line of a child's stdout."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise ValueError("no output: expected a JSON line")
    return json.loads(lines[-1])


# --------------------------------------------------------------------------- a session


def add_options(ap, smoke: str = "tiny sizes, one repeat: checks the script runs (its numbers mean nothing)"):
    """Add ``--json PATH`` and ``--smoke`` to an argparse parser."""
    ap.add_argument("--json", metavar="PATH", default=None,
                    help="also write the environment, the load and every result to this JSON file")
    ap.add_argument("--smoke", action="store_true", help=smoke)
    return ap


class Session:
    """One benchmark's run: prints the environment line and the load at the start, the load
    and the time taken at the end, and with ``--json`` writes {bench, command, environment,
    load_start, load_end, seconds, smoke, results} (strict JSON). Put what was measured in
    ``session.results`` (a dict)."""

    def __init__(self, name: str, args=None, argv=None, *, header: bool = True):
        self.name, self.args, self.header = name, args, header
        self.argv = list(sys.argv[1:] if argv is None else argv)
        self.results: dict = {}
        self.json_path = getattr(args, "json", None)
        self.smoke = bool(getattr(args, "smoke", False))

    def __enter__(self):
        self.environment = environment()
        self.load_start = self.environment["load"]
        self.t0 = time.perf_counter()
        if self.header:
            print(f"# {self.name}\n")
            print(f"- {environment_line(self.environment)} (at the start)")
            print(f"- command: python benchmarks/{self.name}.py {' '.join(self.argv)}".rstrip())
            if self.smoke:
                print("- smoke: tiny sizes, to check the script runs; the numbers mean nothing")
            print(flush=True)
        return self

    def document(self) -> dict:
        return {"bench": self.name, "command": [f"benchmarks/{self.name}.py", *self.argv],
                "environment": self.environment, "load_start": self.load_start, "load_end": load(),
                "seconds": time.perf_counter() - self.t0, "smoke": self.smoke, "results": self.results}

    def __exit__(self, kind, exc, tb):
        doc = self.document()
        if self.header:
            print(f"\n- load average at the end: {' '.join(f'{x:.2f}' for x in doc['load_end'])}; "
                  f"{doc['seconds']:.0f} s in all", flush=True)
        if self.json_path and kind is None:
            write_json(self.json_path, doc)
        return False


# --------------------------------------------------------------------------- commands and forks


@dataclasses.dataclass
class Outcome:
    """What a child did: its exit status (None: killed at the time limit), stdout, stderr,
    wall seconds, peak RSS in MB (commands) and the JSON value it returned (forks)."""

    status: int | None
    out: str
    err: str
    seconds: float
    peak_mb: float | None = None
    result: object = None

    def last_line(self, stream: str = "out") -> str:
        lines = [line for line in getattr(self, stream).strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def check(self, what: str = "the command") -> Outcome:
        """Self, or SystemExit with the last lines of stderr when it failed."""
        if self.status != 0:
            tail = "\n".join(self.err.strip().splitlines()[-5:])
            raise SystemExit(f"{what} failed (exit {self.status}):\n{tail}")
        return self


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by pid (a child started in its own session), if any is left."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(pid: int, deadline: float | None):
    """(exit status or None at the deadline, rusage or None) of a child."""
    while True:
        done, status, usage = os.wait4(pid, 0 if deadline is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), usage
        if time.perf_counter() > deadline:
            return None, None
        time.sleep(0.02)


def run_command(argv, *, cwd=None, env=None, timeout: float | None = None, session: bool = False,
                stdin=None) -> Outcome:
    """Run a command with stdout and stderr captured in files (no pipe can fill up); killed
    with its process group at `timeout` (status None); `session`: in its own session (then
    anything it leaves behind is killed too). Peak RSS from the child's own rusage."""
    with tempfile.TemporaryDirectory(prefix="echosim-bench-cmd-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        t0 = time.perf_counter()
        with open(out_path, "w") as out, open(err_path, "w") as err:
            proc = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=env, stdout=out, stderr=err,
                                    stdin=subprocess.DEVNULL if stdin is None else stdin,
                                    start_new_session=session)
            status, usage = _wait(proc.pid, None if timeout is None else t0 + timeout)
            if status is None:
                kill_group(proc.pid) if session else proc.kill()
                _, usage = _wait(proc.pid, None)
            proc.returncode = -1  # reaped here; keeps Popen from waiting again
        seconds = time.perf_counter() - t0
        if session:
            kill_group(proc.pid)
        return Outcome(status, out_path.read_text(errors="replace"), err_path.read_text(errors="replace"),
                       seconds, usage.ru_maxrss / 1024 if usage is not None else None)


def python(code_or_script, *args, root=None, **kw) -> Outcome:
    """`run_command` of ``python -c CODE`` (a string with a newline) or ``python SCRIPT`` with
    this interpreter, importing echosim from `root` (default: this tree)."""
    env = kw.pop("env", None) or env_for(root or ROOT)
    head = ["-c", code_or_script] if "\n" in str(code_or_script) else [str(code_or_script)]
    return run_command([sys.executable, *head, *map(str, args)], env=env, cwd=kw.pop("cwd", root or ROOT), **kw)


def fork_call(fn, cwd, timeout: float, env: dict | None = None) -> Outcome:
    """Run fn() in a forked child: its own session, cwd `cwd`, `env` added to its environment,
    stdin from /dev/null, stdout and stderr to files in `cwd` (fresh streams: nothing the
    parent buffered leaks in). fn returns an exit status, or a JSON value (then the status
    is 0 and the value is ``result``); SystemExit gives its code; any other exception is
    printed as the interpreter would and gives 1. Killed with its group at `timeout`."""
    cwd = Path(cwd)
    out_path, err_path, res_path = cwd / "stdout", cwd / "stderr", cwd / "result.json"
    for p in (out_path, err_path, res_path):
        p.unlink(missing_ok=True)
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 1
        try:
            os.setsid()
            os.chdir(cwd)
            os.environ.update(env or {})
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            for fd, path in ((1, out_path), (2, err_path)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            import io

            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), errors="replace")
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), errors="replace")
            try:
                got = fn()
                if isinstance(got, int) and not isinstance(got, bool):
                    rc = got
                else:
                    res_path.write_text(json.dumps(jsonable(got), allow_nan=False))
                    rc = 0
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:  # noqa: BLE001 - what the interpreter would print
                import traceback

                traceback.print_exc()
                rc = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc if isinstance(rc, int) else 1)
    status, _ = _wait(pid, t0 + timeout)
    if status is None:
        kill_group(pid)
        os.waitpid(pid, 0)
    seconds = time.perf_counter() - t0
    kill_group(pid)  # any worker it left behind
    result = json.loads(res_path.read_text()) if res_path.exists() else None
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""
    return Outcome(status, read(out_path), read(err_path), seconds, None, result)


def cli_status(argv) -> int:
    """``python -m echosim ARGV`` inside this process (for `fork_call`): its exit status."""
    from echosim.cli import main

    try:
        rc = main(list(argv))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return rc if isinstance(rc, int) else 0


def names_all(text: str, needles, ignore_case: bool = False) -> bool:
    """Every needle is in text; a needle ``a|b`` accepts either spelling."""
    if ignore_case:
        text = text.lower()
    return all(any((alt.lower() if ignore_case else alt) in text for alt in n.split("|")) for n in needles if n)


def classify_cli(o: Outcome, expect: str, needles=(), *, timeout: float | None = None,
                 ignore_case: bool = False) -> str:
    """'clean', or why a command's answer to bad input is not, from its Outcome.

    expect ``error``: exit status 2, exactly one non-empty line on stderr naming every
    needle, nothing on stdout, within `timeout`. ``warn``: exit 0 and every stderr line a
    ``warning:`` naming the needles. ``ok``: exit 0. ``either``: ok or a clean error.
    Classes: hang, traceback, silent (bad input accepted without a word), status, lines,
    field (the line does not name the field), stdout (work done before the refusal),
    ``broken (exit N)`` (valid input refused)."""
    lines = [line for line in o.err.splitlines() if line.strip()]
    if o.status is None:
        return "hang"
    if "Traceback" in o.err:
        return "traceback"
    if expect in ("ok", "either") and o.status == 0:
        return "clean"
    if expect == "ok":
        return f"broken (exit {o.status})"
    if expect == "warn":
        if o.status != 0:
            return "status"
        warns = [line for line in lines if "warning:" in line]
        if not warns:
            return "silent"
        if len(lines) != len(warns) or any("RuntimeWarning" in line for line in lines):
            return "lines"
        return "clean" if names_all(" ".join(warns), needles, ignore_case) else "field"
    if o.status == 0 and not lines:
        return "silent"
    if o.status != 2:
        return "status"
    if len(lines) != 1:
        return "lines"
    if not names_all(lines[0], needles, ignore_case):
        return "field"
    if o.out.strip():
        return "stdout"
    if timeout is not None and o.seconds > timeout:
        return "hang"
    return "clean"
