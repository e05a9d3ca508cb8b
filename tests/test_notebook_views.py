"""Text views a notebook or a REPL shows: short, with units, and true at start-up.

What scripts/check_notebook.py found in a real Jupyter kernel, held here without one.
"""

from pathlib import Path

import pytest

import echosim
from echosim.experiments.sweep import SweepReport
from echosim.loop.echoing import echoing
from echosim.loop.verdict import judge
from echosim.pipeline import echo_schedule


def test_schedule_repr_gives_the_makespan_its_unit():
    # deterministic loader, 4 time units per batch, sync: the last batch is ready at 4T,
    # and its one step ends 1 time unit later
    s = echosim.simulate(echosim.Pipeline(echosim.Deterministic(4.0)), 10, seed=0)
    assert repr(s) == "Schedule(n_batches=10, n_steps=10, makespan='41 time units', batch_size=None)"
    # step counts only: no clock, so no makespan (not 'nan time units')
    assert repr(echo_schedule(4, 10)) == "Schedule(n_batches=10, n_steps=40, makespan=None, batch_size=None)"


def test_verdict_repr_is_its_line_not_a_dump_of_measurements():
    it = echoing(range(5), "sync")
    for _ in it:
        it.report(1.0)
    v = judge(it.records())
    assert repr(v) == f"Verdict({v.line!r})"
    assert "measured" not in repr(v) and "nan" not in repr(v)


def test_sweep_report_repr_is_short_with_the_elapsed_time_in_seconds():
    report = SweepReport(out=Path("results-demo"), n_runs=8, n_new=6, n_resumed=2,
                         counts={"ok": 7, "diverged": 1, "failed": 0, "missing": 0}, elapsed=12.345,
                         compile_seconds=3.0, workers=1, scheduler=None, summary=None, tuned=None)
    assert repr(report) == ("SweepReport(out='results-demo', runs=8 (6 new, 2 resumed), ok=7, diverged=1, "
                            "failed=0, elapsed='12.3 s')")
    assert "(no results)" in report._repr_html_()


def test_records_at_start_up_do_not_claim_the_loop_waited_all_the_time():
    """After the first batch there is no steady state yet: the views say so, not '100%'."""
    it = echoing(range(4), "greedy", max_echo=2)
    next(it)
    r = it.records()
    assert r.n_batches == 1
    assert "waiting (steady state)</th><td style='text-align:left'>- (the first batch is start-up)" in r._repr_html_()
    assert repr(r).endswith("wait='-')")
    for _ in it:
        it.report(1.0)
    done = it.records()
    assert done.n_batches == 4 and "% of the time" in done._repr_html_() and "wait='-'" not in repr(done)


def test_sweep_report_html_says_no_where_lr_is_inside_its_grid():
    pd = pytest.importorskip("pandas")
    tuned = pd.DataFrame({"optimizer.echo": [1, 2], "optimizer.lr": [1.0, 0.1], "lr_edge": ["", "low"],
                          "conv_batches": [11.0, float("inf")], "conv_time": [45.0, float("inf")]})
    report = SweepReport(out=Path("r"), n_runs=4, n_new=4, n_resumed=0, counts={"ok": 4}, elapsed=1.0,
                         compile_seconds=0.0, workers=1, scheduler=None, summary=None, tuned=tuned)
    report.in_words = list  # the sentences need the summary table; not what this test reads
    page = report._repr_html_()
    assert "lr* at the grid&#x27;s edge" in page or "lr* at the grid's edge" in page
    assert "<td>no</td>" in page and "<td>low</td>" in page and "<td></td>" not in page
    assert "conv_batches" not in page and "conv_time" not in page
    assert "T to target (fresh batches)" in page and "wall-clock to target (simulated time units)" in page
