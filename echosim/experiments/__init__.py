"""The experiment machinery: config schema and grids, run specs and seeds, the run
assembler, executors with progress, the content-addressed store, analysis of
convergence and tuning, and text reports."""
