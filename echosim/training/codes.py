"""Integer codes shared by the kernels and their Python facades (no Numba import)."""

LOSS_SQUARED = 0
LOSS_LOGISTIC = 1
LOSS_SOFTMAX = 2  # multinomial logistic: the weights are C×d, row-major
LOSS_CODES = {"squared": LOSS_SQUARED, "logistic": LOSS_LOGISTIC, "softmax": LOSS_SOFTMAX}

METHOD_GD = 0  # minibatch SGD, echoed GD, echoed SGD (sub-batches)
METHOD_NESTEROV = 1
METHOD_PROX = 2
