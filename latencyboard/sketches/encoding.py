"""Many sketches serialized at once, byte for byte as :func:`~latencyboard.sketches.format.encode`
writes each (pure: numpy).

A fold writes hundreds of thousands of rows, each with a sketch of a few buckets: encoding them
one by one costs ~24 µs of numpy call overhead each, most of a fold's time. :func:`encode_many`
picks every blob's layout and width and writes all headers and bodies into one buffer with a
fixed number of numpy operations; the only Python work per sketch is slicing its blob out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from latencyboard.sketches.buckets import FloatArray, IntArray
from latencyboard.sketches.format import (
    _HEADER,
    _HEADER_SIZE,
    _SPARSE_FLAG,
    _WIDTH_DTYPES,
    FORMAT_VERSION,
)

__all__ = ["encode_many"]

# Largest values of each width but the last: the width code of x is how many of these x
# reaches (format._width_code, vectorized).
_WIDTH_LIMITS: Final = np.array([2**8, 2**16, 2**32], dtype=np.int64)
_HEADER_BYTES: Final = np.arange(_HEADER_SIZE, dtype=np.int64)


def encode_many(
    count: IntArray,
    zero_count: IntArray,
    total: FloatArray,
    lowest: FloatArray,
    highest: FloatArray,
    offset: IntArray,
    counts: Sequence[IntArray],
) -> list[bytes]:
    """``[encode(*fields of sketch i) for each i]``: one entry per sketch in each argument,
    ``counts[i]`` its int64 bucket counts for keys ``offset[i], offset[i] + 1, …`` (first and
    last non-zero, or none)."""
    sketches = count.size
    if sketches == 0:
        return []
    sizes = np.fromiter(map(len, counts), np.int64, sketches)
    flat = np.concatenate(counts).astype(np.int64, copy=False)
    bucket_start = np.cumsum(sizes) - sizes
    nonzero = np.flatnonzero(flat)
    # Sparse sketches span many empty buckets: only the non-empty ones are looked at singly.
    nonzero_owner = np.searchsorted(bucket_start, nonzero, side="right") - 1
    filled = np.bincount(nonzero_owner, minlength=sketches)
    has = filled > 0
    first_filled = np.cumsum(filled) - filled
    # Sparse layout: the step from each non-empty bucket to the previous one of its sketch.
    local = nonzero - bucket_start[nonzero_owner]
    deltas = np.empty_like(local)
    if local.size:
        deltas[0] = 0
        np.subtract(local[1:], local[:-1], out=deltas[1:])
        deltas[first_filled[has]] = 0
    largest = np.zeros(sketches, dtype=np.int64)
    largest_delta = np.zeros(sketches, dtype=np.int64)
    if has.any():
        largest[has] = np.maximum.reduceat(flat, bucket_start[has])
        largest_delta[has] = np.maximum.reduceat(deltas, first_filled[has])
    dense_code = np.searchsorted(_WIDTH_LIMITS, largest, side="right")
    sparse_code = np.searchsorted(_WIDTH_LIMITS, np.maximum(largest, largest_delta), side="right")
    dense_bytes = sizes << dense_code
    sparse_bytes = 2 * filled << sparse_code
    sparse = has & (sparse_bytes < dense_bytes)
    code = np.where(sparse, sparse_code, dense_code)
    body_bytes = np.where(sparse, sparse_bytes, np.where(has, dense_bytes, 0))

    header = np.zeros(sketches, dtype=_HEADER)
    header["version"] = FORMAT_VERSION
    header["flags"] = np.where(has, np.where(sparse, _SPARSE_FLAG | code, code), 0)
    header["count"] = count
    header["zero_count"] = zero_count
    header["sum"] = total
    header["min"] = lowest
    header["max"] = highest
    header["first_key"] = np.where(has, offset, 0)
    header["n"] = np.where(sparse, filled, np.where(has, sizes, 0))

    lengths = _HEADER_SIZE + body_bytes
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = np.empty(int(ends[-1]), dtype=np.uint8)
    out[(starts[:, None] + _HEADER_BYTES).ravel()] = header.view(np.uint8)
    for is_sparse, width in sorted(set(zip(sparse[has].tolist(), code[has].tolist(), strict=True))):
        chosen = np.flatnonzero(has & (sparse == is_sparse) & (code == width))
        if is_sparse:
            index = _runs(first_filled[chosen], filled[chosen])
            pairs = np.empty((index.size, 2), dtype=_WIDTH_DTYPES[width])
            pairs[:, 0], pairs[:, 1] = deltas[index], flat[nonzero[index]]
            body = pairs.view(np.uint8).ravel()
        else:
            body = flat[_runs(bucket_start[chosen], sizes[chosen])].astype(_WIDTH_DTYPES[width])
            body = body.view(np.uint8)
        out[_runs(starts[chosen] + _HEADER_SIZE, body_bytes[chosen])] = body
    data = out.tobytes()
    return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _runs(firsts: IntArray, sizes: IntArray) -> IntArray:
    """``firsts[0], firsts[0] + 1, …`` (``sizes[0]`` of them), then the same for each next
    run, as one index array."""
    shift = firsts - (np.cumsum(sizes) - sizes)
    result: IntArray = np.repeat(shift, sizes) + np.arange(int(sizes.sum()))
    return result
