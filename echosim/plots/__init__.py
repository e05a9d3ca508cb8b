"""Plots: plot data first (dicts of arrays, views over result tables), drawing second;
the docs figures (`figures`: the registry and `make_figures`; each figure's view, drawing
and caption in `figure_views`, `figure_drawing` and `figure_captions`)."""

from echosim.plots.views import (  # noqa: F401 - the public plotting API (0.1's names included)
    X_AXES,
    X_LABELS,
    Y_COLUMNS,
    bound_curve,
    convergence_vs_echo_data,
    draw_convergence_vs_echo,
    draw_echo_panel,
    draw_overlay,
    draw_risk_vs_time,
    median_band,
    overlay,
    plot_results,
    risk_vs_time_data,
)
