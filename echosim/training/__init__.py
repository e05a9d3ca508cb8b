"""The learner: problems (streams of fresh batches, exact risk, constants), the loss
table, the method table (optimizer specs), and the one driver, `run` / `run_many` /
`run_shared` / `start` over the Numba kernels.

Pure layer: imports NumPy, SciPy, Numba and the pipeline layer only.
"""

from echosim.training.losses import LOSSES, Loss
from echosim.training.methods import METHODS, Method, Optimizer
from echosim.training.problems import PROBLEMS, Dataset, LeastSquares, Logistic, Problem
from echosim.training.runner import Run, Trajectory, run, run_many, run_shared, start, start_many

_SPECS = {row.spec.__name__: row.spec for row in METHODS.values()}
globals().update(_SPECS)  # every method's spec class (MinibatchSGD, EchoedGD, ...), read from the table

__all__ = ["run", "run_many", "run_shared", "start", "start_many", "Run", "Trajectory", "Problem", "LeastSquares", "Logistic",
           "Dataset", "PROBLEMS", "Optimizer", *_SPECS, "Method", "METHODS", "Loss", "LOSSES"]
