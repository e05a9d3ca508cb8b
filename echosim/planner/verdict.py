"""`echosim.verdict`: the one-line verdict of `echosim.loop.verdict` with the plan's prediction,
the plan made here from the records when given what it needs (steps to target, or a problem).

    >>> v = echosim.verdict(records, steps_to_target={64: 5200, 1024: 900})   # doctest: +SKIP
    >>> print(v)                                                                # doctest: +SKIP
    input-bound 63% of steps under sync (exposed wait 3.1 ms per step of 0.9 ms, 77% of the
    time); fixed K=4 is predicted to save 38% of the time to target (10-90%: 29% to 47%; ...)
"""

from __future__ import annotations

from echosim.loop.verdict import NEEDS, Verdict, judge, prediction

__all__ = ["verdict", "prediction", "Verdict", "NEEDS"]


def verdict(records, *, plan=None, steps_to_target=None, problem=None, batch_size=None, seeds: int = 3,
            **plan_options) -> Verdict:
    """Is the loader the bottleneck, and what would echoing buy? One line: ``print(verdict(...))``.

    Parameters
    ----------
    records : Records or list of Records
        Runs through `echosim.echoing` (a pilot's list, or one run's). The waits are read
        from the sync runs among them where there are any (the loop without echoing).
    plan : Plan, optional
        A plan already made from these records (its recommendation is the prediction).
    steps_to_target, problem : optional
        Otherwise, what `echosim.plan` needs to predict (form (b) or (a)); the plan is made
        from the records' timing with ``seeds`` repetitions and ``plan_options``.
    batch_size : int, optional
        B of the plan (default: the records').

    Returns
    -------
    Verdict
        ``str(v)`` is the line; without a plan or what it needs, it says what it would need.
    """
    items = list(records) if isinstance(records, (list, tuple)) else [records]
    if plan is None and (steps_to_target is not None or problem is not None):
        from echosim.planner.advisor import plan as make_plan

        B = batch_size if batch_size is not None else next((r.batch_size for r in items if r.batch_size), None)
        if B is None:
            raise ValueError("batch_size: the records do not say B (pass batch_size= to echoing or here)")
        plan = make_plan(records=items, batch_size=B, steps_to_target=steps_to_target, problem=problem,
                         seeds=seeds, **plan_options)
    return judge(items, plan)
