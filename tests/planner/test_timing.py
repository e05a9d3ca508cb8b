"""Durations with units, service-time specs as text, traces, and the affine loader fit."""

import math

import numpy as np
import pytest

from echosim.pipeline.service_times import Deterministic, Gamma, Stall
from echosim.pipeline.traces import Trace
from echosim.planner.timing import (
    as_loader, as_time_model, fit_loader, format_duration, parse_duration, parse_service_time,
)


@pytest.mark.parametrize("text, seconds", [("80ms", 0.08), ("80 ms", 0.08), ("0.08s", 0.08),
                                           ("1.5e3us", 1.5e-3), ("2min", 120.0), ("1h", 3600.0), (0.5, 0.5)])
def test_durations_convert_to_seconds(text, seconds):
    assert parse_duration(text, "x") == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("text", ["80xs", "ms", "-3ms", "0s", "inf", "nan s", "", "1e400s"])
def test_bad_durations_name_the_argument(text):
    with pytest.raises(ValueError, match="^step_time"):
        parse_duration(text, "step_time")


@pytest.mark.parametrize("text", ["10", "0.08", "gamma(mean=80, cv=0.5)"])
def test_text_without_a_unit_is_refused(text):
    """'--step-time 10' meant as 10 ms would plan for a 10 s step: a unit is required."""
    with pytest.raises(ValueError, match="has no unit; write e.g."):
        parse_service_time(text, "step_time")


def test_distribution_text_gives_the_family_in_seconds():
    assert parse_service_time("gamma(mean=80ms, cv=0.5)", "loader") == Gamma(mean=0.08, cv=0.5)
    assert parse_service_time("gamma(80ms, 0.5)", "loader") == Gamma(mean=0.08, cv=0.5)
    assert parse_service_time("10ms", "step_time") == Deterministic(0.01)
    s = parse_service_time("stall(base=50ms, p=0.1, length=1s)", "loader")
    assert isinstance(s, Stall) and s.mean == pytest.approx(0.05 + 0.1 * 1.0)


@pytest.mark.parametrize("text, match", [("gamma(mean=80ms, cv=x)", "gamma.cv"), ("weibull(1)", "unknown distribution"),
                                         ("gamma(mean=80ms, cv=-1)", "loader"), ("gamma(mean=80ms, k=1)", "takes"),
                                         ("gamma mean 80", "cannot read")])
def test_bad_distribution_text(text, match):
    with pytest.raises(ValueError, match=match):
        parse_service_time(text, "loader")


def test_trace_files_with_units_and_bad_values(tmp_path):
    good = tmp_path / "t.csv"
    good.write_text("time\n80\n90\n70\n")
    t = parse_service_time(f"trace({good}, unit=ms)", "loader")
    assert isinstance(t, Trace) and t.mean == pytest.approx(0.08)
    for bad in ("-1", "nan", "inf"):
        p = tmp_path / f"bad{bad}.csv"
        p.write_text(f"time\n0.1\n{bad}\n")
        with pytest.raises(ValueError, match="^loader.*finite and > 0"):
            parse_service_time(str(p), "loader")
    with pytest.raises(ValueError, match="^loader.*does not exist"):
        parse_service_time(f"trace({tmp_path / 'none.csv'})", "loader")


def test_affine_loader_recovers_a_and_b_from_noisy_profiles():
    rng = np.random.default_rng(np.random.SeedSequence(5))
    a, b = 0.02, 1e-4
    profiles = {B: Gamma(mean=a + b * B, cv=0.3).sample(rng, 400) for B in (32, 128, 512)}
    m = fit_loader(profiles)
    # the estimate is within 4 standard errors of the truth, and the errors are small
    assert abs(m.intercept - a) < 4 * m.intercept_se and m.intercept_se < 0.2 * a
    assert abs(m.per_example - b) < 4 * m.per_example_se and m.per_example_se < 0.1 * b
    # at a new B the shape of the nearest profile is rescaled to the fitted mean
    d = m.at(256)
    assert d.mean == pytest.approx(m.mean_at(256), rel=1e-12)
    assert math.sqrt(d.variance) / d.mean == pytest.approx(np.std(profiles[128]) / np.mean(profiles[128]), rel=1e-9)


def test_affine_loader_needs_two_batch_sizes():
    with pytest.raises(ValueError, match="^loader: .*two or more batch sizes"):
        fit_loader({64: [0.1, 0.2]})
    with pytest.raises(ValueError, match="^loader"):
        as_loader({64: [0.1, 0.2]})


def test_plain_loader_is_the_same_at_every_batch_size():
    m = as_loader("gamma(mean=80ms, cv=0.5)")
    assert m.at(4) == m.at(4096) == Gamma(mean=0.08, cv=0.5)


def test_step_time_per_batch_size_is_affine_in_B():
    step = as_time_model({64: "15ms", 512: "40ms"}, "step_time")
    assert step.mean_at(64) == pytest.approx(0.015) and step.mean_at(512) == pytest.approx(0.040)
    assert step.mean_at(1024) == pytest.approx(0.015 + 0.025 / 448 * 960)  # beyond: the same line
    assert as_time_model({256: "10ms"}, "step_time").mean_at(4096) == pytest.approx(0.01)  # one B: everywhere
    falling = as_time_model({64: "40ms", 512: "15ms"}, "step_time")
    with pytest.raises(ValueError, match="^batch_size: the fitted step_time time .* not positive at B = 4096"):
        falling.at(4096)
    for bad in ({64: "-5ms"}, {0: "5ms"}, {64: "5"}):
        with pytest.raises(ValueError, match="^step_time"):
            as_time_model(bad, "step_time")


def test_format_duration_picks_a_unit():
    assert format_duration(0.08) == "80 ms"
    assert format_duration(1.5) == "1.5 s"
    assert format_duration(180) == "3 min"
    assert format_duration(math.inf) == "never"
    # rounded before the unit is chosen: never "1e+03 ms"
    assert format_duration(0.99999) == "1 s" and format_duration(59.9996) == "1 min"
    assert format_duration(0.0009996) == "1 ms" and format_duration(3599.9) == "1 h"
