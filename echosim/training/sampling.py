"""Numba kernels that draw the synthetic problems' fresh batches, block by block.

They consume each block's generator (``problems.block_rng``: PCG64 seeded by
``SeedSequence(seed, spawn_key=(stream, block))``) in the order NumPy's ``sample()``
does (the block's n×d standard normals row by row, then its n noise or label
uniforms), with PCG64 and NumPy's ziggurat written out here on the generator's state
(four uint64 words), so the random numbers are bitwise those of 0.1 (a test holds
it). Numba's own ``np.random.Generator`` support would draw the same numbers, but a
function taking a Generator cannot be loaded from Numba's on-disk cache (it
crashes), so it would compile afresh in every process. What differs is rounding only: x·w* is summed
here in index order where NumPy calls BLAS, so y (least squares) differs from 0.1 by
about one ulp, and a logistic label would flip only if its uniform fell within that
ulp of σ(x·w*). The sphere design's row norms use NumPy's pairwise summation order,
so its X, like the Gaussian design's, is bitwise that of 0.1.
"""

import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.random._constants import fi_double, ki_double, wi_double, ziggurat_nor_inv_r, ziggurat_nor_r

NOISE_GAUSSIAN = 0
NOISE_UNIFORM = 1
LABELS_LOGISTIC = 2


_MULT = (2549297995355413924 << 64) + 4865540595714422341  # PCG's default 128-bit multiplier (NumPy's PCG64)
_KI = np.asarray(ki_double, dtype=np.uint64)
_WI = np.asarray(wi_double, dtype=np.float64)
_FI = np.asarray(fi_double, dtype=np.float64)


def pcg64_state(bit_generator) -> np.ndarray:
    """A NumPy PCG64's state as uint64 [state_hi, state_lo, inc_hi, inc_lo] (the kernels'
    generator state; `draw_block` does not write it back)."""
    st = bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise ValueError(f"expected a PCG64 bit generator, got {st['bit_generator']}")
    s, inc = st["state"]["state"], st["state"]["inc"]
    mask = (1 << 64) - 1
    return np.array([s >> 64, s & mask, inc >> 64, inc & mask], dtype=np.uint64)


@intrinsic
def _pcg_advance(typingctx, hi, lo, inc_hi, inc_lo):
    """(hi, lo) ← (hi, lo)·MULT + (inc_hi, inc_lo) mod 2¹²⁸: PCG64's LCG step in one 128-bit multiply."""
    u64 = types.uint64
    sig = types.UniTuple(u64, 2)(u64, u64, u64, u64)

    def codegen(context, builder, signature, args):
        i64 = context.get_value_type(u64)
        i128 = type(i64)(128)
        const = type(context.get_constant(u64, 0))

        def join(h, l):
            wide = builder.shl(builder.zext(h, i128), const(i128, 64))
            return builder.or_(wide, builder.zext(l, i128))

        state = builder.add(builder.mul(join(args[0], args[1]), const(i128, _MULT)), join(args[2], args[3]))
        new_hi = builder.trunc(builder.lshr(state, const(i128, 64)), i64)
        return context.make_tuple(builder, signature.return_type, [new_hi, builder.trunc(state, i64)])

    return sig, codegen


@njit(cache=True, inline="always")
def next_uint64(s):
    """PCG64 (XSL-RR 128/64) on s = (state_hi, state_lo, inc_hi, inc_lo): advance, then
    output from the new state. Returns (value, new s)."""
    hi, lo = _pcg_advance(s[0], s[1], s[2], s[3])
    value = hi ^ lo
    rot = hi >> np.uint64(58)
    out = (value >> rot) | (value << ((np.uint64(64) - rot) & np.uint64(63)))
    return out, (hi, lo, s[2], s[3])


@njit(cache=True, inline="always")
def next_double(s):
    """A uniform double in [0, 1) (NumPy's 53-bit construction) and the new state."""
    r, s = next_uint64(s)
    return np.float64(np.int64(r >> np.uint64(11))) * (1.0 / 9007199254740992.0), s


@njit(cache=True, inline="always")
def _ziggurat_candidate(s):
    """One draw of NumPy's ziggurat: (x, accepted at once, idx, rabs, new s)."""
    r, s = next_uint64(s)
    idx = np.intp(r & np.uint64(0xFF))
    r >>= np.uint64(8)
    sign = r & np.uint64(1)
    rabs = (r >> np.uint64(1)) & np.uint64(0x000FFFFFFFFFFFFF)
    # rabs < 2⁵²: a signed conversion is exact and cheaper. The sign multiplies by ±1 (exact,
    # so bitwise NumPy's -x): a branch on a coin flip mispredicts half the time, and cost
    # a third of the draw (8.5 against 5.4 ns per normal measured side by side).
    x = np.float64(np.int64(rabs)) * _WI[idx] * (1.0 - 2.0 * np.float64(np.int64(sign)))
    return x, rabs < _KI[idx], idx, rabs, s


@njit(cache=True)
def _ziggurat_slow(x, idx, rabs, s):
    """The ~1% of NumPy's ziggurat draws not accepted at once: the tail (idx 0) or the wedge
    test, then new candidates until one is accepted. Compiled on its own (not inlined into
    every caller): it is rare, and inlined code is typed again at each call site."""
    while True:
        if idx == 0:
            while True:
                u, s = next_double(s)
                xx = -ziggurat_nor_inv_r * np.log1p(-u)
                u, s = next_double(s)
                yy = -np.log1p(-u)
                if yy + yy > xx * xx:
                    if (rabs >> np.uint64(8)) & np.uint64(1):
                        return -(ziggurat_nor_r + xx), s
                    return ziggurat_nor_r + xx, s
        else:
            u, s = next_double(s)
            if (_FI[idx - 1] - _FI[idx]) * u + _FI[idx] < np.exp(-0.5 * x * x):
                return x, s
        x, accepted, idx, rabs, s = _ziggurat_candidate(s)
        if accepted:
            return x, s


@njit(cache=True, inline="always")
def standard_normal(s):
    """NumPy's ziggurat standard normal (``random_standard_normal``); returns (x, new s)."""
    x, accepted, idx, rabs, s = _ziggurat_candidate(s)
    if accepted:
        return x, s
    return _ziggurat_slow(x, idx, rabs, s)


@njit(cache=True)
def _sum_of_squares_block(z, lo, n):
    """Σ z[lo:lo+n]² for n ≤ 128 in the order of NumPy's pairwise_sum leaf (8 accumulators)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += z[lo + i] * z[lo + i]
        return res
    r0 = z[lo] * z[lo]
    r1 = z[lo + 1] * z[lo + 1]
    r2 = z[lo + 2] * z[lo + 2]
    r3 = z[lo + 3] * z[lo + 3]
    r4 = z[lo + 4] * z[lo + 4]
    r5 = z[lo + 5] * z[lo + 5]
    r6 = z[lo + 6] * z[lo + 6]
    r7 = z[lo + 7] * z[lo + 7]
    m = n - n % 8
    for i in range(8, m, 8):
        r0 += z[lo + i] * z[lo + i]
        r1 += z[lo + i + 1] * z[lo + i + 1]
        r2 += z[lo + i + 2] * z[lo + i + 2]
        r3 += z[lo + i + 3] * z[lo + i + 3]
        r4 += z[lo + i + 4] * z[lo + i + 4]
        r5 += z[lo + i + 5] * z[lo + i + 5]
        r6 += z[lo + i + 6] * z[lo + i + 6]
        r7 += z[lo + i + 7] * z[lo + i + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(m, n):
        res += z[lo + i] * z[lo + i]
    return res


@njit(cache=True)
def _pairwise_sum_of_squares(z, n):
    """Σ z[:n]², summed in NumPy's pairwise order (``add.reduce`` over a contiguous row).

    NumPy recurses on halves (rounded down to a multiple of 8) above 128 terms;
    here the recursion is an explicit stack, because a recursive function cannot be
    loaded back from Numba's on-disk cache (it crashes).
    """
    if n <= 128:
        return _sum_of_squares_block(z, 0, n)
    los = np.empty(64, dtype=np.int64)
    ns = np.empty(64, dtype=np.int64)
    states = np.zeros(64, dtype=np.int64)  # 0: not split yet, 1: left pending, 2: right pending
    lefts = np.empty(64)
    top = 0
    los[0], ns[0] = 0, n
    while True:
        if ns[top] > 128:  # split, descend into the left half
            half = ns[top] // 2
            half -= half % 8
            states[top] = 1
            top += 1
            los[top], ns[top], states[top] = los[top - 1], half, 0
            continue
        val = _sum_of_squares_block(z, los[top], ns[top])
        top -= 1
        while top >= 0:  # hand the value up until a right half remains to be done
            if states[top] == 1:
                lefts[top] = val
                states[top] = 2
                half = ns[top] // 2
                half -= half % 8
                top += 1
                los[top], ns[top], states[top] = los[top - 1] + half, ns[top - 1] - half, 0
                break
            val = lefts[top] + val
            top -= 1
        if top < 0:
            return val


@njit(cache=True)
def draw_block(st, block, n_keep, batch_size, scale, sphere_radius, w_star, kind, noise_scale, X, y):
    """Draw one block of `block` batches from the PCG64 state `st`; keep its first `n_keep`.

    X (n_keep, B, d) and y (n_keep, B) receive them (float64 or float32; values are
    computed in float64 and rounded once). scale: √λ per coordinate (Gaussian
    design), unused when sphere_radius > 0 (uniform on the sphere of that radius).
    kind: NOISE_GAUSSIAN / NOISE_UNIFORM (y = x·w* + noise_scale·ε, ε ~ N(0, 1) or
    U(−1, 1)) or LABELS_LOGISTIC (y = ±1 with P(y = 1 | x) = σ(x·w*)).
    """
    d = w_star.shape[0]
    n = block * batch_size
    keep = n_keep * batch_size
    margin = np.empty(keep)
    z = np.empty(d)
    s = (st[0], st[1], st[2], st[3])
    for i in range(n):
        for j in range(d):
            z[j], s = standard_normal(s)
        if i >= keep:
            continue  # drawn only to advance the stream past the block's unkept rows
        t, r = i // batch_size, i % batch_size
        if sphere_radius > 0.0:
            f = sphere_radius / np.sqrt(_pairwise_sum_of_squares(z, d))
            for j in range(d):
                z[j] = z[j] * f
        else:
            for j in range(d):
                z[j] = z[j] * scale[j]
        dot = 0.0
        for j in range(d):
            dot += z[j] * w_star[j]
            X[t, r, j] = z[j]
        margin[i] = dot
    for i in range(n):
        if kind == NOISE_GAUSSIAN:
            u, s = standard_normal(s)
        elif kind == NOISE_UNIFORM:
            u, s = next_double(s)
            u = -1.0 + 2.0 * u
        else:
            u, s = next_double(s)
        if i >= keep:
            continue
        t, r = i // batch_size, i % batch_size
        if kind == LABELS_LOGISTIC:
            p = 0.5 * (1.0 + np.tanh(0.5 * margin[i]))
            y[t, r] = 1.0 if u < p else -1.0
        else:
            y[t, r] = margin[i] + noise_scale * u
