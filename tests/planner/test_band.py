"""The band from the user's own inputs: leave-one-out over their batch sizes, repeats when
given, an assumed single-run error otherwise."""

import numpy as np

from echosim.planner.response import fit_response, t_one


def test_leave_one_out_measures_the_spread_of_the_inputs():
    Bs = np.array([32, 128, 512, 2048])
    exact = {int(B): float(t_one(40.0, 2e4, B)) for B in Bs}
    noisy = {B: t * f for (B, t), f in zip(exact.items(), (1.3, 0.8, 1.25, 0.85))}
    tight, loose = fit_response(exact), fit_response(noisy)
    assert "leave-one-out" in tight.uncertainty and "leave-one-out" in loose.uncertainty
    width = [np.subtract(*np.quantile(f.predict_draws(1, 128), [0.9, 0.1])) / f.predict(1, 128)
             for f in (tight, loose)]
    assert width[1] > 1.5 * width[0]


def test_two_sizes_take_the_assumed_single_run_error():
    fit = fit_response({64: 1100.0, 1024: 160.0})
    assert "assumed" in fit.uncertainty
