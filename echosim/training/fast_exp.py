"""exp and the logistic function σ without a library call, so that LLVM vectorises loops over them.

Numba lowers `np.exp` to a call into libm, which keeps a loop scalar (SVML, which
would vectorise it, is not in every Numba install). Here exp(x) = 2ⁿ·exp(r) with
n = round(x·log₂e) and r = x − n·ln2_hi − n·ln2_lo, |r| ≤ ln2/2 (Cody–Waite: ln 2
split in two so that n·ln2_hi is exact); exp(r) is its Taylor polynomial of degree
13 (truncation error below 5e-18); 2ⁿ is built from exponent bits, as two factors
2ᵃ·2ᵇ so that subnormal results are rounded once and |x| up to 750 needs no branch.
Measured: exp within 1 ulp of `np.exp` on [−800, 800], σ within 2 ulp of the exact
value (tests/training/test_fast_exp.py).

These functions are compiled without reassociation: it would fold (x·log₂e + C) − C
to x·log₂e and n·ln2_hi + n·ln2_lo to n·ln2, undoing the rounding and the split.
They keep that order when LLVM inlines them into a `fastmath` kernel (the flags are
per instruction); do not make them Numba-inline (`inline="always"`), which would
compile their body with the caller's flags.
"""

import math

from numba import njit, types
from numba.extending import intrinsic

_FASTMATH = {"contract"}  # fused multiply-adds only
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 with its last 32 bits zero: n·_LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10  # ln 2 − _LN2_HI
_ROUNDER = 6755399441055744.0  # 1.5·2⁵²: x + _ROUNDER rounds x to an integer, held in the low bits
_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(14))
_X_MAX = 750.0  # exp(±750) is already inf / 0 in double; clamping keeps 2^a, 2^b normal


def _bitcast(source, target):
    """An intrinsic that reinterprets a `source` value's bits as a `target` (same width)."""

    @intrinsic
    def cast(typingctx, x):
        if x != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(target))

        return target(source), codegen

    return cast


_bits = _bitcast(types.float64, types.int64)  # the IEEE bits of a float64
_from_bits = _bitcast(types.int64, types.float64)  # the float64 of the IEEE bits i


@njit(cache=True, fastmath=_FASTMATH)
def exp(x):
    """e**x for a float (float64 arithmetic): 0 below −745.2, inf above 709.8, NaN for NaN."""
    x = -_X_MAX if x < -_X_MAX else x  # written so that NaN passes through
    x = _X_MAX if x > _X_MAX else x
    shifted = x * _LOG2E + _ROUNDER
    n = shifted - _ROUNDER
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    p = _TAYLOR[13]
    for k in range(12, -1, -1):  # Horner; LLVM unrolls it and folds the constants
        p = p * r + _TAYLOR[k]
    a = _bits(n * 0.5 + _ROUNDER) - _bits(_ROUNDER)  # about n/2, so that 2ᵃ and 2ⁿ⁻ᵃ are normal
    b = _bits(shifted) - _bits(_ROUNDER) - a
    return p * _from_bits((a + 1023) << 52) * _from_bits((b + 1023) << 52)


@njit(cache=True, fastmath=_FASTMATH, error_model="numpy")  # no zero-division check: 1 + e ≥ 1
def sigmoid(x):
    """σ(x) = 1 / (1 + e^{−x}), from e^{−|x|} ≤ 1 so that nothing overflows; one rounded division."""
    e = exp(-abs(x))
    return (1.0 if x > 0.0 else e) / (1.0 + e)
