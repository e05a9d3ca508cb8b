"""Integer codes shared by the kernels and their Python facades (no Numba import)."""

LOSS_SQUARED = 0
LOSS_LOGISTIC = 1
LOSS_CODES = {"squared": LOSS_SQUARED, "logistic": LOSS_LOGISTIC}

METHOD_GD = 0  # minibatch SGD, echoed GD, echoed SGD (sub-batches)
METHOD_NESTEROV = 1
METHOD_PROX = 2
