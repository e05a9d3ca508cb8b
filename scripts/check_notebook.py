"""Run echosim's notebook views in a real Jupyter kernel and check what a reader sees.

Run from the repository root (needs ``pip install nbclient nbformat ipykernel``):

    python scripts/check_notebook.py                  # build, execute, check
    python scripts/check_notebook.py --save nb.ipynb  # also keep the executed notebook

The notebook shows, one per cell, each object a user displays: a `Trajectory`, a
`Schedule`, a `Trace`, the `echoing` iterator, its `Records` and verdict, a `Plan`, a
tiny `SweepReport`, and the ``to_frame()`` tables. Each displayed object must have a
text and an HTML view, short (a repr is a summary, not a data dump), with units and
without the store's internal column names; library calls print nothing unless asked
(the once-per-machine compile notice aside); and the kernel's global state
(matplotlib's backend and rcParams, NumPy's global random state and print options,
warning filters, logging handlers) is what it was before echosim ran.
A sweep's progress must show, named: tqdm's widget where tqdm and ipywidgets are
importable (``pip install 'echosim[notebook]'``; to try it without touching an
environment, ``pip install --no-deps --target DIR tqdm ipywidgets widgetsnbextension
jupyterlab_widgets`` and run with ``PYTHONPATH=DIR``), else lines on stderr.
Exits 0 when every check holds, 1 otherwise, 2 when the Jupyter packages are missing.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MAX_TEXT = 2000  # characters of a text/plain repr
MAX_HTML = 8000  # characters of a text/html view
INTERNAL = ("conv_batches", "conv_time", "conv_steps", "conv_samples", "conv_index")
NOTICE = re.compile(
    r"^echosim: compiling .*$", re.MULTILINE
)  # the documented compile notice

# (name, source, the words its "text" and "HTML" views must say: units and plain names).
# The last expression of a cell is what Jupyter displays; a cell named "state*" prints
# JSON that the checks compare.
STATE = """\
import json, logging, sys, warnings
import matplotlib, numpy as np
import numba, pandas, scipy.optimize, scipy.stats  # their own import-time filters first
def _state():
    return {
        "backend": matplotlib.get_backend(),
        "rcParams": {k: str(v) for k, v in sorted(matplotlib.rcParams.items())},
        "np_random": str(np.random.get_state()[1][:4].tolist()),
        "np_print": str(sorted(np.get_printoptions().items())),
        "warnings": len(warnings.filters),
        "log_handlers": len(logging.getLogger().handlers),
        "stdout": type(sys.stdout).__name__,
    }
print(json.dumps(_state()))
"""


def _src(text: str) -> str:
    return textwrap.dedent(text).strip()


CELLS = [
    ("state_before", STATE, {}),
    ("imports", "import numpy as np\nimport echosim\nprint(echosim.__file__)", {}),
    (
        "trajectory",
        _src("""
        traj = echosim.run(echosim.LeastSquares(dim=5), echosim.EchoedGD(lr=0.1),
                           batch_size=8, echo=2, n_batches=50, seed=0)
        traj"""),
        {"html": ("fresh batches", "optimizer steps"), "text": ("batches", "steps")},
    ),
    (
        "trajectory_frame",
        _src("""
        tf = traj.to_frame()
        list(tf.columns), tf.attrs.get('units')"""),
        {},
    ),
    (
        "schedule",
        _src("""
        pipe = echosim.Pipeline(arrival=echosim.Exponential(4.0), policy='greedy', max_echo=8)
        sched = echosim.simulate(pipe, 40, seed=0)
        sched"""),
        {"html": ("fresh batches", "time units"), "text": ("time units",)},
    ),
    (
        "trace",
        _src("""
        trace = echosim.Trace(np.random.default_rng(0).gamma(4.0, 0.001, size=30))
        trace"""),
        {"html": ("time unit",)},
    ),
    (
        "echoing_running",
        _src("""
        import time
        def batches():
            for i in range(12):
                time.sleep(0.002)
                yield np.full(4, float(i))
        running = echosim.echoing(batches(), 'greedy', max_echo=4)
        next(running)
        running"""),
        {"html": ("fresh batches",)},
    ),
    (
        "echoing",
        _src("""
        running.close()
        it = echosim.echoing(batches(), 'greedy', max_echo=4)
        for batch in it:
            time.sleep(0.0005)
            it.report(float(batch.mean()) + 1.0)
        it"""),
        {"html": ("fresh batches", "ms"), "text": ("ms",)},
    ),
    (
        "records",
        "records = it.records()\nrecords",
        {"html": ("fresh batches", "ms"), "text": ("ms",)},
    ),
    ("verdict", "it.verdict()", {"html": ("steps", "µs"), "text": ("steps", "µs")}),
    (
        "records_frame",
        _src("""
        frame = records.to_frame()
        list(frame.columns), frame.attrs.get('units')"""),
        {},
    ),
    (
        "records_step_frame",
        _src("""
        steps = records.to_frame(per='step')
        list(steps.columns), steps.attrs.get('units')"""),
        {},
    ),
    (
        "plan",
        _src("""
        p = echosim.plan(trace, 0.0005, batch_size=256,
                         steps_to_target={64: 5200, 1024: 900}, seeds=3)
        p"""),
        {"html": ("s", "steps"), "text": ("s",)},
    ),
    (
        "plan_frame",
        _src("""
        pf = p.to_frame()
        list(pf.columns), pf.attrs.get('units')"""),
        {},
    ),
    (
        "plan_progress",
        _src("""
        echosim.plan(trace, 0.0005, batch_size=256, steps_to_target={64: 5200, 1024: 900},
                     seeds=3, progress=True);"""),
        {},
    ),
    (
        "sweep",
        _src("""
        import tempfile
        from echosim.experiments.config import parse_config
        from echosim.experiments.sweep import run_sweep
        conf = parse_config({
            'problem': {'kind': 'logistic', 'dim': 3},
            'pipeline': {'arrival': 4.0, 'policy': 'fixed'},
            'optimizer': {'lr': [0.1, 0.3, 1.0, 3.0], 'batch_size': 8, 'echo': [1, 2]},
            'sweep': {'n_batches': 100, 'repetitions': 2, 'rtol': 0.05, 'name': 'nb'},
        })
        store = tempfile.mkdtemp()  # not the machine's run store
        report = run_sweep(conf, out=tempfile.mkdtemp(), workers=1, progress=False,
                           store_dir=store)
        report"""),
        {"html": ("fresh batches", "optimizer steps"), "text": ("s",)},
    ),
    (
        "sweep_progress",
        _src("""
        run_sweep(conf, out=tempfile.mkdtemp(), workers=1, progress=True,
                  store_dir=tempfile.mkdtemp());"""),
        {},
    ),
    ("state_after", STATE.replace("import json", "import json  # after"), {}),
]
CELLS_THAT_MAY_PRINT = {
    "imports",
    "state_before",
    "state_after",
    "sweep_progress",
    "plan_progress",
}
PROGRESS_CELLS = {"sweep_progress": "nb"}  # cell -> the name its progress must show
WIDGET = "application/vnd.jupyter.widget-view+json"
FRAME_CELLS = {"trajectory_frame", "records_frame", "records_step_frame", "plan_frame"}
# A column of a to_frame() table carries its unit in its name (a suffix, or a count named
# by what it counts) or in the frame's attrs["units"]; indices, labels and flags need none.
UNITLESS = {
    "batch", "epoch", "step", "step_batch", "candidate", "policy", "recommended",
    "best_at_batch_size", "load_censored", "batches", "steps",
}  # fmt: skip
UNIT_SUFFIX = re.compile(
    r"(_s|_ms|_x|_per_s|_fraction|_frac|_steps|_batches|_examples|_count|_K|_B|_n)$"
)


def build_notebook():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(src, metadata={"name": name})
        for name, src, _ in CELLS
    ]
    return nb


def execute(nb, timeout=900):
    from nbclient import NotebookClient

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(ROOT)}},
    )
    client.execute()
    return nb


def _texts(cell, kind):
    out = []
    for o in cell.get("outputs", []):
        if kind == "stream" and o.get("output_type") == "stream":
            out.append((o.get("name"), o.get("text", "")))
        elif kind == "display" and o.get("output_type") in (
            "execute_result",
            "display_data",
        ):
            out.append(o.get("data", {}))
        elif kind == "error" and o.get("output_type") == "error":
            out.append(f"{o.get('ename')}: {o.get('evalue')}")
    return out


def check_display(name, data, mentions):
    """Problems of one displayed object's views (text/plain and text/html)."""
    problems = []
    text, html = data.get("text/plain", ""), data.get("text/html")
    if html is None:
        problems.append(f"{name}: no text/html view")
        html = ""
    if len(text) > MAX_TEXT:
        problems.append(f"{name}: text repr is {len(text)} characters (> {MAX_TEXT})")
    if len(html) > MAX_HTML:
        problems.append(f"{name}: HTML view is {len(html)} characters (> {MAX_HTML})")
    for label, view in (("text", text), ("HTML", html)):
        for internal in INTERNAL:
            if internal in view:
                problems.append(
                    f"{name}: {label} view shows the internal name {internal!r}"
                )
        for word in mentions.get(label.lower(), ()):
            if not re.search(rf"(?<![A-Za-z]){re.escape(word)}(?![A-Za-z])", view):
                problems.append(f"{name}: {label} view never says {word!r}")
    return problems


def check_progress(name, streams, displays, desc):
    """A long wait shows its progress, named: tqdm's widget where tqdm and ipywidgets are
    installed, else a line on stderr with the name, the count and the rate."""
    if any(WIDGET in d for d in displays):
        return []
    lines = "".join(text for stream, text in streams if stream == "stderr")
    if re.search(rf"^{re.escape(desc)} .*\d+/\d+ \[", lines, re.MULTILINE):
        return []
    return [
        f"{name}: no progress named {desc!r} (neither a widget nor a line on stderr)"
    ]


def check_frame(name, text):
    """Problems of a ``(columns, units)`` pair printed by a to_frame() cell."""
    import ast

    try:
        columns, units = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return [f"{name}: could not read the columns from {text[:200]!r}"]
    units = units or {}
    bare = [
        c
        for c in columns
        if c not in units and c not in UNITLESS and not UNIT_SUFFIX.search(str(c))
    ]
    return (
        [f"{name}: columns without a unit (in the name or attrs['units']): {bare}"]
        if bare
        else []
    )


def check_notebook(nb):
    """All problems of an executed notebook, as messages."""
    problems, states = [], {}
    by_name = {c.metadata.get("name"): c for c in nb.cells}
    for name, _src, mentions in CELLS:
        cell = by_name[name]
        problems += [f"{name}: raised {e}" for e in _texts(cell, "error")]
        streams = _texts(cell, "stream")
        if name.startswith("state"):
            out = "".join(t for s, t in streams if s == "stdout").strip().splitlines()
            states[name] = json.loads(out[-1]) if out else {}
            continue
        if name not in CELLS_THAT_MAY_PRINT:
            for stream, text in streams:
                text = NOTICE.sub("", text).strip()
                if text:
                    problems.append(f"{name}: printed to {stream}: {text[:300]!r}")
        else:
            for stream, text in streams:
                if "\r" in text:
                    problems.append(f"{name}: carriage returns in the cell's {stream}")
        displays = _texts(cell, "display")
        if name in PROGRESS_CELLS:
            problems += check_progress(name, streams, displays, PROGRESS_CELLS[name])
        if name in FRAME_CELLS:
            texts = [d.get("text/plain", "") for d in displays]
            problems += (
                check_frame(name, texts[0]) if texts else [f"{name}: displayed nothing"]
            )
        elif mentions:
            if not displays:
                problems.append(f"{name}: displayed nothing")
            for data in displays:
                problems += check_display(name, data, mentions)
    before, after = states.get("state_before", {}), states.get("state_after", {})
    if not before or not after:
        problems.append("the kernel's global state was not recorded")
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            if key == "rcParams":
                changed = [
                    k for k in before[key] if before[key].get(k) != after[key].get(k)
                ]
                problems.append(
                    f"global state changed: matplotlib rcParams {changed[:10]}"
                )
            else:
                problems.append(
                    f"global state changed: {key} {before.get(key)!r} -> {after.get(key)!r}"
                )
    return problems


def summary(nb):
    """What each cell showed, short: for a reader of the log."""
    lines = []
    for cell in nb.cells:
        name = cell.metadata.get("name")
        for data in _texts(cell, "display"):
            text = data.get("text/plain", "")
            lines.append(
                f"[{name}] text {len(text)} chars, html {len(data.get('text/html', ''))} chars"
            )
            lines.append("    " + text[:400].replace("\n", "\n    "))
        for stream, text in _texts(cell, "stream"):
            lines.append(f"[{name}] {stream}: {text[:300]!r}")
    return "\n".join(lines)


def views_page(nb) -> str:
    """Every displayed HTML view on one page, under its cell's name (to look at)."""
    import html

    parts = []
    for cell in nb.cells:
        for data in _texts(cell, "display"):
            name = html.escape(cell.metadata.get("name", ""))
            body = (
                data.get("text/html")
                or f"<pre>{html.escape(data.get('text/plain', ''))}</pre>"
            )
            parts.append(f"<h3 style='color:#888'>[{name}]</h3>\n{body}")
    style = "body{font-family:sans-serif;max-width:1100px;margin:1em}table{border-collapse:collapse}"
    style += "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}"
    return f"<!doctype html><meta charset=utf-8><style>{style}</style>" + "\n".join(
        parts
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--save", type=Path, help="write the executed notebook here")
    ap.add_argument("--html", type=Path, help="write every HTML view on one page here")
    ap.add_argument("--quiet", action="store_true", help="problems only")
    args = ap.parse_args(argv)
    try:
        import nbclient  # noqa: F401
        import nbformat
    except ImportError as e:
        print(f"skipped: {e.name} is missing (pip install nbclient nbformat ipykernel)")
        return 2
    nb = execute(build_notebook())
    if args.save:
        nbformat.write(nb, str(args.save))
    if args.html:
        args.html.write_text(views_page(nb), encoding="utf-8")
    if not args.quiet:
        print(summary(nb))
    problems = check_notebook(nb)
    for p in problems:
        print("FAIL", p)
    print(f"{len(problems)} problem(s) in {len(CELLS)} cells")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
