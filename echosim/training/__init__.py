"""The learner: problems (streams of fresh batches, exact risk, constants), the loss
table, the method table (optimizer specs), and the one driver, `run` / `run_many` /
`start` over the Numba kernels.

Pure layer: imports NumPy, SciPy, Numba and the pipeline layer only.
"""

from echosim.training.losses import LOSSES, Loss
from echosim.training.methods import (
    METHODS,
    EchoedAdam,
    EchoedGD,
    EchoedHeavyBall,
    EchoedNesterov,
    EchoedProx,
    EchoedSGD,
    Method,
    MinibatchSGD,
    Optimizer,
)
from echosim.training.problems import PROBLEMS, Dataset, LeastSquares, Logistic, Problem
from echosim.training.runner import Run, Trajectory, run, run_many, start, start_many

__all__ = ["run", "run_many", "start", "start_many", "Run", "Trajectory", "Problem", "LeastSquares", "Logistic",
           "Dataset", "PROBLEMS", "Optimizer", "MinibatchSGD", "EchoedGD", "EchoedSGD", "EchoedNesterov", "EchoedProx",
           "EchoedHeavyBall", "EchoedAdam", "Method", "METHODS", "Loss", "LOSSES"]
