"""The bounds and info subcommands."""

from __future__ import annotations

from echosim.cli.args import _print_json


# --------------------------------------------------------------------------- bounds


def _theory_functions() -> dict:
    import theory

    return {name: getattr(theory, name) for name in theory.__all__}


def _bound_value(text: str, name: str):
    import numpy as np

    if text.lower() == "none":
        return None
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ValueError(f"--{name}: expected a number or comma-separated numbers, got {text!r}") from None
    return values[0] if len(values) == 1 else np.array(values)


def _cmd_bounds(args) -> int:
    import inspect

    import numpy as np

    funcs = _theory_functions()
    rest = list(args.params)
    as_json = bool(getattr(args, "json", False)) or "--json" in rest
    rest = [r for r in rest if r != "--json"]
    if args.function in (None, "list"):
        if rest:
            raise ValueError(f"bounds list takes no arguments, got {' '.join(rest)!r}")
        if as_json:
            _print_json([{"name": name, "signature": str(inspect.signature(f)),
                          "summary": _plain((inspect.getdoc(f) or name).splitlines()[0])}
                         for name, f in funcs.items()])
            return 0
        for name, f in funcs.items():
            print(f"{name}{inspect.signature(f)}")
        return 0
    if args.function not in funcs:
        raise ValueError(f"unknown theory function {args.function!r}; allowed: {', '.join(funcs)}")
    f = funcs[args.function]
    sig = inspect.signature(f)
    if any(r in ("-h", "--help") for r in rest):
        doc = inspect.getdoc(f) or ""
        print(f"python -m echosim bounds {args.function} " +
              " ".join(f"--{p} X" if p.default is inspect.Parameter.empty else f"[--{p} X]"
                       for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD))
        print()
        print(doc)
        return 0
    kwargs = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if not tok.startswith("--") or tok == "--":
            raise ValueError(f"bounds {args.function}: expected --NAME VALUE, got {tok!r}")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            if i + 1 >= len(rest):
                raise ValueError(f"--{name}: missing a value")
            value = rest[i + 1]
            i += 1
        i += 1
        if name not in sig.parameters:
            raise ValueError(f"{args.function} has no argument --{name}; allowed: "
                             + ", ".join(f"--{p}" for p in sig.parameters))
        if name in kwargs:
            raise ValueError(f"--{name} given twice")
        kwargs[name] = _bound_value(value, name)
    missing = [p for p, v in sig.parameters.items() if v.default is inspect.Parameter.empty
               and v.kind is v.POSITIONAL_OR_KEYWORD and p not in kwargs]
    if missing:
        raise ValueError(f"{args.function}: missing " + ", ".join(f"--{m}" for m in missing))
    value = f(**kwargs)
    what = _plain((inspect.getdoc(f) or args.function).splitlines()[0]).rstrip(".")
    if args.function.endswith("_bound"):
        what += " (it bounds the expected excess risk E[F(w)] − F* of the method's output)"
    shown = ", ".join(f"{k}={_show_arg(v)}" for k, v in kwargs.items())
    values = value if isinstance(value, tuple) else (value,)
    arrays = [np.asarray(v, dtype=float) for v in values]
    if as_json:
        out = [a.item() if a.ndim == 0 else a for a in arrays]
        _print_json({"function": args.function, "description": what, "arguments": kwargs,
                     "value": out[0] if len(out) == 1 else out})
        return 0
    print(f"{args.function}({shown}): {what}")
    if all(a.ndim == 0 for a in arrays):
        print("  = " + ", ".join(f"{float(a):.10g}" for a in arrays))
        return 0
    varying = [k for k, v in kwargs.items() if np.ndim(v) > 0]
    grid = np.broadcast_arrays(*[np.asarray(kwargs[k]) for k in varying]) if varying else []
    for i in range(arrays[0].size):
        where = ", ".join(f"{k}={float(g.reshape(-1)[i]):g}" for k, g in zip(varying, grid)) if grid and \
            grid[0].size == arrays[0].size else f"[{i}]"
        print(f"  {where}: " + ", ".join(f"{float(a.reshape(-1)[i]):.10g}" for a in arrays))
    return 0


def _plain(text: str) -> str:
    """A docstring's first line without LaTeX/RST markup, for a terminal."""
    import re

    text = text.replace("``", "")
    text = re.sub(r"\\mathrm\{(\w+)\}", r"\1", text)
    for a, b in ((r"\varepsilon", "ε"), (r"\beta", "β"), (r"\lambda", "λ"), (r"\gamma", "γ"),
                 (r"\rho", "ρ"), (r"\eta", "η")):
        text = text.replace(a, b)
    return text.replace("$", "").replace("{", "").replace("}", "")


def _show_arg(v) -> str:
    import numpy as np

    if v is None:
        return "None"
    if np.ndim(v) == 0:
        return f"{float(v):g}"
    return "[" + ",".join(f"{float(x):g}" for x in np.asarray(v).reshape(-1)) + "]"


# --------------------------------------------------------------------------- info


def _kernel_caches() -> list[dict]:
    """Per kernel module: where Numba keeps its cache and how many files it holds."""
    from pathlib import Path

    from echosim.pipeline.kernel import run_des
    from echosim.training.kernel import kernel_for

    echo_chunk = kernel_for(0, 0, False)  # any of the optimizer kernels: they share the module's cache

    out = []
    # the training kernel's files and those of the gradients it calls (same directory)
    for layer, kernel, stems in (("training", echo_chunk, ("kernel", "gradients")), ("pipeline", run_des, ("kernel",))):
        try:
            cache = Path(kernel._cache._cache_path)  # where Numba reads and writes this module's cache
        except AttributeError:  # pragma: no cover - another Numba version
            cache = Path(__file__).resolve().parent.parent / layer / "__pycache__"
        nbi = sorted(p for s in stems for p in cache.glob(f"{s}.*.nbi")) if cache.is_dir() else []
        nbc = sorted(p for s in stems for p in cache.glob(f"{s}.*.nbc")) if cache.is_dir() else []
        out.append({"module": f"echosim.{layer}.kernel", "path": str(cache), "cached": bool(nbc),
                    "index_files": len(nbi), "compiled_objects": len(nbc)})
    return out


def _kernel_cache_status() -> list[str]:
    lines = []
    for c in _kernel_caches():
        state = f"cached ({c['index_files']} index files, {c['compiled_objects']} compiled objects)" if c["cached"] \
            else "not cached yet (compiled on first use, ~seconds)"
        lines.append(f"  {c['module']}: {state} in {c['path']}")
    return lines


_OPTIONAL = {"dask": "dask", "distributed": "dask", "pyarrow": "sweep", "pandas": "sweep"}


def _info_facts() -> dict:
    import os
    import platform
    from importlib import metadata

    import numba

    packages = {}
    for name in ("echosim", "numpy", "numba", "scipy", "matplotlib", "pyarrow", "pandas", "dask", "distributed"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        usable = os.cpu_count()
    try:
        layer = numba.threading_layer()
    except ValueError:
        layer = None
    available = []
    for name, mod in (("tbb", "numba.np.ufunc.tbbpool"), ("omp", "numba.np.ufunc.omppool"),
                      ("workqueue", "numba.np.ufunc.workqueue")):
        try:
            __import__(mod)
            available.append(name)
        except Exception:  # noqa: BLE001 - any import failure means unavailable
            pass
    return {"python": platform.python_version(), "platform": platform.platform(), "packages": packages,
            "cores": os.cpu_count(), "usable_cores": usable, "sweep_workers_default": usable,
            "numba": {"threading_layer": layer, "configured": numba.config.THREADING_LAYER,
                      "available": available, "num_threads": numba.config.NUMBA_NUM_THREADS,
                      "cache_dir": numba.config.CACHE_DIR or None},
            "kernel_caches": _kernel_caches()}


def _cmd_info(args) -> int:
    facts = _info_facts()
    if getattr(args, "json", False):
        _print_json(facts)
        return 0
    print(f"python {facts['python']} on {facts['platform']}")
    for name, v in facts["packages"].items():
        if v is None:
            v = "not installed" + (f" (optional: pip install 'echosim[{_OPTIONAL[name]}]')" if name in _OPTIONAL
                                   else "")
        print(f"  {name}: {v}")
    cores = facts["usable_cores"]
    print(f"cores: {facts['cores']} (usable by this process: {cores}; sweep --workers defaults to {cores})")
    nb = facts["numba"]
    layer = nb["threading_layer"] or "not initialised (no parallel Numba code has run in this process)"
    print(f"numba threading layer: {layer}; configured: {nb['configured']}; "
          f"available: {', '.join(nb['available']) or 'none'}; NUMBA_NUM_THREADS={nb['num_threads']}")
    print("  (echosim's kernels are serial; sweeps run in parallel across processes)")
    if nb["cache_dir"]:
        print(f"numba kernel cache: {nb['cache_dir']} (NUMBA_CACHE_DIR)")
    else:
        print("numba kernel cache: next to the sources (__pycache__), or ~/.cache/numba where they are not "
              "writable; an install shared between users should set NUMBA_CACHE_DIR to a directory of each "
              "user's own (the cache holds pickles)")
    for line in _kernel_cache_status():
        print(line)
    return 0
