"""The learner: problems and data sets (streams of fresh batches, exact risk, constants),
optimizer specs, and `run(problem, optimizer, ...) -> Trajectory` over a Numba kernel.

Pure layer: imports NumPy, SciPy, Numba and the pipeline layer only.
"""

from echosim.training.optimizers import (
    OPTIMIZERS,
    EchoedGD,
    EchoedNesterov,
    EchoedProx,
    EchoedSGD,
    MinibatchSGD,
    Optimizer,
)
from echosim.training.problems import Dataset, LeastSquares, Logistic, Problem
from echosim.training.runner import Trajectory, run, run_many

__all__ = ["run", "run_many", "Trajectory", "Problem", "LeastSquares", "Logistic", "Dataset", "Optimizer", "MinibatchSGD",
           "EchoedGD", "EchoedSGD", "EchoedNesterov", "EchoedProx", "OPTIMIZERS"]
