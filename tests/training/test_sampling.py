"""The compiled batch draws against NumPy's: the same random numbers, rounding aside."""

import numpy as np
import pytest
from numba import njit

from echosim.training import sampling
from echosim.training.problems import BATCHES_PER_BLOCK, LeastSquares, Logistic, Problem


def numpy_batches(problem, seed, start, stop, B, dtype=np.float64):
    """0.1's draw: `Problem.batches`, i.e. NumPy's `sample()` on each block's generator."""
    return Problem.batches(problem, seed, start, stop, B, dtype)


def test_pcg64_and_ziggurat_reproduce_numpy_bitwise():
    def bits():
        return np.random.PCG64(np.random.SeedSequence(7, spawn_key=(0, 3)))

    state = sampling.pcg64_state(bits())
    np.testing.assert_array_equal(_draw(state, 1000, 0).view(np.uint64), bits().random_raw(1000))
    normals = np.random.Generator(bits()).standard_normal(200_000)  # 200k draws reach the ziggurat's tail
    np.testing.assert_array_equal(_draw(state, 200_000, 1), normals)
    np.testing.assert_array_equal(_draw(state, 1000, 2), np.random.Generator(bits()).random(1000))


def _draw(state, n, what):
    out = np.empty(n)
    _draw_kernel(state, out, what)
    return out


@njit(cache=True)
def _draw_kernel(st, out, what):
    s = (st[0], st[1], st[2], st[3])
    for i in range(out.shape[0]):
        if what == 0:
            r, s = sampling.next_uint64(s)
            out[i:i + 1].view(np.uint64)[0] = r
        elif what == 1:
            out[i], s = sampling.standard_normal(s)
        else:
            out[i], s = sampling.next_double(s)


@pytest.mark.parametrize("d", [1, 7, 8, 100, 128, 129, 300, 1037])
def test_row_norms_follow_numpys_summation_order(d):
    Z = np.random.default_rng(d).standard_normal((5, d))
    for z, norm in zip(Z, np.linalg.norm(Z, axis=1)):
        assert np.sqrt(sampling._pairwise_sum_of_squares(z.copy(), d)) == norm


@pytest.mark.parametrize("problem", [
    LeastSquares(dim=6, decay=1.0, noise_std=0.3),
    LeastSquares(dim=130, design="sphere", radius=2.0, noise="uniform"),
    Logistic(dim=10, radius=0.2, w_star_norm=10.0),
    Logistic(dim=5, design="gaussian", decay=0.5),
], ids=["ls-gauss", "ls-sphere-uniform", "logistic-sphere", "logistic-gauss"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_batches_are_numpys_up_to_rounding_of_y(problem, dtype):
    # start block-aligned, stop mid-block: the kept prefix of the last block must not shift the stream
    X, y = problem.batches(5, BATCHES_PER_BLOCK, 3 * BATCHES_PER_BLOCK + 5, 4, dtype)
    X0, y0 = numpy_batches(problem, 5, BATCHES_PER_BLOCK, 3 * BATCHES_PER_BLOCK + 5, 4, dtype)
    assert X.dtype == y.dtype == dtype
    np.testing.assert_array_equal(X, X0)  # the same normals and the same scaling, bitwise
    if problem.loss == "logistic":
        np.testing.assert_array_equal(y, y0)
    else:  # x·w* summed in index order here, by BLAS in NumPy
        np.testing.assert_allclose(y, y0, rtol=0, atol=8 * np.finfo(dtype).eps * np.abs(y0).max())


def test_batches_do_not_depend_on_how_the_stream_is_cut():
    p = Logistic(dim=4)
    X, y = p.batches(9, 0, 64, 3)
    for start, stop in [(16, 17), (32, 64), (48, 50)]:
        Xs, ys = p.batches(9, start, stop, 3)
        np.testing.assert_array_equal(Xs, X[start:stop])
        np.testing.assert_array_equal(ys, y[start:stop])
