"""The layer order of DESIGN.md, read from the source: no upward import, no cycle, and
pure layers (theory, control, pipeline, training) import only NumPy, Numba, SciPy and the stdlib."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("theory", "echosim._files", "echosim._validate", "echosim.control", "echosim.pipeline", "echosim.training", "echosim.data",
          "echosim.experiments", "echosim.loop", "echosim.planner", "echosim.plots", "echosim.cli")
"""Bottom up: a module may import its own layer and the layers below it."""
PURE = ("theory", "echosim._files", "echosim._validate", "echosim.control", "echosim.pipeline", "echosim.training")
PURE_THIRD_PARTY = {"numpy", "numba", "scipy"}
FACADES = {"echosim", "echosim._moved", "echosim.__main__", "echosim._version", "echosim.datasets"}
LAZY_OPTIONAL = {"echosim.training.trajectory": {"pandas"}}
"""Optional libraries a pure module may import inside a function: `Trajectory.to_frame`
returns a pandas DataFrame where pandas is installed (the `sweep` extra), for notebooks."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for pkg in ("echosim", "theory") for p in (ROOT / pkg).rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """Every module `name` imports, at the top or inside a function (resolved to our modules where ours)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
    return out


def layer(name: str) -> int | None:
    for i, prefix in enumerate(LAYERS):
        if name == prefix or name.startswith(prefix + "."):
            return i
    return None


GRAPH = {name: {m for m in imports_of(name) if m in MODULES} for name in MODULES}


@pytest.mark.parametrize("name", sorted(set(MODULES) - FACADES))
def test_every_module_belongs_to_a_layer_and_imports_nothing_above_it(name):
    assert layer(name) is not None, f"{name} belongs to no layer of {LAYERS}"
    upward = sorted(m for m in GRAPH[name] if m not in FACADES and layer(m) > layer(name))
    assert not upward, f"{name} (layer {LAYERS[layer(name)]}) imports from above: {upward}"
    assert not (GRAPH[name] & (FACADES - {"echosim._version"})), f"{name} imports the echosim facade"


@pytest.mark.parametrize("name", sorted(m for m in MODULES if layer(m) is not None and LAYERS[layer(m)] in PURE))
def test_pure_layers_import_only_numpy_numba_scipy_and_the_stdlib(name):
    third = {m.split(".")[0] for m in imports_of(name)} - {"echosim", "theory", "__future__"}
    foreign = {t for t in third if t not in PURE_THIRD_PARTY and t not in sys.stdlib_module_names}
    assert not foreign - LAZY_OPTIONAL.get(name, set()), f"{name} imports {sorted(foreign)}"
    top = ast.parse(MODULES[name].read_text(encoding="utf-8")).body
    at_import = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    at_import |= {(n.module or "").split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
    assert not at_import & LAZY_OPTIONAL.get(name, set()), f"{name} imports an optional library at import time"


def test_no_import_cycles():
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(GRAPH[n]):
            if state.get(m) == "open":
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = "done"

    for n in sorted(set(GRAPH) - FACADES):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_layer_order_is_enforced_not_vacuous():
    """The checks above see real edges: experiments uses training, training uses no experiments."""
    assert any(layer(m) == LAYERS.index("echosim.training") for m in GRAPH["echosim.experiments.assemble"])
    assert "echosim.experiments.tables" in GRAPH["echosim.plots.views"]
