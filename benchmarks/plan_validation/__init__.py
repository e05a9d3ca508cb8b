"""Independent ground truths for the planner's response model T(K, B) (issue 18): the
references (`references`), the protocol that measures T (`protocol`); scored by
``benchmarks/bench_plan_validation.py``. Nothing here imports echosim."""
