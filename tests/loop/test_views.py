"""Notebook views: short reprs with units, HTML views, and to_frame's unit-carrying columns."""

import pytest

from echosim.loop.echoing import echoing
from echosim.loop.records import FRAME_UNITS


def test_reprs_are_short_and_carry_units():
    it = echoing(range(3), 2)
    assert repr(it) == "echoing(policy='fixed', K=2, not started, fresh_batches=0 of 3, steps=0, waited='0 µs')"
    for _ in it:
        it.report(1.0)
    assert repr(it).startswith("echoing(policy='fixed', K=2, done, fresh_batches=3 of 3, steps=6, waited='")
    r = it.records()
    text = repr(r)
    assert text.startswith("Records(policy='fixed', echo=2, batch_size=None, batches=3, steps=6, mean_echo=2, elapsed='")
    assert "wait='" in text and len(text) < 160
    assert repr(echoing([], "greedy").records()) == "Records(policy='greedy', echo=None, batch_size=None, batches=0, steps=0)"


def test_html_views_show_the_summary_and_the_measured_verdict():
    it = echoing(range(4), "sync", batch_size=8)
    for _ in it:
        it.report(1.0)
    page = it.records()._repr_html_()
    assert "<table>" in page and "fresh batches / steps" in page and "4 / 4 (mean K 1)" in page
    assert "time.perf_counter" in page and "input-bound" in page and "what echoing saves" not in page
    assert it._repr_html_().startswith("<p><b>echoing(policy=&#x27;sync&#x27;")
    assert echoing([], 1).records()._repr_html_().count("<tr>") >= 5


def test_frame_columns_carry_their_units():
    pytest.importorskip("pandas")
    it = echoing(range(3), 2)
    for _ in it:
        it.report(0.5)
    r = it.records()
    batches, steps = r.to_frame(), r.to_frame("step")
    assert {"load_time_s", "wait_time_s", "start_s", "end_s", "steps_per_batch", "first_loss"} <= set(batches.columns)
    assert {"step_start_s", "step_time_s", "loss"} <= set(steps.columns)
    assert "load_time" not in batches.columns and "step_time" not in steps.columns
    assert batches.attrs["units"]["load_time_s"] == "seconds" and steps.attrs["clock"] == "time.perf_counter"
    assert all(col in FRAME_UNITS.get(k, (k,))[0] for k, col in zip(["batch", "load_time"], batches.columns[:2]))
    assert batches["wait_time_s"].tolist() == r.wait_time.tolist()
