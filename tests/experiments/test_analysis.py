"""Convergence time, lr tuning and the saturation fit against naive twins and hand-made curves."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from echosim.experiments.analysis import (DEFAULT_HOLD, DEFAULT_RULE, analysis_settings, convergence, convergence_index,
                                          fit_saturation, loss_threshold, median_interval, regime, trailing_mean, tune)


def naive_trailing_mean(v, w):
    return np.array([np.mean(v[i - w + 1:i + 1]) if i >= w - 1 else np.nan for i in range(len(v))])


@given(st.lists(st.floats(-1e3, 1e3), min_size=0, max_size=40), st.integers(1, 12))
def test_trailing_mean_matches_the_naive_loop(values, window):
    v = np.array(values, dtype=float)
    np.testing.assert_allclose(trailing_mean(v, window), naive_trailing_mean(v, window), rtol=1e-12, atol=1e-9)


def curve(loss_excess, batch_size=4, echo=2, time=None):
    n = len(loss_excess)
    b = np.arange(n)
    return {"batches": b, "steps": echo * b, "samples": batch_size * b,
            "time": np.full(n, np.nan) if time is None else np.asarray(time, float),
            "risk": np.asarray(loss_excess, float), "risk_avg": np.asarray(loss_excess, float) * 2,
            "risk_end_avg": np.asarray(loss_excess, float) * 3}


def test_convergence_needs_a_full_window_below_the_threshold():
    F = 0.5
    excess = np.r_[np.full(5, 1.0), np.full(30, 0.001)]  # below 1% of F* = 0.005 from point 5
    c = convergence(curve(excess), F, rtol=0.01, window=10)
    # trailing mean of points 5..14 is the first full window of small values
    assert c["converged"] and c["conv_index"] == 14
    assert c["conv_batches"] == 14 and c["conv_steps"] == 28 and c["conv_samples"] == 56
    assert math.isnan(c["conv_time"])  # no pipeline, no wall-clock
    # a window that mixes in large values is not enough even if the latest values are small
    assert convergence_index(F + excess, loss_threshold(F, 0.01), window=10, rule="first") == 14


def test_threshold_is_relative_to_F_star_or_absolute():
    assert loss_threshold(2.0, rtol=0.01) == pytest.approx(2.02)
    assert loss_threshold(2.0, rtol=None, atol=0.1) == pytest.approx(2.1)
    with pytest.raises(ValueError, match="atol"):
        loss_threshold(0.0, rtol=0.01)
    with pytest.raises(ValueError, match="exactly one"):
        loss_threshold(1.0, rtol=0.01, atol=0.1)


def test_never_and_diverged_are_infinite_not_nan_and_iterate_selects_the_column():
    F = 1.0
    slow = curve(np.full(50, 0.5), time=np.arange(50.0))
    c = convergence(slow, F, rtol=0.01)
    assert not c["converged"] and c["conv_batches"] == math.inf and c["conv_time"] == math.inf
    fast = curve(np.full(20, 0.003), time=np.arange(20.0) * 8)
    assert convergence(fast, F, rtol=0.01, window=10, rule="first")["conv_time"] == 72.0
    assert convergence(fast, F, rtol=0.01, window=10, rule="first", status="diverged")["conv_batches"] == math.inf
    # iterate picks the column: avg has 2x the excess (0.006 <= 0.01·F*), end_avg 3x (0.009 > 0.005·F*)
    assert convergence(fast, F, rtol=0.01, window=10, rule="first", iterate="avg")["converged"]
    assert not convergence(fast, F, rtol=0.005, window=10, rule="first", iterate="end_avg")["converged"]
    with pytest.raises(ValueError, match="iterate"):
        convergence(fast, F, iterate="best")


def summary_rows(times_by_lr, reps=3, extra=None):
    rows = []
    for lr, times in times_by_lr.items():
        for r, t in enumerate(times):
            row = {"optimizer.lr": lr, "optimizer.batch_size": 4, "optimizer.echo": 2, "repetition": r,
                   "conv_batches": t, "conv_steps": 2 * t, "conv_samples": 4 * t, "conv_time": np.nan,
                   "converged": math.isfinite(t)}
            row.update(extra or {})
            rows.append(row)
    return rows


def test_tune_picks_the_smallest_median_and_counts_inf_as_never():
    df = pd.DataFrame(summary_rows({0.1: [50, 60, 70], 0.3: [10, 20, math.inf], 1.0: [5, math.inf, math.inf]}))
    t = tune(df)
    assert len(t) == 1
    row = t.iloc[0]
    assert row["optimizer.lr"] == 0.3 and row["conv_batches"] == 20 and row["conv_steps"] == 40
    assert row["n_converged"] == 2 and row["n_seeds"] == 3 and row["n_lr"] == 3 and row["lr_edge"] == ""
    assert math.isnan(row["conv_time"])


def test_tune_breaks_ties_by_slow_seeds_then_the_middle_of_the_plateau_and_flags_grid_edges():
    # equal medians: the lr with fewer slow seeds wins (its upper quartile is smaller)
    df = pd.DataFrame(summary_rows({0.1: [10, 20, 30, 30], 0.3: [10, 20, 90, 90], 1.0: [20, 20, 20, 20],
                                    3.0: [20, 20, 20, 90]}))
    row = tune(df).iloc[0]
    assert row["optimizer.lr"] == 1.0 and row["lr_edge"] == "" and row["n_tied"] == 1
    # a plateau of lrs that tie on everything: its middle (on the log scale), not its end
    lrs = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
    df = pd.DataFrame(summary_rows({0.1: [9, 9, 9], 0.2: [2, 2, 2], 0.4: [2, 2, 2], 0.8: [2, 2, 2], 1.6: [2, 2, 2],
                                    3.2: [5, 5, 5]}))
    row = tune(df).iloc[0]
    assert row["optimizer.lr"] in (0.4, 0.8) and row["n_tied"] == 4 and row["lr_edge"] == ""
    assert len(lrs) == row["n_lr"]
    # a plateau that reaches the end of the grid is flagged: its middle is not known yet
    df = pd.DataFrame(summary_rows({0.1: [9, 9, 9], 0.3: [2, 2, 2], 1.0: [2, 2, 2]}))
    assert tune(df).iloc[0]["lr_edge"] == "high"
    df = pd.DataFrame(summary_rows({0.1: [10, 20, 30], 0.3: [40, 50, 90], 1.0: [40, 50, 60]}))
    assert tune(df).iloc[0]["lr_edge"] == "low"


def test_tune_reports_each_seeds_time_and_an_interval_for_the_median():
    rows = summary_rows({0.3: [12, 10, 11, 30, 9, 10, 13, 10, 11, 10]})
    rows = rows[::-1]  # repetition order is restored
    row = tune(pd.DataFrame(rows)).iloc[0]
    assert list(row["seeds_batches"]) == [12, 10, 11, 30, 9, 10, 13, 10, 11, 10]
    lo, hi = median_interval(row["seeds_batches"])
    assert (row["conv_batches_low"], row["conv_batches_high"]) == (lo, hi)
    assert lo <= row["conv_batches"] <= hi and hi < 30  # one slow seed does not reach the interval


def naive_median_interval_coverage(n, l):
    from math import comb

    return sum(comb(n, j) for j in range(l, n - l + 1)) / 2**n


@pytest.mark.parametrize("n", [5, 8, 10, 20, 31])
def test_median_interval_is_the_widest_order_statistic_pair_with_90_percent_coverage(n):
    values = np.arange(n, dtype=float)
    lo, hi = median_interval(values)
    l = int(lo) + 1
    assert hi == n - l and naive_median_interval_coverage(n, l) >= 0.9
    assert naive_median_interval_coverage(n, l + 1) < 0.9 or l + 1 > n // 2


def test_tune_with_nothing_converged_reports_nan_lr_and_inf_times():
    df = pd.DataFrame(summary_rows({0.1: [math.inf] * 3, 1.0: [math.inf] * 3}))
    row = tune(df).iloc[0]
    assert math.isnan(row["optimizer.lr"]) and row["conv_batches"] == math.inf and row["n_converged"] == 0


def test_tune_groups_by_every_parameter_including_nan_ones():
    rows = summary_rows({0.1: [5, 5, 5], 1.0: [9, 9, 9]}, extra={"pipeline.policy": "fixed"})
    greedy = summary_rows({0.1: [9, 9, 9], 1.0: [4, 4, 4]}, extra={"pipeline.policy": "greedy"})
    for r in greedy:
        r["optimizer.echo"] = np.nan  # greedy: K_t is the pipeline's, no echo parameter
    t = tune(pd.DataFrame(rows + greedy))
    assert len(t) == 2
    got = dict(zip(t["pipeline.policy"], t["optimizer.lr"]))
    assert got == {"fixed": 0.1, "greedy": 1.0}


def test_fit_saturation_recovers_a_and_c_and_reads_the_regime():
    K = np.array([1, 2, 4, 8, 16, 32.0])
    fit = fit_saturation(K, 100 / K + 5)
    assert fit["a"] == pytest.approx(100, rel=1e-6) and fit["c"] == pytest.approx(5, rel=1e-6)
    assert fit["K_sat"] == pytest.approx(20, rel=1e-6)
    assert "curvature" in regime(fit["K_sat"], 32)
    flat = fit_saturation(K, np.full(6, 200.0))
    assert flat["K_sat"] < 1e-6 and "noise" in regime(flat["K_sat"], 32)
    assert math.isnan(fit_saturation([1, 2], [np.inf, 5])["K_sat"])
    with_inf = fit_saturation(K, np.r_[100 / K[:5] + 5, np.inf])
    assert with_inf["K_sat"] == pytest.approx(20, rel=1e-6)


def test_the_stable_rule_ignores_a_run_that_only_passes_through_the_band():
    from echosim.experiments.analysis import convergence_index

    loss = np.array([5.0, 3.0, 1.0, 0.9, 2.0, 3.0, 1.0, 0.95, 0.9, 0.9])  # in, out, in for good
    assert convergence_index(loss, 1.0, window=1, rule="first") == 2
    assert convergence_index(loss, 1.0, window=1, rule="stable") == 6
    assert convergence_index(loss[:6], 1.0, window=1, rule="stable") == -1  # ends outside: never
    assert convergence_index(np.full(4, 0.5), 1.0, window=1, rule="stable") == 0
    with pytest.raises(ValueError, match="rule"):
        convergence_index(loss, 1.0, rule="last")


def naive_hold_index(loss, threshold, batches, hold):
    """The hold rule as the obvious loop: the first point inside the band whose next
    `hold` fresh batches (as logged) stay inside, with the log reaching that far."""
    for i in range(len(loss)):
        if batches[i] + hold > batches[-1]:
            return -1
        if all(loss[j] <= threshold for j in range(i, len(loss)) if batches[j] <= batches[i] + hold):
            return i
    return -1


@given(st.lists(st.floats(0.0, 2.0), min_size=1, max_size=60), st.integers(1, 4), st.integers(0, 8))
def test_the_hold_rule_matches_the_naive_loop(values, per_batch, hold):
    loss = np.array(values)
    batches = np.arange(len(loss)) // per_batch  # several logged points per fresh batch (step logs)
    assert convergence_index(loss, 1.0, window=1, rule="hold", batches=batches, hold=hold) == \
        naive_hold_index(loss, 1.0, batches, hold)


def test_the_hold_rule_does_not_depend_on_the_budget_or_on_logging_within_batches():
    rng = np.random.default_rng(0)
    loss = np.r_[np.linspace(3.0, 1.2, 30), 0.5 + 0.3 * rng.random(300)]  # in the band from batch 30 on
    loss[[40, 45]] = 1.5  # two excursions: the band is entered for good after batch 45
    batches = np.arange(len(loss))
    T = [convergence_index(loss[:n], 1.0, batches=batches[:n], hold=20) for n in (70, 100, 330)]
    assert T == [46, 46, 46]
    # shorter than T + hold: not reached within this budget, never a different T
    assert convergence_index(loss[:60], 1.0, batches=batches[:60], hold=20) == -1
    # logged at every step (K = 4, the loss constant within a batch): the same fresh batch
    steps_loss, steps_batches = np.repeat(loss, 4), np.repeat(batches, 4)
    i = convergence_index(steps_loss, 1.0, batches=steps_batches, hold=20)
    assert steps_batches[i] == 46
    # the stable rule, by contrast, moves with the budget
    late = loss.copy()
    late[200] = 1.5
    assert convergence_index(late[:150], 1.0, rule="stable") == 46
    assert convergence_index(late, 1.0, rule="stable") == 201
    assert convergence_index(late, 1.0, batches=batches, hold=20) == 46


def test_one_default_rule_and_target_for_every_caller():
    from echosim.experiments.schema import FIELDS

    assert FIELDS["sweep"]["rule"].default == DEFAULT_RULE == "hold"
    assert FIELDS["sweep"]["hold"].default == DEFAULT_HOLD
    s = analysis_settings({})
    assert s["rule"] == DEFAULT_RULE and s["rtol"] == 0.01 and s["hold"] == DEFAULT_HOLD
    assert analysis_settings({"atol": 0.1})["rtol"] is None
    c = curve(np.r_[np.full(5, 1.0), np.full(30, 0.001)])
    assert convergence(c, 0.5)["conv_index"] == convergence(c, 0.5, rule=DEFAULT_RULE, hold=DEFAULT_HOLD)["conv_index"]
