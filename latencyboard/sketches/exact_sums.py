"""Exact per-group sums of non-negative floats, rounded once, with a fixed number of numpy
operations (for the ``sum`` of :class:`~latencyboard.sketches.batch.GroupSummaries`)."""

from __future__ import annotations

import math
from typing import Final

import numpy as np

from latencyboard.sketches.buckets import FloatArray, IntArray

__all__ = ["exact_sums"]

_LIMB_BITS: Final = 32
_LIMB_MASK: Final = (1 << _LIMB_BITS) - 1
# Non-negative finite floats are integer multiples of the smallest subnormal, 2**-1074.
_SUBNORMAL_EXPONENT: Final = -1074


def exact_sums(values: FloatArray, groups: IntArray, group_count: int) -> FloatArray:
    """Per group, the exact sum of its ``values`` (each >= 0 or +inf) rounded once to
    nearest-even: ``math.fsum``, except +inf for an inf input or a sum beyond float64.

    A group of one value sums to that value (+0.0 for -0.0, as for every sum of zeros); the
    others go through :func:`_fixed_point_sums`.
    """
    result = np.zeros(group_count)
    if not values.size:
        return result
    alone = np.bincount(groups, minlength=group_count)[groups] == 1
    result[groups[alone]] = values[alone] + 0.0
    if not alone.all():
        shared = ~alone
        ids, compact = np.unique(groups[shared], return_inverse=True)
        result[ids] = _fixed_point_sums(values[shared], compact, ids.size)
    return result


def _fixed_point_sums(values: FloatArray, groups: IntArray, group_count: int) -> FloatArray:
    """:func:`exact_sums` of any groups, by fixed-point arithmetic.

    Each finite value is an integer ``m * 2**shift`` times 2**-1074 with ``m < 2**53``; it
    is added exactly, 32 bits at a time, into int64 limbs of a fixed-point accumulator (one
    row per group, columns spanning only the exponents present), carries are propagated,
    and the top 62 bits of each total plus a sticky bit for the rest are rounded by one
    int64 -> float64 conversion and scaled by a power of two. Exact for fewer than 2**30
    values per group.
    """
    if not values.size:
        return np.zeros(group_count)
    finite = np.isfinite(values)
    fraction, exponent = np.frexp(np.where(finite, values, 0.0))
    mantissa = (fraction * 2.0**53).astype(np.int64)
    shift = exponent.astype(np.int64) - 53 - _SUBNORMAL_EXPONENT
    # Subnormals: the mantissa then has trailing zeros that make up for the negative shift.
    mantissa >>= np.maximum(-shift, 0)
    np.maximum(shift, 0, out=shift)
    limb, bit = shift >> 5, shift & 31
    low_part = (mantissa & _LIMB_MASK) << bit  # < 2**63
    high_part = (mantissa >> _LIMB_BITS) << bit  # < 2**52
    first_limb = int(limb.min())
    # Columns: two zero limbs (so that three limbs can be read under any top limb), the
    # limbs from first_limb to the highest one, the two its mantissas spill into, and one
    # more for the carries.
    width = 2 + int(limb.max()) - first_limb + 1 + 2 + 1
    acc = np.zeros((group_count, width), dtype=np.int64)
    column = limb - first_limb + 2
    flat = acc.reshape(-1)
    row = groups * width + column
    np.add.at(flat, row, low_part & _LIMB_MASK)
    np.add.at(flat, row + 1, (low_part >> _LIMB_BITS) + (high_part & _LIMB_MASK))
    np.add.at(flat, row + 2, high_part >> _LIMB_BITS)
    for index in range(2, width - 1):
        acc[:, index + 1] += acc[:, index] >> _LIMB_BITS
        acc[:, index] &= _LIMB_MASK

    nonzero = acc != 0
    top = width - 1 - np.argmax(nonzero[:, ::-1], axis=1)  # highest non-zero limb
    rows = np.arange(group_count)
    x2, x1, x0 = acc[rows, top], acc[rows, top - 1], acc[rows, top - 2]
    # The total is x2 x1 x0 (96 bits, x2 has p >= 1 of them) followed by lower limbs.
    p = np.frexp(x2.astype(np.float64))[1].astype(np.int64)
    # Keep the top 62 bits: x2 x1 x0 shifted right by p + 2.
    left, right = np.maximum(30 - p, 0), np.maximum(p - 30, 0)
    head = (x2 << (62 - p)) | ((x1 << left) >> right) | (x0 >> (p + 2))
    lost = ((x1 & ((1 << right) - 1)) != 0) | ((x0 & ((1 << (p + 2)) - 1)) != 0)
    # ... and any non-zero limb below x0.
    kept = (x2 != 0).astype(np.int64) + (x1 != 0) + (x0 != 0)
    lost |= np.count_nonzero(nonzero, axis=1) > kept
    # A sticky bit below the rounding position makes one rounding of head correct.
    head |= lost
    scale = p + 2 + _LIMB_BITS * (top - 2 - 2 + first_limb) + _SUBNORMAL_EXPONENT
    with np.errstate(over="ignore"):
        result: FloatArray = np.ldexp(head.astype(np.float64), scale)
    result[~nonzero.any(axis=1)] = 0.0
    infinite = np.zeros(group_count, dtype=bool)
    infinite[groups[~finite]] = True
    result[infinite] = math.inf
    return result
