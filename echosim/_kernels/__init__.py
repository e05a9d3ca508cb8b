"""Private Numba kernels; import through the public facades only."""
