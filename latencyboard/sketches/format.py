"""The binary format of a :class:`~latencyboard.sketches.sketch.Sketch`, and its vectorized codec.

Binary format, version 1 (all little-endian, 50-byte header then a body)::

    u8  version            always first so readers can dispatch on it (FORMAT_VERSION)
    u8  flags              bits 0-1: body integer width 1/2/4/8 bytes; bit 2: sparse;
                           other bits must be 0
    u64 count, u64 zero_count, f64 sum, f64 min, f64 max
    i32 first_key          lowest non-empty bucket key (0 when there are no buckets)
    u32 n                  dense: bucket slots; sparse: non-empty buckets
    dense body:  n counts for keys first_key .. first_key + n - 1 (first and last non-zero)
    sparse body: n (key delta, count) pairs; the first delta is 0 (key = first_key), the
                 others >= 1 (key minus the previous key); every count non-zero

The encoder picks the smaller layout and the narrowest unsigned width that fits. The key
mapping (:mod:`latencyboard.sketches.buckets`: ``ALPHA``, ``MIN_VALUE`` and the
``ceil(log(x) / log(gamma))`` float computation) is part of the format: changing any of them
requires a new version. The decoder checks the structure (version, flags, lengths, counts
summing to ``count``, keys agreeing with ``min``/``max``) and rejects violations with
``ValueError``; it carries no checksum, so a bit flip inside a float field goes undetected.

The decoder takes many blobs at once and lays their fields and buckets side by side
(:class:`Parts`) with a fixed number of numpy operations, for ``Sketch.from_bytes``,
``merge_many`` (:mod:`latencyboard.sketches.sketch`) and ``SketchBatch``
(:mod:`latencyboard.sketches.batch`) to sum up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, NamedTuple

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.buckets import (
    MAX_KEY,
    MIN_KEY,
    MIN_VALUE,
    CountArray,
    FloatArray,
    IntArray,
    KeyArray,
    bucket_keys,
)

__all__ = ["FORMAT_VERSION", "Parts", "Runs", "decode", "decode_blobs", "encode", "joined"]

FORMAT_VERSION: Final = 1
"""Leading byte of :meth:`Sketch.to_bytes` output."""

_HEADER: Final = np.dtype(
    [
        ("version", "u1"),
        ("flags", "u1"),
        ("count", "<u8"),
        ("zero_count", "<u8"),
        ("sum", "<f8"),
        ("min", "<f8"),
        ("max", "<f8"),
        ("first_key", "<i4"),
        ("n", "<u4"),
    ]
)
_HEADER_SIZE: Final = _HEADER.itemsize
_WIDTH_MASK: Final = 0b011
_SPARSE_FLAG: Final = 0b100
_WIDTH_DTYPES: Final = (np.dtype("<u1"), np.dtype("<u2"), np.dtype("<u4"), np.dtype("<u8"))
# Counts are int64 in memory; anything at or above this in a blob cannot be genuine.
_COUNT_LIMIT: Final = 2**63
# Decoded counts are int32 below this many values in a batch (a margin under 2**31 for the
# float64 sum that decides it).
_NARROW_TOTAL: Final = 2**31 - 2**20


def _width_code(largest: int) -> int:
    """Index into ``_WIDTH_DTYPES`` of the narrowest unsigned type holding ``largest``."""
    return 0 if largest < 2**8 else 1 if largest < 2**16 else 2 if largest < 2**32 else 3


def encode(
    count: int,
    zero_count: int,
    total: float,
    lowest: float,
    highest: float,
    offset: int,
    counts: IntArray,
) -> bytes:
    """Serialize a sketch to the compact version-1 format: its exact fields and its bucket
    counts, ``counts[i]`` for key ``offset + i`` (the first and last non-zero, or none)."""
    nonzero = np.flatnonzero(counts)
    flags, first_key, n, body = 0, 0, 0, b""
    if nonzero.size:
        first_key = offset
        max_count = int(counts.max())
        deltas = np.diff(nonzero, prepend=nonzero[0])
        dense_code = _width_code(max_count)
        sparse_code = _width_code(max(max_count, int(deltas.max())))
        dense_size = counts.size << dense_code
        sparse_size = 2 * nonzero.size << sparse_code
        if sparse_size < dense_size:
            flags, n = _SPARSE_FLAG | sparse_code, nonzero.size
            pairs = np.empty((nonzero.size, 2), dtype=_WIDTH_DTYPES[sparse_code])
            pairs[:, 0], pairs[:, 1] = deltas, counts[nonzero]
            body = pairs.tobytes()
        else:
            flags, n = dense_code, counts.size
            body = counts.astype(_WIDTH_DTYPES[dense_code]).tobytes()
    header = np.array(
        [
            (
                FORMAT_VERSION,
                flags,
                count,
                zero_count,
                total,
                lowest,
                highest,
                first_key,
                n,
            )
        ],
        dtype=_HEADER,
    )
    return header.tobytes() + body


class Parts(NamedTuple):
    """Fields of many sketches laid side by side, ready to be summed into one."""

    value_count: IntArray
    zero_count: IntArray
    sum: FloatArray
    min: FloatArray
    max: FloatArray
    keys: KeyArray  # one entry per bucket of every sketch
    bucket_counts: CountArray


def _reject(bad: npt.NDArray[np.bool_], positions: IntArray | None, reason: str) -> None:
    """Raise ValueError naming the first blob flagged in ``bad``."""
    # count_nonzero has a third of any()'s call overhead, which dominates for a single blob.
    if np.count_nonzero(bad):
        where = "" if positions is None else f" (item {positions[int(np.argmax(bad))]})"
        raise ValueError(f"invalid sketch blob{where}: {reason}")


def _reject_subset(
    bad: npt.NDArray[np.bool_],
    chosen: IntArray,
    sizes: IntArray | None,
    blob_count: int,
    positions: IntArray | None,
    reason: str,
) -> None:
    """:func:`_reject` for flags over the ``chosen`` blobs, or over their buckets when each
    blob's bucket count is given in ``sizes`` (owners are only worked out on failure)."""
    if np.count_nonzero(bad):
        owners = chosen if sizes is None else np.repeat(chosen, sizes)
        per_blob = np.zeros(blob_count, dtype=bool)
        per_blob[owners[bad]] = True
        _reject(per_blob, positions, reason)


def decode_blobs(blobs: Sequence[bytes], positions: IntArray | None) -> Parts:
    """Decode and validate many version-1 blobs with a fixed number of numpy operations.

    The only Python work per blob is slicing it into header and body. ``positions`` maps
    each blob to its index in the caller's input, for error messages.
    """
    return decode(*joined(blobs), positions, narrow_counts=False)[0]


def joined(blobs: Sequence[bytes]) -> tuple[bytes, IntArray]:
    """The blobs end to end in one buffer, and their lengths."""
    return b"".join(blobs), np.fromiter(map(len, blobs), np.int64, len(blobs))


class Runs(NamedTuple):
    """Where each blob's buckets lie in the decoded arrays: one key-ordered run per blob
    with buckets (the runs are not in blob order)."""

    first_bucket: IntArray  # per blob: index of its first bucket (0 without buckets)
    size: IntArray  # per blob: its number of buckets
    first_key: IntArray  # per blob: its lowest bucket key (0 without buckets)


_HEADER_BYTES: Final = np.arange(_HEADER_SIZE, dtype=np.int64)


def decode(
    data: bytes | memoryview,
    lengths: IntArray,
    positions: IntArray | None,
    *,
    narrow_counts: bool,
) -> tuple[Parts, Runs]:
    """:func:`decode_blobs` of blobs laid end to end in ``data`` (``lengths[i]`` bytes
    each, at least one blob), and where each blob's buckets went. ``narrow_counts`` allows
    int32 bucket counts (see below)."""
    blob_count = lengths.size
    raw = np.frombuffer(data, dtype=np.uint8)
    _reject(lengths == 0, positions, "empty")
    starts = np.cumsum(lengths) - lengths
    versions = raw[starts]
    bad_version = versions != FORMAT_VERSION
    if bad_version.any():
        version = int(versions[np.argmax(bad_version)])
        _reject(bad_version, positions, f"unsupported format version {version}")
    _reject(lengths < _HEADER_SIZE, positions, f"truncated: header needs {_HEADER_SIZE} bytes")
    header = raw[(starts[:, None] + _HEADER_BYTES).ravel()].view(_HEADER)

    flags = header["flags"].astype(np.int64)
    _reject(flags & ~(_WIDTH_MASK | _SPARSE_FLAG) != 0, positions, "unknown flag bits")
    code, sparse = flags & _WIDTH_MASK, (flags & _SPARSE_FLAG) != 0
    n = header["n"].astype(np.int64)
    body_elements = np.where(sparse, 2 * n, n)
    _reject(lengths - _HEADER_SIZE != body_elements << code, positions, "truncated or over-long")

    raw_count, raw_zero = header["count"], header["zero_count"]
    _reject((raw_count >= _COUNT_LIMIT) | (raw_zero > raw_count), positions, "bad count")
    count, zero = raw_count.astype(np.int64), raw_zero.astype(np.int64)
    total, low, high = header["sum"], header["min"], header["max"]
    first_key = header["first_key"].astype(np.int64)
    empty = count == 0
    _reject(
        empty & ((n != 0) | (total != 0.0) | ~np.isnan(low) | ~np.isnan(high)),
        positions,
        "empty sketch with data",
    )
    _reject(~empty & ~((low >= 0.0) & (low <= high) & (high < math.inf)), positions, "bad min/max")
    _reject(~empty & ~(total >= 0.0), positions, "bad sum")
    _reject((n == 0) != (count == zero), positions, "bucket presence disagrees with counts")
    # Where the extremes fall must agree with the zero bucket and the outermost keys.
    _reject((zero > 0) != (low < MIN_VALUE), positions, "min disagrees with zero_count")
    has_buckets = n > 0
    _reject(~empty & (has_buckets != (high >= MIN_VALUE)), positions, "max disagrees with buckets")
    min_keys = bucket_keys(np.where(has_buckets & (zero == 0), low, MIN_VALUE))
    _reject(has_buckets & (zero == 0) & (min_keys != first_key), positions, "min outside buckets")
    _reject(has_buckets & (first_key < MIN_KEY), positions, "bucket key below the minimum")

    # Every layout's buckets are written straight into their slice of the outputs: large
    # temporaries and a final concatenation cost more than the arithmetic here, and so does
    # every extra pass over the buckets (a week of hourly rows holds ~200 k).
    bucket_total = int(n[has_buckets].sum())
    # Keys lie within [MIN_KEY, MAX_KEY]: int32 halves the memory to fill (page faults).
    all_keys = np.empty(bucket_total, dtype=np.int32)
    # So do counts, for a SketchBatch, when the whole batch holds fewer than 2**31 values
    # (no bucket of a valid blob holds more than its blob), and then so do the running
    # counts over them. merge_many adds the counts into int64 at once.
    narrow = narrow_counts and float(count[has_buckets].sum(dtype=np.float64)) < _NARROW_TOTAL
    all_counts: CountArray = np.empty(bucket_total, dtype=np.int32 if narrow else np.int64)
    first_buckets = np.zeros(blob_count, dtype=np.int64)
    view = data if isinstance(data, bytes) else memoryview(data)
    done = 0
    layouts = set(zip(sparse[has_buckets].tolist(), code[has_buckets].tolist(), strict=True))
    for is_sparse, width in sorted(layouts):
        chosen = np.flatnonzero(has_buckets & (sparse == is_sparse) & (code == width))
        sizes = n[chosen]
        body_starts = (starts[chosen] + _HEADER_SIZE).tolist()
        body_ends = (starts[chosen] + lengths[chosen]).tolist()
        body: npt.NDArray[np.unsignedinteger] = np.frombuffer(
            b"".join([view[a:b] for a, b in zip(body_starts, body_ends, strict=True)]),
            dtype=_WIDTH_DTYPES[width],
        )
        first_bucket = np.cumsum(sizes) - sizes
        last_bucket = first_bucket + sizes - 1
        end = done + int(first_bucket[-1] + sizes[-1])
        keys = all_keys[done:end]
        if is_sparse:
            # (delta, count) pairs, a blob's first delta 0: its keys are a running sum of the
            # deltas from its first key.
            deltas, counts = body[0::2], body[1::2]
            # Checked with reductions; which blob is at fault is only worked out on
            # failure. Zero deltas exactly at the blobs' first buckets, and no delta larger
            # than any two keys can be apart.
            if (
                deltas.size - np.count_nonzero(deltas) != sizes.size
                or np.count_nonzero(deltas[first_bucket])
                or (width > 0 and int(deltas.max()) > MAX_KEY - MIN_KEY)
            ):
                starts_run = np.zeros(counts.size, dtype=bool)
                starts_run[first_bucket] = True
                _reject_subset(
                    ((deltas == 0) != starts_run) | (deltas > MAX_KEY - MIN_KEY),
                    chosen,
                    sizes,
                    blob_count,
                    positions,
                    "bucket keys not strictly increasing",
                )
            if np.count_nonzero(counts) != counts.size:
                _reject_subset(
                    counts == 0, chosen, sizes, blob_count, positions, "empty sparse bucket"
                )
            keys[...] = deltas  # bounded just above
            # Each blob's last key: its first key plus its deltas (summed in int64, exact).
            last_keys = first_key[chosen] + np.add.reduceat(keys, first_bucket, dtype=np.int64)
        else:
            counts = body
            _reject_subset(
                (counts[first_bucket] == 0) | (counts[last_bucket] == 0),
                chosen,
                None,
                blob_count,
                positions,
                "empty bucket at the edge of a dense range",
            )
            keys.fill(1)
            last_keys = first_key[chosen] + sizes - 1
        # Each blob's buckets must end at the key of its max. Checked on the exact last keys:
        # then every key of a valid blob lies between its first and its last, so within
        # int32, and any invalid blob fails the whole batch whatever its keys came to.
        _reject_subset(
            last_keys != bucket_keys(high[chosen]),
            chosen,
            None,
            blob_count,
            positions,
            "max outside buckets",
        )
        # The keys are one running sum of the steps between them (the deltas, or 1), each
        # blob's first step going from the previous blob's last key to its own first key:
        # no temporary as large as the buckets (their page faults cost more than the sums).
        jumps = first_key[chosen]
        jumps[1:] -= last_keys[:-1]
        keys[first_bucket] = jumps
        np.cumsum(keys, dtype=np.int32, out=keys)
        if width == len(_WIDTH_DTYPES) - 1:  # only 8-byte counts can reach the limit
            _reject_subset(
                counts >= _COUNT_LIMIT,
                chosen,
                sizes,
                blob_count,
                positions,
                "bucket count too large",
            )
        if narrow and width >= 2:  # 4- and 8-byte counts may not fit
            _reject_subset(
                counts > _NARROW_TOTAL,
                chosen,
                sizes,
                blob_count,
                positions,
                "bucket counts do not add up to count",  # one is more than the whole batch
            )
        signed_counts = all_counts[done:end]
        signed_counts[...] = counts
        _reject_subset(
            np.add.reduceat(signed_counts, first_bucket, dtype=np.int64)
            != count[chosen] - zero[chosen],
            chosen,
            None,
            blob_count,
            positions,
            "bucket counts do not add up to count",
        )
        first_buckets[chosen] = done + first_bucket
        done = end
    parts = Parts(
        count,
        zero,
        total.astype(np.float64),
        low.astype(np.float64),
        high.astype(np.float64),
        all_keys,
        all_counts,
    )
    return parts, Runs(first_buckets, np.where(has_buckets, n, 0), first_key)
