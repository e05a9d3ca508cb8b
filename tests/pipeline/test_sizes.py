"""API sizes that cannot fit in memory: ValueError naming the argument before any allocation."""

import pytest

from echosim.pipeline import Pipeline, echo_schedule, simulate, simulate_until
from echosim.pipeline.sizes import check_fits, memory_limit
from echosim.training import EchoedGD, LeastSquares, Logistic, run

HUGE = 10**12


def test_memory_limit_is_a_positive_number_of_bytes_and_the_same_every_time():
    assert memory_limit() == memory_limit() > 0


def test_check_fits_names_the_argument_and_the_largest_value_that_fits():
    check_fits("n", 10, 8)
    with pytest.raises(ValueError, match=r"^n=1000000000000 needs .* of memory \(it\), more than .*: at most [\d,]+ fit$"):
        check_fits("n", HUGE, memory_limit(), what="it")


@pytest.mark.parametrize("call, name", [
    (lambda: simulate(Pipeline(8.0, policy="greedy"), n_batches=HUGE, seed=0), "n_batches"),
    (lambda: simulate(Pipeline(8.0, policy="fixed", echo=HUGE), n_batches=100, seed=0), "n_batches"),
    (lambda: simulate_until(Pipeline(8.0, policy="greedy"), 1e300, seed=0), "budget"),
    (lambda: simulate_until(Pipeline(8.0, policy="greedy"), float("inf"), seed=0), "budget"),
    (lambda: echo_schedule(4, n_batches=HUGE), "n_batches"),
    (lambda: Pipeline(8.0, workers=HUGE), "Pipeline.workers"),
    (lambda: LeastSquares(dim=HUGE), "dim"),
    (lambda: Logistic(dim=HUGE), "dim"),
    (lambda: run(LeastSquares(dim=2), EchoedGD(0.1), batch_size=4, n_batches=HUGE), "n_batches"),
    (lambda: run(LeastSquares(dim=2), EchoedGD(0.1), batch_size=HUGE, n_batches=3), "batch_size"),
])
def test_sizes_that_cannot_fit_raise_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError) as err:
        call()
    assert str(err.value).startswith(name) and "\n" not in str(err.value)
