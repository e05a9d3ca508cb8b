"""Hostile input to the real loop's surfaces: how much of it gets a clean answer?

    PYTHONPATH=. python benchmarks/fuzz_loop.py              # 440 cases drawn with seed 0
    PYTHONPATH=. python benchmarks/fuzz_loop.py --seed 7     # a fresh hostile set
    PYTHONPATH=. python benchmarks/fuzz_loop.py --show       # every unclean case

(`PYTHONPATH=.` so that the checkout's echosim is the one imported.)

The surfaces: records files through `load_records` and through ``python -m echosim
plan --records``, `pilot`'s arguments, `echoing`'s arguments and `echoing.report`'s
inputs. Each case is drawn from pools of hostile values (wrong types, negative, NaN,
infinite, huge, empty, truncated and corrupted files...) mixed with valid ones, and runs
in a forked child, killed at 5 s. A case is clean when:

* it should fail: the API raises a ValueError whose one-line message names the field
  (and the file, for a records file); the command line exits 2 with nothing on stdout
  and one line on stderr naming the field (and the file);
* it is valid: it works (the command exits 0);
* either (a corrupted byte that may or may not matter): one of the two.

Anything else is counted against the rate, with its class: ``raw X`` (an exception other
than ValueError escaped), ``field`` (the message does not name the field or the file),
``lines`` (a multi-line message, a traceback, or extra stderr lines), ``status``,
``silent`` (bad input accepted without a word), ``broken`` (valid input refused) or
``hang``. Prints a Markdown report: counts and rate per surface, and the unclean cases.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import warnings
import zipfile
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

TIMEOUT = 5.0


@dataclass
class Case:
    surface: str
    name: str
    run: object  # a callable (API) or an argv list (CLI)
    expect: str  # "error", "ok" or "either"
    needle: str = ""  # alternatives separated by "|"; all of `also` must appear too
    also: tuple = ()


# ---------------------------------------------------------------- records files

def _base_file(d: Path, policy="fixed") -> Path:
    from echosim.loop import echoing

    it = echoing([np.zeros((4, 2))] * 6, 2 if policy == "fixed" else "greedy", batch_size=4)
    for _ in it:
        it.report(1.0)
    return Path(it.records().save(d / f"base_{policy}.npz"))


def _rewrite(src: Path, dst: Path, meta: dict | None = None, arrays: dict | None = None, raw_meta=None) -> Path:
    with np.load(src) as z:
        d = {k: z[k] for k in z.files}
    m = json.loads(str(d["meta"]))
    for k, v in (meta or {}).items():
        if v is KeyError:
            m.pop(k, None)
        else:
            m[k] = v
    d["meta"] = np.array(json.dumps(m)) if raw_meta is None else raw_meta
    if raw_meta is KeyError:
        del d["meta"]
    for k, v in (arrays or {}).items():
        if v is KeyError:
            d.pop(k, None)
        else:
            d[k] = v
    np.savez(dst, **d)
    return dst


FLOAT_FIELDS = ("load_time", "wait_time", "step_start", "step_time", "loss", "lagged_before", "lagged_after",
                "probe", "grad_sq_small", "grad_sq_full")
INT_FIELDS = ("steps_per_batch", "cap", "epoch", "step_batch", "small_batch")
OPTIONAL = ("small_batch", "lagged_before", "lagged_after", "probe", "grad_sq_small", "grad_sq_full")
TIMES = ("load_time", "wait_time", "step_start")


def _file_mutations(rng: random.Random, base: Path, raw: bytes, arrays: dict):
    """(name, writer(dst) -> path, expect, needle): one hostile records file each."""
    muts = []

    def meta(key, value, expect="error", needle=None):
        muts.append((f"meta {key}={value!r:.30}", lambda p: _rewrite(base, p, meta={key: value}), expect,
                     needle or key))

    for v in (123, "lazy", None, [], "SYNC", "", {"a": 1}):
        meta("policy", v)
    for v in ("2", -1, 0, 2.5, True, [2], None):
        meta("echo", v)
    for v in (-64, 0, "64", 2.5, True, [], {"b": 1}):
        meta("batch_size", v)
    meta("batch_size", None, "ok")
    meta("batch_size", 10 ** 30, "either", "batch_size|batch size")
    for v in ("echosim-records-9", None, 3, ""):
        meta("format", v, needle="format|not an echosim records file")
    for v in ("x", [1, 2], {"a": 1}, 5):
        meta("decisions", v)
    for key in ("policy", "echo", "batch_size"):
        muts.append((f"meta without {key}", lambda p, k=key: _rewrite(base, p, meta={k: KeyError}), "error", key))
    for name, rm in (("meta missing", KeyError), ("meta numbers", np.arange(3)), ("meta bad JSON", np.array("{")),
                     ("meta JSON list", np.array("[1]")), ("meta JSON deep", np.array("[" * 100_000)),
                     ("meta bytes", np.array(b"{}"))):
        muts.append((name, lambda p, rm=rm: _rewrite(base, p, raw_meta=rm), "error",
                     "meta|not an echosim records file"))

    def arr(field, value, expect="error", label=None):
        muts.append((f"{field} {label or 'changed'}", lambda p: _rewrite(base, p, arrays={field: value}), expect,
                     field + ("|not an echosim records file" if label == "objects" else "")))

    for f in FLOAT_FIELDS + INT_FIELDS + ("load_censored",):
        a = arrays[f]
        arr(f, KeyError, "ok" if f in OPTIONAL else "error", "missing")
        arr(f, a[: max(0, a.size - rng.randint(1, 3))], label="short")
        arr(f, np.append(a, a[:1]), label="long")
        arr(f, np.stack([a, a]), label="2-d")
        arr(f, np.array([str(x) for x in a]), label="strings")
        arr(f, a.astype(complex) + 1j, label="complex")
        arr(f, np.array([object()] * a.size, dtype=object), label="objects")
    for f in FLOAT_FIELDS:
        a = arrays[f].copy()
        i = rng.randrange(a.size)
        finite = f in TIMES
        for label, v in (("negative", -1.5), ("inf", math.inf), ("-inf", -math.inf), ("nan", math.nan),
                         ("huge", 1e308)):
            b = a.copy()
            b[i] = v
            if f == "loss" or f in ("lagged_before", "lagged_after", "probe"):
                expect = "ok"
            elif f in ("grad_sq_small", "grad_sq_full"):
                expect = "error" if label in ("negative", "inf", "-inf") else "ok"
            elif f == "step_time":
                expect = "ok" if label in ("nan", "huge") else "error"
            else:
                expect = "ok" if label == "huge" else "error"
            if label == "huge" and (finite or f == "step_time"):
                expect = "error"  # 1e308 seconds: a unit mistake
            arr(f, b, expect, label)
    for f in INT_FIELDS:
        a = arrays[f].copy()
        i = rng.randrange(a.size)
        for label, v in (("negative", -3), ("shuffled", None), ("huge", 2 ** 62)):
            b = a.copy()
            if v is None:
                b = b[::-1].copy()
            else:
                b[i] = v
            expect = "either" if label in ("shuffled", "huge") else "error"
            arr(f, b, expect, label)
        arr(f, a.astype(float) + 0.5, label="fractions")
    # byte-level damage
    for k in range(8):
        cut = rng.randrange(0, len(raw))
        muts.append((f"truncated at {cut}", lambda p, c=cut: (p.write_bytes(raw[:c]), p)[1], "error",
                     "not an echosim records file"))
    for k in range(10):
        pos = rng.randrange(0, len(raw))

        def flip(p, pos=pos):
            b = bytearray(raw)
            b[pos] ^= 0xFF
            p.write_bytes(bytes(b))
            return p
        muts.append((f"byte {pos} flipped", flip, "either", ""))
    muts.append(("empty file", lambda p: (p.write_bytes(b""), p)[1], "error", "not an echosim records file"))
    muts.append(("junk", lambda p: (p.write_bytes(bytes(rng.randrange(256) for _ in range(999))), p)[1], "error",
                 "not an echosim records file"))
    muts.append((".npy", lambda p: (np.save(p.with_suffix(".npy"), np.arange(3)), p.with_suffix(".npy"))[1],
                 "error", ".npy|not an echosim records file"))
    muts.append(("text", lambda p: (p.write_text("time\n0.1\n"), p)[1], "error", "not an echosim records file"))
    muts.append(("directory", lambda p: (p.mkdir(), p)[1], "error", "directory"))
    muts.append(("missing file", lambda p: p, "error", "does not exist"))

    def other_zip(p):
        with zipfile.ZipFile(p, "w") as zf:
            zf.writestr("readme.txt", "hello")
        return p
    muts.append(("zip of text", other_zip, "error", "not an echosim records file|meta"))
    muts.append(("valid fixed", lambda p: (p.write_bytes(raw), p)[1], "ok", ""))
    return muts


def _records_cases(rng: random.Random, d: Path, n_api: int, n_cli: int) -> list[Case]:
    base = _base_file(d)
    raw = base.read_bytes()
    with np.load(base) as z:
        arrays = {k: z[k] for k in z.files}
    muts = _file_mutations(rng, base, raw, arrays)
    cases = []
    for i, (name, write, expect, needle) in enumerate(rng.sample(muts, min(n_api, len(muts)))):
        p = d / f"api{i}.npz"
        p = write(p)

        def load(p=p):
            from echosim.loop import load_records
            load_records(p)
        cases.append(Case("load_records", name, load, expect, needle, (str(p),)))
    for i, (name, write, expect, needle) in enumerate(rng.sample(muts, min(n_cli, len(muts)))):
        p = write(d / f"cli{i}.npz")
        argv = ["plan", "--records", str(p), "--batch-size", "4", "--steps-to-target", "4=1000",
                "--steps-to-target", "64=200", "--seeds", "1"]
        if expect == "either" and "batch_size" in needle:
            needle = "batch"
        cases.append(Case("plan --records", name, argv, expect, needle, (str(p),)))
    return cases


# ---------------------------------------------------------------- echoing's arguments and report's inputs

class _Clock:
    def __init__(self, value):
        self.value = value

    def __call__(self):
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    def __repr__(self):
        return f"clock->{self.value!r:.20}"


ECHOING_POOLS = {
    "policy": [("fast", "error"), ("", "error"), ("SYNC", "error"), (0, "error"), (-1, "error"), (2.5, "error"),
               (True, "error"), (None, "error"), ([2], "error"), ("2", "error"), (b"sync", "error"),
               (math.nan, "error"), (np.int64(0), "error"), ("greedy", "ok"), ("sync", "ok"), (3, "ok"),
               (np.int32(2), "ok"), ("auto", "ok")],
    "max_echo": [(0, "error"), (-1, "error"), (1.5, "error"), (True, "error"), ("4", "error"), (None, "error"),
                 (math.inf, "error"), (8, "ok")],
    "prefetch": [(0, "error"), (-2, "error"), (1.0, "error"), (False, "error"), ("1", "error"), (None, "error"),
                 (3, "ok")],
    "epochs": [(0, "error"), (-1, "error"), (1.5, "error"), (True, "error"), ("2", "error"), (math.inf, "error"),
               (2, "ok"), (None, "ok")],
    "batch_size": [(0, "error"), (-64, "error"), (1.5, "error"), (True, "error"), ("64", "error"),
                   (math.inf, "error"), (64, "ok"), (None, "ok")],
    "clock": [(_Clock("1.0"), "error"), (_Clock(None), "error"), (_Clock(math.nan), "error"),
              (_Clock(math.inf), "error"), (_Clock([1.0]), "error"), (_Clock(ZeroDivisionError("x")), "error"),
              (5, "error"), ("perf_counter", "error"), (_Clock(1.0), "ok")],
    "auto": [({"window": 0}, "error"), ({"alpha": 2}, "error"), ({"start": 0}, "error"), ({"bogus": 1}, "error"),
             ([], "error"), ("x", "error"), ({"window": "8"}, "error"), ({"min_effect": -1}, "error"),
             ({"window": 8}, "ok"), ({}, "ok")],
    "iterable": [(42, "error"), (None, "error"), (object(), "error"), (3.5, "error"), ([1, 2, 3], "ok"),
                 (range(4), "ok")],
}


def _echoing_case(rng: random.Random) -> Case:
    kw = {"policy": rng.choice(["greedy", "sync", 2, "auto"])}
    field = rng.choice(list(ECHOING_POOLS))
    value, expect = rng.choice(ECHOING_POOLS[field])
    iterable = [np.zeros((4, 2))] * 6
    if field == "iterable":
        iterable = value
    else:
        kw[field] = value
    if field == "auto":
        if rng.random() < 0.3:
            kw["policy"] = "greedy"  # options of auto without auto: refused
            expect = "error"
        else:
            kw["policy"] = "auto"
    if field == "epochs" and expect == "ok" and rng.random() < 0.3:
        iterable = iter([1, 2, 3])  # a one-pass iterator cannot be re-iterated
        expect = "ok" if value == 1 else "error"
        field = "epochs"
    needle = "auto|window|alpha|start|min_effect|bogus" if field == "auto" else field

    def run(iterable=iterable, kw=kw):
        from echosim.loop import echoing
        it = echoing(iterable, **kw)
        for _, b in zip(range(8), it):
            it.report(0.5)
        it.close()
    return Case("echoing", f"{field}={value!r:.30} {kw.get('policy')!r}", run, expect, needle)


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


def _report_pools():
    torch = _torch()
    loss = [("1.0", "error"), (None, "error"), (True, "error"), ([1.0], "error"), ({}, "error"), (1 + 2j, "error"),
            (np.array([1.0, 2.0]), "error"), (np.array(1 + 1j), "error"), (10 ** 400, "error"), (b"1", "error"),
            (Decimal("1.5"), "either"), (object(), "error"), (np.str_("1"), "error"), (np.bool_(True), "error"),
            (1.0, "ok"), (np.float32(2), "ok"), (np.array(1.5), "ok"), (3, "ok"), (Fraction(1, 3), "ok"),
            (math.nan, "ok"), (math.inf, "ok"), (-1e300, "ok"), (np.int64(4), "ok")]
    if torch is not None:
        loss += [(torch.tensor([1.0, 2.0]), "error"), (torch.tensor(1 + 1j), "error"), (torch.tensor(0.5), "ok"),
                 (torch.tensor(1.0, requires_grad=True) * 2, "ok"), (torch.tensor(True), "error"),
                 (torch.tensor(3), "ok"), (torch.zeros(1, 1), "error")]
    return {
        "loss": loss,
        "lagged_loss": [((1.0, 2.0, 3.0), "error"), ("x", "error"), ([1.0, 2.0], "error"), ((None, 1.0), "error"),
                        ((1.0, "2"), "error"), ((), "error"), ((1.0, 0.9), "ok"), (0.8, "ok"),
                        ("echo step", "error")],
        "probe": [("p", "error"), ([1.0], "error"), (1j, "error"), (0.3, "ok"), (np.float64(0.2), "ok")],
        "grad_sq": [((4, 1.0), "error"), ((0, 1.0, 1.0), "error"), ((8, 1.0, 1.0), "error"),
                    ((4, -1.0, 1.0), "error"), ((4, math.inf, 1.0), "error"), (("4", 1.0, 1.0), "error"),
                    ([4, 1.0, 1.0], "error"), ((4.0, 1.0, 1.0), "error"), ((4, 1.0, math.nan), "error"),
                    ((True, 1.0, 1.0), "error"), ((4, 1.0, 2.0), "ok"), ("no batch size", "error")],
        "order": [("before any step", "error"), ("twice", "error")],
    }


def _report_case(rng: random.Random, pools) -> Case:
    field = rng.choice(list(pools))
    value, expect = rng.choice(pools[field])

    def run(field=field, value=value):
        from echosim.loop import echoing
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bs = None if (field == "grad_sq" and value == "no batch size") else 8
            it = echoing(range(5), 2, batch_size=bs)
            if field == "order" and value == "before any step":
                it.report(1.0)
                return
            next(it)
            if field == "order":
                it.report(1.0)
                it.report(1.0)
            elif field == "loss":
                it.report(value)
            elif field == "lagged_loss":
                if value == "echo step":
                    it.report(1.0)
                    next(it)
                    value = 0.5
                it.report(1.0, lagged_loss=value)
            elif field == "probe":
                it.report(1.0, probe=value)
            else:
                it.report(1.0, grad_sq=(4, 1.0, 2.0) if value == "no batch size" else value)
            it.close()
    needle = {"order": "report", "loss": "loss"}.get(field, field)
    return Case("report", f"{field}={value!r:.30}", run, expect, needle)


# ---------------------------------------------------------------- pilot

class _Loader:
    def __init__(self, n=3, later=None):
        self.n, self.later, self.passes = n, later, 0

    def __iter__(self):
        self.passes += 1
        n = self.n if self.passes == 1 or self.later is None else self.later
        for i in range(n):
            yield np.full((4, 2), float(i))

    def __repr__(self):
        return f"Loader({self.n}, later={self.later})"


PILOT_POOLS = {
    "step": [(3, "error"), (None, "error"), ("step", "error"), (lambda b: 1.0, "ok"), (lambda b: None, "ok")],
    "loader": [([], "error"), (None, "error"), (42, "error"), ("iter", "error"), ("generator", "error"),
               (_Loader(0), "error"), (_Loader(3, later=0), "error"), (_Loader(2), "ok"),
               ([np.zeros((4, 2))] * 3, "ok"), ({}, "error")],
    "policies": [(None, "error"), ([], "error"), ("lazy", "error"), (0, "error"), (-1, "error"), (2.5, "error"),
                 (True, "error"), (["sync", None], "error"), ({"sync": 1}, "error"), (b"sync", "error"),
                 (("sync", "auto"), "ok"), ("greedy", "ok"), (3, "ok"), (("sync", 2), "ok")],
    "batches": [(0, "error"), (1, "error"), (-5, "error"), (1.5, "error"), (True, "error"), ("10", "error"),
                (None, "error"), (math.inf, "error"), (6, "ok"), (5, "ok")],
    "rounds": [(0, "error"), (-1, "error"), (1.5, "error"), (True, "error"), ("2", "error"), (None, "ok"),
               ("50 rounds of 10", "error"), (3, "error"), (1, "ok"), (2, "ok")],
    "max_echo": [(0, "error"), (-1, "error"), ("4", "error"), (1.5, "error"), (4, "ok")],
    "batch_size": [(0, "error"), (-64, "error"), ("64", "error"), (1.5, "error"), (True, "error"), (4, "ok")],
    "auto": [({"window": 0}, "error"), ({"alpha": -1}, "error"), ({"nope": 1}, "error"), ("x", "error"),
             ([1], "error"), ({"window": 8}, "ok")],
}


def _pilot_case(rng: random.Random) -> Case:
    field = rng.choice(list(PILOT_POOLS))
    value, expect = rng.choice(PILOT_POOLS[field])
    kw = {"policies": ("sync", 2), "batches": 4, "rounds": 2}
    step, loader = (lambda b: 1.0), _Loader(3)
    if field == "step":
        step = value
    elif field == "loader":
        loader = {"iter": iter([1, 2]), "generator": (x for x in [1, 2])}.get(value, value) \
            if isinstance(value, str) else value
    elif field == "rounds" and value == "50 rounds of 10":
        kw.update(rounds=50, batches=10)
    else:
        kw[field] = value
    needle = {"policies": "polic", "auto": "auto|window|alpha|nope", "rounds": "rounds|batches",
              "batches": "batches|rounds", "loader": "loader"}.get(field, field)

    def run(step=step, loader=loader, kw=kw):
        from echosim.loop import pilot
        recs = pilot(step, loader, **kw)
        per = {}
        for r in recs:
            per[r.policy, r.echo] = per.get((r.policy, r.echo), 0) + r.n_batches
        if any(v != kw["batches"] for v in per.values()):  # a valid call must run exactly what was asked
            raise AssertionError(f"ran {per} fresh batches, asked {kw['batches']}")
    return Case("pilot", f"{field}={value!r:.30}", run, expect, needle)


# ---------------------------------------------------------------- running a case

def _classify_api(case: Case, exc: BaseException | None) -> str:
    if exc is None:
        return "clean" if case.expect in ("ok", "either") else "silent"
    if isinstance(exc, AssertionError):
        return "broken: " + str(exc)[:80]
    if not isinstance(exc, ValueError):
        return f"raw {type(exc).__name__}"
    msg = str(exc)
    if case.expect == "ok":
        return "broken"
    if "\n" in msg:
        return "lines"
    low = msg.lower()
    if case.needle and not any(n.lower() in low for n in case.needle.split("|")):
        return "field"
    if not all(a in msg for a in case.also):
        return "field"
    return "clean"


def _child(case: Case):
    """In the forked child: an API case classified here, [verdict, message]; a command line's exit status."""
    if not callable(case.run):
        return harness.cli_status(case.run)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.run()
        verdict, msg = _classify_api(case, None), ""
    except BaseException as exc:  # noqa: BLE001 - classified
        verdict, msg = _classify_api(case, exc), f"{type(exc).__name__}: {exc}"
    return [verdict, msg[:300]]


def _run(case: Case, tmp: Path) -> tuple[str, str, float]:
    """One case in a forked child (`harness.fork_call`, killed at TIMEOUT): (verdict, message, seconds)."""
    o = harness.fork_call(lambda: _child(case), tmp, TIMEOUT)
    if callable(case.run):
        if o.status is None:
            return "hang", "", o.seconds
        if o.result is None:
            return f"crash (exit {o.status})", o.err[-200:], o.seconds
        verdict, msg = o.result
        return verdict, msg, o.seconds
    verdict = harness.classify_cli(o, case.expect, (case.needle, *case.also), ignore_case=True)
    return verdict, (o.err.strip().splitlines() or [""])[-1][:300], o.seconds


def build(seed: int, d: Path, sizes: dict) -> list[Case]:
    rng = random.Random(seed)
    cases = _records_cases(rng, d, sizes["load_records"], sizes["plan --records"])
    cases += [_echoing_case(rng) for _ in range(sizes["echoing"])]
    pools = _report_pools()
    cases += [_report_case(rng, pools) for _ in range(sizes["report"])]
    cases += [_pilot_case(rng) for _ in range(sizes["pilot"])]
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="draws the hostile set (default 0)")
    ap.add_argument("--show", action="store_true", help="list every unclean case with its message")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the number of cases per surface")
    harness.add_options(ap, smoke="one or two cases per surface (--scale 0.01): checks the script runs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.scale = 0.01
    sizes = {k: max(1, round(v * args.scale)) for k, v in
             {"load_records": 100, "plan --records": 60, "echoing": 100, "report": 100, "pilot": 80}.items()}
    with harness.Session("fuzz_loop", args, argv) as session:
        with tempfile.TemporaryDirectory(prefix="echosim-fuzz-") as tmp:
            d = Path(tmp)
            (d / "files").mkdir()
            cases = build(args.seed, d / "files", sizes)
            results = [(c, *_run(c, d)) for c in cases]
        print(f"seed {args.seed}; {len(cases)} cases; time limit {TIMEOUT:.0f} s per case\n")
        print("| surface | cases | clean | rate | unclean by class |\n|---|---:|---:|---:|---|")
        counts = {}
        surfaces = list(dict.fromkeys(c.surface for c in cases))
        for s in surfaces + ["all"]:
            rows = [x for x in results if s == "all" or x[0].surface == s]
            clean = sum(1 for x in rows if x[1] == "clean")
            classes: dict = {}
            for x in rows:
                if x[1] != "clean":
                    k = x[1].split(":")[0]
                    classes[k] = classes.get(k, 0) + 1
            counts[s] = {"cases": len(rows), "clean": clean, "rate": clean / len(rows), "unclean": classes}
            text = ", ".join(f"{k} {v}" for k, v in sorted(classes.items(), key=lambda kv: -kv[1]))
            print(f"| {s} | {len(rows)} | {clean} | {clean / len(rows):.1%} | {text} |")
        if args.show:
            print("\n| surface | case | expected | verdict | message |\n|---|---|---|---|---|")
            for c, v, msg, _ in results:
                if v != "clean":
                    m = msg.replace("|", "/").replace("\n", " ")[:160]
                    print(f"| {c.surface} | {c.name} | {c.expect} | {v} | {m} |")
        slow = [(c, el) for c, v, _, el in results if el > TIMEOUT]
        if slow:
            print(f"\n{len(slow)} cases reached the {TIMEOUT:.0f} s limit")
        session.results = {"seed": args.seed, "sizes": sizes, "timeout": TIMEOUT, "counts": counts,
                           "unclean": [{"surface": c.surface, "case": c.name, "expect": c.expect, "verdict": v,
                                        "message": msg} for c, v, msg, _ in results if v != "clean"]}


if __name__ == "__main__":
    main()
