"""One rule for K, shared by the sweep's answer and the planner: robust over seeds, the
fastest within the noise, then the fewest steps."""

import math

import numpy as np
import pandas as pd
import pytest

from echosim.experiments.choice import choose, spread


def test_fewest_steps_within_the_noise():
    # the sweep's case: K = 8 at 32.78 time units, K = 4 at 32.86 with half the steps
    c = choose([40.0, 32.86, 32.78], steps=[40, 4 * 8, 8 * 8])
    assert c.index == 1 and c.fastest_median == 2 and c.why == "fewer steps"


def test_as_many_steps_within_the_noise_goes_to_the_one_given_first():
    """sync and greedy at a mean K of 1 take the same steps; greedy 0.6% faster is noise, so
    the simpler candidate, listed first, is chosen; outside the noise the faster one is."""
    c = choose([849.0, 844.0], steps=[289, 289])
    assert (c.index, c.fastest_median, c.why) == (0, 1, "simpler")
    c = choose([849.0, 800.0], steps=[289, 289])
    assert (c.index, c.why) == (1, "fastest")


def test_robust_over_seeds_not_best_in_the_median():
    rng = np.random.default_rng(0)
    k1 = 40 + rng.normal(0, 0.5, 10)
    k4 = 33 + rng.normal(0, 0.3, 10)
    k8 = np.r_[31 + rng.normal(0, 0.3, 7), 41, 45, 60]   # 3 of 10 seeds no better than K = 1
    c = choose([k1, k4, k8], steps=[40, 4 * 8, 8 * 4])
    assert c.fastest_median == 2 and c.index == 1 and c.why == "robust"


def test_a_clear_winner_is_chosen_and_never_reached_is_last():
    assert choose([10.0, 5.0, math.inf], steps=[10, 20, 40]).index == 1
    assert choose([math.inf, math.nan], steps=[1, 2]).index == 0
    assert spread([1, 2, 3, math.inf])[1] == math.inf


def test_bad_input():
    with pytest.raises(ValueError, match="^choose"):
        choose([1.0], steps=[])


def test_the_sweeps_answer_uses_the_rule():
    """in_words on a table where K = 8 is fastest in the median but needs as many fresh batches
    as K = 1 on 3 of 10 seeds: the sentence names K = 4 and gives the spread."""
    from echosim.experiments.report import in_words

    B, Ks, lrs = 2048, (1, 4, 8), {1: 1.0, 4: 0.5, 8: 0.25}
    T_seeds = {1: [16] * 10, 4: [4, 4, 4, 4, 5, 4, 4, 4, 4, 4], 8: [2, 2, 2, 2, 2, 2, 2, 9, 16, 22]}
    wall = {K: [max(8.0, K) * t + 0.5 * i / 10 for i, t in enumerate(T_seeds[K])] for K in Ks}
    rows = [{"optimizer.batch_size": B, "optimizer.echo": K, "optimizer.lr": lrs[K], "repetition": r,
             "conv_batches": T_seeds[K][r], "conv_time": wall[K][r], "conv_steps": K * T_seeds[K][r]}
            for K in Ks for r in range(10)]
    summary = pd.DataFrame(rows)
    tuned = summary.groupby(["optimizer.batch_size", "optimizer.echo", "optimizer.lr"], as_index=False)[
        ["conv_batches", "conv_time"]].median()
    tuned["lr_edge"] = ""
    (words,) = in_words(tuned, summary)
    assert words.startswith("B = 2048: echoing at K = 4 ")
    assert "K = 8 is faster in the median" in words and "over seeds" in words
