"""The cases and the loop of benchmarks/bench_auto_suite.py (issue 26's validation suite of
``echoing(policy="auto")``): `loop` (the timed loop, the loader's frozen clock, the signals),
`numpy_cases` (bench_auto.py's problems, the MLP on the digits table), `torch_cases` (two
PyTorch jobs; needs torch and Pillow), `scripted` (the scripted streams), `report` (the
target rule, the checks, the tables)."""
