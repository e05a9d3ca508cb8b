"""Every docs figure is a sweep plus a view (``python -m echosim figures``): the registry
of figures, their configs, and `make_figures`, which runs, draws and captions them.

A figure is a config in the sweep's own schema (``figure_configs/<name>.toml``, each
with a ``[quick]`` variant, `figure_config`), run by `echosim.experiments.sweep.run_sweep`
into the shared run store, so figures resume and reuse finished runs. Then three steps,
each in its own module:

- its view (`echosim.plots.figure_views`) turns the sweep's tables (one row per run, one
  row per logged point, the tuned table) into plot data;
- its drawing function (`echosim.plots.figure_drawing`) turns that into a matplotlib
  ``Figure`` (matplotlib is imported only there; no backend is set or switched);
- its caption (`echosim.plots.figure_captions`) is rendered from numbers taken from the
  same plot data, and with ``docs=True`` written into ``docs/figures.md`` next to them.

====================  ====================================================================
figure                what it shows
====================  ====================================================================
convergence_vs_echo   the protocol of the paper's Figure 2 on another data set: convergence
                      time vs K per B, in steps KT and samples BT, lr tuned per (B, K)
bounds_vs_simulation  simulated excess risk (mean, band) against the theory bounds
speedup_vs_R          wall-clock speedup of echoing vs R = t_up/t_down, four loaders with
                      the same mean, next to Choi et al.'s max(t_up, e·t_down) model
greedy_vs_fixed       greedy vs fixed echoing under stochastic arrivals; K_t histogram
predicted_vs_simulated  theory-predicted vs simulated speedup over a (B, K) grid
====================  ====================================================================

A run that diverges or never reaches the target is a result (time +inf), drawn as
"never", never a NaN.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from echosim.plots.figure_captions import (
    CAPTIONS,
    DOCS_DIR,
    as_saved,
    caption,
    write_caption,
)
from echosim.plots.figure_drawing import (
    draw_bounds_vs_simulation,
    draw_convergence_vs_echo,
    draw_greedy_vs_fixed,
    draw_predicted_vs_simulated,
    draw_speedup_vs_R,
)
from echosim.plots.figure_views import (
    bounds_vs_simulation_view,
    convergence_vs_echo_view,
    greedy_vs_fixed_view,
    predicted_vs_simulated_view,
    speedup_vs_R_view,
)

__all__ = ["DEFAULT_OUT", "DOCS_DIR", "FIGURES", "figure_config", "make_figures"]

CONFIG_DIR = Path(__file__).with_name("figure_configs")
DEFAULT_OUT = Path("echosim-results") / "figures"
DPI = 100

FIGURES = {
    "convergence_vs_echo": (convergence_vs_echo_view, draw_convergence_vs_echo),
    "bounds_vs_simulation": (bounds_vs_simulation_view, draw_bounds_vs_simulation),
    "speedup_vs_R": (speedup_vs_R_view, draw_speedup_vs_R),
    "greedy_vs_fixed": (greedy_vs_fixed_view, draw_greedy_vs_fixed),
    "predicted_vs_simulated": (predicted_vs_simulated_view, draw_predicted_vs_simulated),
}
"""The registry of docs figures: name → (view over the sweep's tables, drawing); each
one's caption is `CAPTIONS[name]`."""
assert set(CAPTIONS) == set(FIGURES)


def _log(msg: str) -> None:
    print(f"[figures] {msg}", file=sys.stderr, flush=True)


def figure_config(name: str, quick: bool = False):
    """The sweep config of figure `name` (its ``[quick]`` variant with `quick`)."""
    from echosim.experiments.config import load_config

    if name not in FIGURES:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}, got {name!r}")
    return load_config(CONFIG_DIR / f"{name}.toml", quick=quick)


def make_figures(out_dir=None, quick: bool = False, only=None, workers: int | None = None, store_dir=None,
                 docs: bool = False, progress: bool = True) -> tuple[dict, dict]:
    """Run each figure's sweep (reusing every finished run in the store), view and draw it.

    Parameters
    ----------
    out_dir : where each figure's tables (``<out>/<name>/``) and PNG (``<out>/<name>.png``)
        go; default ``echosim-results/figures``.
    quick : each config's ``[quick]`` variant (small, for CI and previews).
    only : a figure name or a list of them (default: all of `FIGURES`).
    workers : local worker processes for the sweeps (default: all cores).
    store_dir : the run store (default ``$ECHOSIM_STORE`` or ``echosim-results/store``).
    docs : also write the PNGs into ``docs/figures``, each figure's facts into
        ``docs/figures/<name>.json`` and its caption, rendered from those facts, into
        ``docs/figures.md`` (maintainers regenerating the docs).

    Returns
    -------
    (written, failed): figure name → PNG path, and figure name → a one-line reason for
    each figure that could not be made (e.g. a missing optional dependency); the others
    are made regardless.
    """
    from echosim.experiments.sweep import run_sweep

    names = list(FIGURES) if only is None else ([only] if isinstance(only, str) else list(only))
    for n in names:
        if n not in FIGURES:
            raise ValueError(f"only: unknown figure {n!r}; allowed: {', '.join(FIGURES)}")
    out = Path(DEFAULT_OUT if out_dir is None else out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a directory")
    written, failed = {}, {}
    t_all = time.perf_counter()
    for i, n in enumerate(names, 1):
        t0 = time.perf_counter()
        try:
            conf = figure_config(n, quick=quick)
        except ValueError as exc:  # e.g. a data set whose optional dependency is missing
            failed[n] = " ".join(str(exc).split())
            _log(f"{n}: skipped: {failed[n]}")
            continue
        report = run_sweep(conf, out=out / n, workers=workers, store_dir=store_dir, progress=progress,
                           desc=f"figure {i}/{len(names)} {n}")
        view, draw = FIGURES[n]
        data = view(report.summary, report.curves, report.tuned)
        fig = draw(data)
        facts = CAPTIONS[n][0](data)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{n}.md").write_text(caption(n, as_saved(facts)) + "\n", encoding="utf-8")
        if docs:
            write_caption(n, facts)
        paths = [out / f"{n}.png"] + ([DOCS_DIR / f"{n}.png"] if docs else [])
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=DPI)
        written[n] = paths[0]
        _log(f"{n}: {report.n_new} runs computed, {report.n_resumed} reused; wrote {paths[0]} "
             f"in {time.perf_counter() - t0:.1f} s")
    _log(f"all done in {time.perf_counter() - t_all:.1f} s")
    return written, failed
