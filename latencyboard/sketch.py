"""Mergeable log-bucket quantile sketch for latencies in milliseconds (DDSketch-style).

A value ``x >= MIN_VALUE`` lands in bucket ``key = ceil(log_gamma(x))`` with
``gamma = (1 + ALPHA) / (1 - ALPHA)``, i.e. bucket ``k`` covers ``(gamma**(k-1), gamma**k]``.
A bucket is reported as ``2 * gamma**k / (gamma + 1)``, which is within ``ALPHA`` relative
error of every value the bucket can hold. Values below ``MIN_VALUE`` (1 ns) are counted in a
separate zero bucket reported as ``0.0``. Exact ``count``, ``sum``, ``min`` and ``max`` are kept
alongside, and estimates are clamped to ``[min, max]`` (which can only reduce the error).

Quantile convention (the one DDSketch uses): ``quantile(q)`` estimates the order statistic of
0-based rank ``floor(q * (n - 1))``, i.e. ``np.quantile(values, q, method="lower")``, within
``RELATIVE_ERROR`` for every ``n`` and ``q`` (order statistics below ``MIN_VALUE`` are within
``MIN_VALUE`` in absolute terms instead). ``method="linear"`` interpolates between the
estimates for ranks ``floor(q*(n-1))`` and ``floor(q*(n-1)) + 1`` exactly like numpy's default,
and is then within ``RELATIVE_ERROR`` of ``np.quantile(values, q)``. The two conventions
differ by the gap between neighbouring samples, which can be large in sparse tails or between
the modes of a bimodal window, so compare a figure only with a reference computed under the
same convention. ``q = 0`` and ``q = 1`` return the exact ``min`` and ``max``. An empty
sketch has ``min``, ``max`` and all quantiles ``NaN`` (check ``count == 0`` to tell "no data"
apart).

Everything is vectorized: inserts, merges, bulk merges of serialized blobs
(:func:`merge_many`), per-group construction (:func:`sketches_by_group`), per-group merges
and quantiles of serialized blobs (:func:`group_summaries`, :class:`SketchBatch`: bit for bit
``merge_many`` of each group, as arrays) and multi-quantile queries do a fixed number of numpy
operations. There is never a Python loop per value or per bucket, only per sketch taken in or
handed out (a type check, a slice, an object).

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
mapping (``ALPHA``, ``MIN_VALUE`` and the ``ceil(log(x) / log(gamma))`` float computation) is
part of the format: changing any of them requires a new version. The decoder checks the
structure (version, flags, lengths, counts summing to ``count``, keys agreeing with
``min``/``max``) and rejects violations with ``ValueError``; it carries no checksum, so a bit
flip inside a float field goes undetected.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALPHA",
    "FORMAT_VERSION",
    "GAMMA",
    "MIN_VALUE",
    "RELATIVE_ERROR",
    "GroupSummaries",
    "QuantileMethod",
    "Sketch",
    "SketchBatch",
    "group_summaries",
    "merge_many",
    "sketches_by_group",
]

ALPHA: Final = 0.01
"""Relative accuracy the bucket width is derived from."""

GAMMA: Final = (1.0 + ALPHA) / (1.0 - ALPHA)
"""Ratio between consecutive bucket boundaries."""

RELATIVE_ERROR: Final = ALPHA
"""Bound on ``|estimate - exact| / exact`` for every quantile of values >= ``MIN_VALUE``
(up to float rounding in the key computation, ~1e-15); report it next to each figure."""

MIN_VALUE: Final = 1e-6
"""Values (ms) below this go to the zero bucket and are reported as 0.0 (abs. error < 1 ns)."""

FORMAT_VERSION: Final = 1
"""Leading byte of :meth:`Sketch.to_bytes` output."""

QuantileMethod = Literal["lower", "linear"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.signedinteger[Any]]  # bucket keys: int32 once decoded, else int64
CountArray = npt.NDArray[np.signedinteger[Any]]  # bucket counts: int32 or int64

_LN_GAMMA: Final = math.log(GAMMA)
_ESTIMATE_SCALE: Final = 2.0 / (GAMMA + 1.0)

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


def _keys(values: FloatArray) -> IntArray:
    """Bucket keys ``ceil(log_gamma(x))`` of values that are all ``>= MIN_VALUE``."""
    logs = np.log(values)
    logs /= _LN_GAMMA
    np.ceil(logs, out=logs)
    return logs.astype(np.int64)


_MIN_KEY: Final = int(_keys(np.array([MIN_VALUE]))[0])
_MAX_KEY: Final = int(_keys(np.array([sys.float_info.max]))[0])


# The value reported for every possible bucket key, computed once: a table lookup is faster
# than np.power, and every code path (one sketch or many groups at once) reads the very same
# float for a key, whatever vector width or loop numpy picks for the arrays at hand. The
# topmost keys (values near the float64 maximum) overflow to inf; callers clamp to max.
with np.errstate(over="ignore"):
    _ESTIMATE_TABLE: Final[FloatArray] = (
        np.power(GAMMA, np.arange(_MIN_KEY, _MAX_KEY + 1, dtype=np.float64)) * _ESTIMATE_SCALE
    )


def _estimates(keys: KeyArray) -> FloatArray:
    """The value reported for each bucket key: ``2 * gamma**k / (gamma + 1)``."""
    # Keys of valid sketches always lie in [_MIN_KEY, _MAX_KEY]; clip only guards the lookup.
    result: FloatArray = np.take(_ESTIMATE_TABLE, keys - _MIN_KEY, mode="clip")
    return result


def _levels(qs: Sequence[float] | npt.NDArray[np.floating], method: str) -> FloatArray:
    """``qs`` as a float64 array; ValueError for a level outside [0, 1] or an unknown method."""
    q = np.asarray(qs, dtype=np.float64)
    if not np.all((q >= 0.0) & (q <= 1.0)):
        raise ValueError(f"quantiles must lie in [0, 1], got {qs!r}")
    if method not in ("lower", "linear"):
        raise ValueError(f"unknown quantile method {method!r}; use 'lower' or 'linear'")
    return q


def _as_values(values: npt.ArrayLike) -> tuple[FloatArray, float, float]:
    """Flatten ``values`` to float64 and return it with its min and max.

    Raises ValueError for negative, NaN or infinite values (NaN fails every comparison, so
    checking the extremes covers all three without another pass over the data).
    """
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        return array, math.nan, math.nan
    lowest, highest = float(array.min()), float(array.max())
    if not (lowest >= 0.0 and highest < math.inf):
        raise ValueError(
            f"latency values must be finite and >= 0, got min={lowest!r} max={highest!r}"
        )
    return array, lowest, highest


def _width_code(largest: int) -> int:
    """Index into ``_WIDTH_DTYPES`` of the narrowest unsigned type holding ``largest``."""
    return 0 if largest < 2**8 else 1 if largest < 2**16 else 2 if largest < 2**32 else 3


class Sketch:
    """A mergeable quantile sketch of latencies (ms) with ``RELATIVE_ERROR`` accuracy.

    Buckets are held densely from the lowest to the highest non-empty key, so memory is
    8 bytes per key in that range (about 115 buckets per decade of latency).
    """

    __slots__ = ("_count", "_counts", "_max", "_min", "_offset", "_sum", "_zero_count")

    def __init__(self) -> None:
        """Create an empty sketch."""
        self._count = 0
        self._zero_count = 0
        self._sum = 0.0
        self._min = math.nan
        self._max = math.nan
        # _counts[i] counts key _offset + i; its first and last entries are non-zero (or it
        # is empty), so equal contents always mean equal arrays.
        self._offset = 0
        self._counts: IntArray = np.zeros(0, dtype=np.int64)

    @classmethod
    def from_values(cls, values: npt.ArrayLike) -> Sketch:
        """Build a sketch of ``values`` (ms, any shape, each finite and >= 0)."""
        sketch = cls()
        sketch.add(values)
        return sketch

    @property
    def count(self) -> int:
        """Exact number of values added."""
        return self._count

    @property
    def zero_count(self) -> int:
        """Number of values below ``MIN_VALUE`` (the zero bucket)."""
        return self._zero_count

    @property
    def sum(self) -> float:
        """Sum of the values added (float64 rounding; merging may reorder the additions)."""
        return self._sum

    @property
    def min(self) -> float:
        """Exact smallest value, ``NaN`` when empty."""
        return self._min

    @property
    def max(self) -> float:
        """Exact largest value, ``NaN`` when empty."""
        return self._max

    def buckets(self) -> tuple[IntArray, IntArray]:
        """Keys and counts of the non-empty buckets in ascending key order (zero bucket
        excluded; see :attr:`zero_count`)."""
        nonzero = np.flatnonzero(self._counts)
        return nonzero + self._offset, self._counts[nonzero]

    def add(self, values: npt.ArrayLike) -> None:
        """Add latencies in ms (any shape). Raises ValueError, leaving the sketch unchanged,
        if any value is negative, NaN or infinite."""
        array, lowest, highest = _as_values(values)
        if array.size == 0:
            return
        # Latencies are almost never below 1 ns, so skip the masked copy when none are.
        positive = array if lowest >= MIN_VALUE else array[array >= MIN_VALUE]
        if positive.size:
            keys = _keys(positive)
            first = int(keys.min())
            self._add_buckets(first, np.bincount(keys - first))
        self._record(array.size, array.size - positive.size, float(array.sum()), lowest, highest)

    def merge(self, other: Sketch) -> None:
        """Add every value of ``other`` to this sketch (``other`` is not modified)."""
        if other._count == 0:
            return
        if other._counts.size:
            self._add_buckets(other._offset, other._counts)
        self._record(other._count, other._zero_count, other._sum, other._min, other._max)

    def quantile(self, q: float, method: QuantileMethod = "lower") -> float:
        """Estimate quantile ``q`` in [0, 1]; see :meth:`quantiles`."""
        return float(self.quantiles([q], method)[0])

    def quantiles(
        self, qs: Sequence[float] | npt.NDArray[np.floating], method: QuantileMethod = "lower"
    ) -> FloatArray:
        """Estimate several quantiles at once; the result has the shape of ``qs``.

        ``method="lower"`` (default, DDSketch's convention) targets
        ``np.quantile(values, qs, method="lower")``; ``method="linear"`` targets numpy's
        default linear interpolation. Either way each estimate is within ``RELATIVE_ERROR``
        of its target. All ``NaN`` when the sketch is empty. Raises ValueError for ``q``
        outside [0, 1] or an unknown method.
        """
        q = _levels(qs, method)
        if self._count == 0:
            return np.full(q.shape, math.nan)
        rank = q * (self._count - 1)
        lower = np.floor(rank).astype(np.int64)
        result = self._values_at(lower)
        if method == "linear":
            upper = np.minimum(lower + 1, self._count - 1)
            result += (rank - lower) * (self._values_at(upper) - result)
        return result

    def to_bytes(self) -> bytes:
        """Serialize to the compact version-1 format described in the module docstring."""
        nonzero = np.flatnonzero(self._counts)
        flags, first_key, n, body = 0, 0, 0, b""
        if nonzero.size:
            first_key = self._offset
            max_count = int(self._counts.max())
            deltas = np.diff(nonzero, prepend=nonzero[0])
            dense_code = _width_code(max_count)
            sparse_code = _width_code(max(max_count, int(deltas.max())))
            dense_size = self._counts.size << dense_code
            sparse_size = 2 * nonzero.size << sparse_code
            if sparse_size < dense_size:
                flags, n = _SPARSE_FLAG | sparse_code, nonzero.size
                pairs = np.empty((nonzero.size, 2), dtype=_WIDTH_DTYPES[sparse_code])
                pairs[:, 0], pairs[:, 1] = deltas, self._counts[nonzero]
                body = pairs.tobytes()
            else:
                flags, n = dense_code, self._counts.size
                body = self._counts.astype(_WIDTH_DTYPES[dense_code]).tobytes()
        header = np.array(
            [
                (
                    FORMAT_VERSION,
                    flags,
                    self._count,
                    self._zero_count,
                    self._sum,
                    self._min,
                    self._max,
                    first_key,
                    n,
                )
            ],
            dtype=_HEADER,
        )
        return header.tobytes() + body

    @classmethod
    def from_bytes(cls, blob: bytes) -> Sketch:
        """Decode :meth:`to_bytes` output (any bytes-like object) exactly (except that a
        ``-0.0`` min or max reads back as ``0.0``). Raises ValueError for an unknown version,
        a truncated or over-long blob, or inconsistent contents."""
        return _assemble(_decode_blobs([blob], None))

    def __repr__(self) -> str:
        return (
            f"Sketch(count={self._count}, zero_count={self._zero_count}, min={self._min!r}, "
            f"max={self._max!r}, buckets={np.count_nonzero(self._counts)})"
        )

    def _record(
        self, count: int, zero_count: int, total: float, lowest: float, highest: float
    ) -> None:
        if self._count == 0:
            self._min, self._max = lowest, highest
        else:
            self._min, self._max = min(self._min, lowest), max(self._max, highest)
        self._count += count
        self._zero_count += zero_count
        self._sum += total

    def _add_buckets(self, offset: int, counts: IntArray) -> None:
        """Add ``counts`` (for keys ``offset, offset + 1, ...``) into this sketch's buckets."""
        end = offset + counts.size
        if self._counts.size == 0:
            # Copy: ``counts`` may belong to another sketch being merged in.
            self._offset, self._counts = offset, counts.astype(np.int64, copy=True)
            return
        own_end = self._offset + self._counts.size
        low, high = min(self._offset, offset), max(own_end, end)
        if low != self._offset or high != own_end:
            grown = np.zeros(high - low, dtype=np.int64)
            grown[self._offset - low : own_end - low] = self._counts
            self._offset, self._counts = low, grown
        self._counts[offset - low : end - low] += counts

    def _values_at(self, ranks: IntArray) -> FloatArray:
        """Estimates of the order statistics with these 0-based ranks (sketch non-empty)."""
        cumulative = np.cumsum(self._counts)
        # Rank r is the first bucket whose cumulative count exceeds r - zero_count.
        index = np.searchsorted(cumulative, ranks - self._zero_count, side="right")
        result = np.where(ranks < self._zero_count, 0.0, _estimates(index + self._offset))
        np.clip(result, self._min, self._max, out=result)
        result[ranks == 0] = self._min
        result[ranks == self._count - 1] = self._max
        return result


class _Parts(NamedTuple):
    """Fields of many sketches laid side by side, ready to be summed into one."""

    value_count: IntArray
    zero_count: IntArray
    sum: FloatArray
    min: FloatArray
    max: FloatArray
    keys: KeyArray  # one entry per bucket of every sketch
    bucket_counts: CountArray


def _parts_of(sketches: Sequence[Sketch]) -> _Parts:
    """Lay the fields and buckets of (non-empty list of) in-memory sketches side by side."""
    sizes = np.fromiter((s._counts.size for s in sketches), np.int64, len(sketches))
    offsets = np.fromiter((s._offset for s in sketches), np.int64, len(sketches))
    counts = np.concatenate([s._counts for s in sketches])
    # key of element i of sketch j = offsets[j] + (i - start of sketch j in the concatenation)
    keys = np.repeat(offsets - (np.cumsum(sizes) - sizes), sizes) + np.arange(counts.size)
    return _Parts(
        np.fromiter((s._count for s in sketches), np.int64, len(sketches)),
        np.fromiter((s._zero_count for s in sketches), np.int64, len(sketches)),
        np.fromiter((s._sum for s in sketches), np.float64, len(sketches)),
        np.fromiter((s._min for s in sketches), np.float64, len(sketches)),
        np.fromiter((s._max for s in sketches), np.float64, len(sketches)),
        keys,
        counts,
    )


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


def _decode_blobs(blobs: Sequence[bytes], positions: IntArray | None) -> _Parts:
    """Decode and validate many version-1 blobs with a fixed number of numpy operations.

    The only Python work per blob is slicing it into header and body. ``positions`` maps
    each blob to its index in the caller's input, for error messages.
    """
    return _decode(*_joined(blobs), positions, narrow_counts=False)[0]


def _joined(blobs: Sequence[bytes]) -> tuple[bytes, IntArray]:
    """The blobs end to end in one buffer, and their lengths."""
    return b"".join(blobs), np.fromiter(map(len, blobs), np.int64, len(blobs))


class _Runs(NamedTuple):
    """Where each blob's buckets lie in the decoded arrays: one key-ordered run per blob
    with buckets (the runs are not in blob order)."""

    first_bucket: IntArray  # per blob: index of its first bucket (0 without buckets)
    size: IntArray  # per blob: its number of buckets
    first_key: IntArray  # per blob: its lowest bucket key (0 without buckets)


_HEADER_BYTES: Final = np.arange(_HEADER_SIZE, dtype=np.int64)


def _decode(
    data: bytes | memoryview,
    lengths: IntArray,
    positions: IntArray | None,
    *,
    narrow_counts: bool,
) -> tuple[_Parts, _Runs]:
    """:func:`_decode_blobs` of blobs laid end to end in ``data`` (``lengths[i]`` bytes
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
    min_keys = _keys(np.where(has_buckets & (zero == 0), low, MIN_VALUE))
    _reject(has_buckets & (zero == 0) & (min_keys != first_key), positions, "min outside buckets")
    _reject(has_buckets & (first_key < _MIN_KEY), positions, "bucket key below the minimum")

    # Every layout's buckets are written straight into their slice of the outputs: large
    # temporaries and a final concatenation cost more than the arithmetic here, and so does
    # every extra pass over the buckets (a week of hourly rows holds ~200 k).
    bucket_total = int(n[has_buckets].sum())
    # Keys lie within [_MIN_KEY, _MAX_KEY]: int32 halves the memory to fill (page faults).
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
                or (width > 0 and int(deltas.max()) > _MAX_KEY - _MIN_KEY)
            ):
                starts_run = np.zeros(counts.size, dtype=bool)
                starts_run[first_bucket] = True
                _reject_subset(
                    ((deltas == 0) != starts_run) | (deltas > _MAX_KEY - _MIN_KEY),
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
            last_keys != _keys(high[chosen]),
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
    parts = _Parts(
        count,
        zero,
        total.astype(np.float64),
        low.astype(np.float64),
        high.astype(np.float64),
        all_keys,
        all_counts,
    )
    return parts, _Runs(first_buckets, np.where(has_buckets, n, 0), first_key)


def _assemble(parts: _Parts) -> Sketch:
    """Sum side-by-side sketch fields into one new sketch."""
    sketch = Sketch()
    sketch._count = int(parts.value_count.sum())
    if sketch._count == 0:
        return sketch
    sketch._zero_count = int(parts.zero_count.sum())
    sketch._sum = float(parts.sum.sum())
    # fmin/fmax skip the NaN extremes of empty inputs. Which of 0.0 and -0.0 they return
    # depends on the order of the inputs; adding 0.0 turns -0.0 into 0.0 so that the result
    # does not (group_summaries relies on this to match bit for bit).
    sketch._min = float(np.fmin.reduce(parts.min)) + 0.0
    sketch._max = float(np.fmax.reduce(parts.max)) + 0.0
    if parts.keys.size:
        low = int(parts.keys.min())
        counts = np.zeros(int(parts.keys.max()) - low + 1, dtype=np.int64)
        # Same types on both sides: ufunc.at has no fast loop for a cast.
        np.add.at(counts, parts.keys - low, parts.bucket_counts.astype(np.int64, copy=False))
        sketch._offset, sketch._counts = low, counts
    return sketch


def merge_many(items: Iterable[Sketch | bytes]) -> Sketch:
    """Merge any mix of sketches and :meth:`Sketch.to_bytes` blobs into a new sketch.

    Blobs may be any bytes-like object. All blobs are decoded and validated together and all
    buckets summed with one ``np.add.at``; the only Python work per item is a type check
    and, for blobs, two slices. Raises ValueError (naming the item's position) for an
    invalid blob. No items: an empty sketch.
    """
    sketches: list[Sketch] = []
    blobs: list[bytes] = []
    blob_positions: list[int] = []
    for position, item in enumerate(items):
        if isinstance(item, Sketch):
            sketches.append(item)
        else:
            blobs.append(item)
            blob_positions.append(position)
    parts = []
    if blobs:
        parts.append(_decode_blobs(blobs, np.array(blob_positions, dtype=np.int64)))
    if sketches:
        parts.append(_parts_of(sketches))
    if not parts:
        return Sketch()
    if len(parts) == 1:
        return _assemble(parts[0])
    return _assemble(_Parts(*(np.concatenate(field) for field in zip(*parts, strict=True))))


@dataclass(frozen=True)
class GroupSummaries:
    """What :func:`group_summaries` reports for each group, one entry (row) per group id.

    ``count``, ``zero_count``, ``min``, ``max`` and every quantile are bit for bit those of
    ``merge_many(the group's blobs)``. ``sum`` is the exact sum of the blobs' sums rounded
    once (``math.fsum`` of them, but ``inf`` rather than OverflowError beyond the float64
    range), where ``merge_many`` adds them up in float64 and may be a few ulps off. An empty
    group (no blobs, or only empty sketches) has count 0, sum 0.0 and ``NaN`` min, max and
    quantiles.
    """

    count: IntArray
    zero_count: IntArray
    sum: FloatArray
    min: FloatArray
    max: FloatArray
    quantiles: FloatArray
    """Shape ``(group_count, len(qs))``."""


# Buckets are merged on a dense (group, key) grid when it has at most this many cells per
# bucket (or _DENSE_MIN_CELLS in all), by sorting them otherwise.
_DENSE_CELLS_PER_BUCKET: Final = 8
_DENSE_MIN_CELLS: Final = 1 << 16


class SketchBatch:
    """Many serialized sketches, decoded and validated once, to summarize group by group.

    ``SketchBatch(blobs)`` takes any bytes-like :meth:`Sketch.to_bytes` outputs and raises
    ValueError naming the position of the first invalid one (``(item i)``), like
    :func:`merge_many`. :meth:`group_summaries` can then be called for several groupings of
    the same blobs (say per hour, then per day) without decoding them again.
    """

    __slots__ = ("_cumulative", "_parts", "_runs", "_size")

    def __init__(self, blobs: Sequence[bytes]) -> None:
        self._load(*_joined(blobs))

    @classmethod
    def from_buffer(
        cls, data: bytes | bytearray | memoryview, lengths: npt.ArrayLike
    ) -> SketchBatch:
        """The blobs laid end to end in ``data``, ``lengths[i]`` bytes each: what a database
        hands back for ``string_agg(sketch, '')`` and the ``octet_length`` of each, without
        a Python object per blob. Raises ValueError when the lengths do not add up to the
        size of ``data``, and for invalid blobs as :class:`SketchBatch` does."""
        sizes = np.asarray(lengths)
        if sizes.ndim != 1 or (sizes.size and sizes.dtype.kind not in "iu"):
            raise ValueError(f"lengths must be a 1-D array of integers, got {sizes!r}")
        buffer = memoryview(data).cast("B")
        if sizes.size and sizes.min() < 0:
            raise ValueError(f"lengths must be >= 0, got {int(sizes.min())}")
        if int(sizes.sum()) != buffer.nbytes:
            raise ValueError(
                f"lengths add up to {int(sizes.sum())} bytes, the buffer holds {buffer.nbytes}"
            )
        batch = cls.__new__(cls)
        # Slices of bytes are cheaper than of a memoryview.
        batch._load(data if isinstance(data, bytes) else buffer, sizes.astype(np.int64, copy=False))
        return batch

    def _load(self, data: bytes | memoryview, lengths: IntArray) -> None:
        self._size = lengths.size
        self._parts: _Parts | None = None
        self._runs: _Runs | None = None
        self._cumulative: CountArray | None = None
        if self._size:
            positions = np.arange(self._size, dtype=np.int64)
            self._parts, self._runs = _decode(data, lengths, positions, narrow_counts=True)

    def __len__(self) -> int:
        return self._size

    def group_summaries(
        self,
        group_ids: npt.ArrayLike,
        group_count: int,
        qs: Sequence[float] | npt.NDArray[np.floating],
        method: QuantileMethod = "lower",
    ) -> GroupSummaries:
        """See :func:`group_summaries`; ``group_ids`` has one id per blob of the batch."""
        q = _levels(qs, method).ravel()
        groups = self._group_ids(group_ids, group_count)
        count = np.zeros(group_count, dtype=np.int64)
        zero = np.zeros(group_count, dtype=np.int64)
        low = np.full(group_count, math.nan)
        high = np.full(group_count, math.nan)
        if self._parts is None or self._runs is None:
            empty = np.full((group_count, q.size), math.nan)
            return GroupSummaries(count, zero, np.zeros(group_count), low, high, empty)
        parts = self._parts
        np.add.at(count, groups, parts.value_count)
        np.add.at(zero, groups, parts.zero_count)
        # As in _assemble: fmin/fmax skip the NaN extremes of empty sketches and are applied
        # in input order; + 0.0 turns -0.0 into 0.0.
        np.fmin.at(low, groups, parts.min)
        np.fmax.at(high, groups, parts.max)
        low += 0.0
        high += 0.0
        cells = _GroupCells.merge(groups, parts, self._runs, group_count, self._running_count)
        # Sketch.quantiles and Sketch._values_at, operation for operation, one row per group.
        last_rank = (count - 1)[:, None]
        rank = q * last_rank
        lower = np.floor(rank).astype(np.int64)
        quantiles = cells.values_at(lower, zero, low, high, last_rank)
        if method == "linear":
            upper = np.minimum(lower + 1, last_rank)
            upper_values = cells.values_at(upper, zero, low, high, last_rank)
            quantiles += (rank - lower) * (upper_values - quantiles)
        quantiles[count == 0] = math.nan
        total = _exact_sums(parts.sum, groups, group_count)
        return GroupSummaries(count, zero, total, low, high, quantiles)

    def _running_count(self) -> CountArray:
        """The bucket counts of all decoded runs summed up to each bucket, worked out once,
        in the counts' own type (int32 only below _NARROW_TOTAL values in the batch)."""
        if self._cumulative is None:
            assert self._parts is not None
            counts = self._parts.bucket_counts
            self._cumulative = np.cumsum(counts, dtype=counts.dtype)
        return self._cumulative

    def _group_ids(self, group_ids: npt.ArrayLike, group_count: int) -> IntArray:
        """``group_ids`` checked (one integer per blob, in [0, group_count)) as int64."""
        groups = np.asarray(group_ids)
        if groups.shape != (self._size,):
            raise ValueError(
                f"group_ids must be 1-D with one id per blob, got shape {groups.shape} "
                f"for {self._size} blobs"
            )
        if groups.size and groups.dtype.kind not in "iu":
            raise TypeError(f"group_ids must be integers, got dtype {groups.dtype}")
        if group_count < 0:
            raise ValueError(f"group_count must be >= 0, got {group_count}")
        if groups.size and not (groups.min() >= 0 and groups.max() < group_count):
            raise ValueError(
                f"group ids must lie in [0, {group_count}), got {groups.min()}..{groups.max()}"
            )
        return groups.astype(np.int64, copy=False)


def group_summaries(
    blobs: Sequence[bytes],
    group_ids: npt.ArrayLike,
    group_count: int,
    qs: Sequence[float] | npt.NDArray[np.floating],
    method: QuantileMethod = "lower",
) -> GroupSummaries:
    """Merge serialized sketches group by group and summarize every group, all at once.

    ``blobs[i]`` (any bytes-like :meth:`Sketch.to_bytes` output) belongs to group
    ``group_ids[i]``, an integer in ``[0, group_count)``; a group's blobs need not be
    consecutive and a group may have none. Row ``g`` of the result is
    ``merge_many(blobs of group g)`` summarized: count, zero count, min, max and
    ``quantiles(qs, method)``, bit for bit (``sum`` is exact: see :class:`GroupSummaries`).
    All blobs are decoded and validated in one pass, as by :func:`merge_many`, and merged
    and queried with a fixed number of numpy operations: no Python work per group or
    bucket. To group the same blobs several ways, decode them once with :class:`SketchBatch`.

    Raises ValueError naming the position of an invalid blob (``(item i)``), for group ids
    out of range or not one per blob, for a level outside [0, 1] and for an unknown method;
    TypeError for non-integer group ids.
    """
    return SketchBatch(blobs).group_summaries(group_ids, group_count, qs, method)


@dataclass(frozen=True)
class _Cells:
    """Bucket counts side by side in key-ordered runs, with the running count over them.

    ``starts[g]`` is where group ``g``'s run begins (meaningless for groups without one).
    A cell may hold 0, which searching the running count skips, and cells outside every
    group's run may lie between runs.
    """

    cumulative: CountArray
    keys: KeyArray
    starts: IntArray

    def estimates(self, below: IntArray) -> FloatArray:
        """Per row (group) of ``below``, the estimate of the cell holding each of those
        ranks, counted from the group's first cell."""
        # The running count before a group's first cell: the group's own running count is
        # the global one minus this, so searching the global one for base + r finds the
        # cell that searching the group's own for r would.
        base = np.where(self.starts > 0, self.cumulative[self.starts - 1], 0)
        # In the running count's own type: searching int32 for int64 would copy it to int64.
        wanted = (base[:, None] + below).astype(self.cumulative.dtype, copy=False)
        index = np.searchsorted(self.cumulative, wanted, side="right")
        # Out of range only where the cell is not used (a rank in the zero bucket, a group
        # without buckets or without values).
        np.minimum(index, self.cumulative.size - 1, out=index)
        return _estimates(self.keys[index])


@dataclass(frozen=True)
class _GroupCells:
    """The buckets of each group's blobs summed per key: a group with a single blob with
    buckets reads that blob's run where it was decoded (``decoded``), the others read runs
    merged for them (``merged``, whose starts are those of the groups in ``shared``)."""

    decoded: _Cells
    merged: _Cells | None
    shared: npt.NDArray[np.bool_]

    @classmethod
    def merge(
        cls,
        groups: IntArray,
        parts: _Parts,
        runs: _Runs,
        group_count: int,
        running_count: Callable[[], CountArray],
    ) -> _GroupCells:
        """Sum the bucket counts of blobs that ``groups`` assigns to groups, per (group, key);
        ``running_count`` gives the running count over the decoded runs."""
        has_buckets = runs.size > 0
        # Per blob: how many blobs with buckets its group has (0 when it has none itself).
        sharing = np.bincount(groups[has_buckets], minlength=group_count)[groups] * has_buckets
        # One hour row per bucket of an hourly chart: no merge at all, the common case.
        alone, members = sharing == 1, sharing > 1
        starts = np.zeros(group_count, dtype=np.int64)
        starts[groups[alone]] = runs.first_bucket[alone]
        no_cells = np.zeros(0, dtype=np.int64)
        decoded = _Cells(running_count() if alone.any() else no_cells, parts.keys, starts)
        shared = np.zeros(group_count, dtype=bool)
        shared[groups[members]] = True
        if not members.any():
            return cls(decoded, None, shared)
        keys, counts, merged_starts = _merged_runs(groups, parts, runs, members, group_count)
        return cls(decoded, _Cells(np.cumsum(counts), keys, merged_starts[shared]), shared)

    def values_at(
        self,
        ranks: IntArray,
        zero: IntArray,
        low: FloatArray,
        high: FloatArray,
        last_rank: IntArray,
    ) -> FloatArray:
        """:meth:`Sketch._values_at` of every group at once: ``ranks`` has one row per group;
        the other arguments are per group (``last_rank`` already a column)."""
        below = ranks - zero[:, None]
        estimates = np.zeros(ranks.shape)
        if self.decoded.cumulative.size:
            estimates = self.decoded.estimates(below)
        if self.merged is not None:
            estimates[self.shared] = self.merged.estimates(below[self.shared])
        result: FloatArray = np.where(below < 0, 0.0, estimates)
        # Empty groups have NaN bounds, hence NaN rows; the caller overwrites them anyway.
        np.clip(result, low[:, None], high[:, None], out=result)
        result = np.where(ranks == 0, low[:, None], result)
        return np.where(ranks == last_rank, high[:, None], result)


def _merged_runs(
    groups: IntArray,
    parts: _Parts,
    runs: _Runs,
    members: npt.NDArray[np.bool_],
    group_count: int,
) -> tuple[KeyArray, CountArray, IntArray]:
    """The buckets of the ``members`` blobs summed per (group, key): the cells' keys and
    counts, one key-ordered run per group, and where each group's run starts (meaningless
    for groups without members)."""
    # The members' runs in decoded order, and their buckets: all of them, when every
    # blob with buckets is a member (a summary per series), else gathered.
    blobs = np.flatnonzero(members)
    blobs = blobs[np.argsort(runs.first_bucket[blobs], kind="stable")]
    sizes = runs.size[blobs]
    keys, counts = parts.keys, parts.bucket_counts
    total = int(sizes.sum())
    if total < keys.size:
        offsets = np.cumsum(sizes) - sizes
        index = np.repeat(runs.first_bucket[blobs] - offsets, sizes) + np.arange(total)
        keys, counts = keys[index], counts[index]
    # Each group's key range, from its blobs' first and last keys (the decoder checked
    # that the last one is the key of max).
    blob_groups = groups[blobs]
    lowest = np.full(group_count, _MAX_KEY + 1, dtype=np.int64)
    np.minimum.at(lowest, blob_groups, runs.first_key[blobs])
    highest = np.full(group_count, _MIN_KEY - 1, dtype=np.int64)
    np.maximum.at(highest, blob_groups, _keys(parts.max[blobs]))
    spans = np.maximum(highest - lowest + 1, 0)
    ends = np.cumsum(spans)
    starts = ends - spans
    size = int(ends[-1])
    if size <= max(_DENSE_CELLS_PER_BUCKET * keys.size, _DENSE_MIN_CELLS):
        # Every key from each group's lowest to its highest: key k of group g is cell
        # starts[g] + k - lowest[g].
        shift = starts - lowest
        # The counts' own type (see _NARROW_TOTAL): ufunc.at has no fast loop for a cast.
        grid = np.zeros(size, dtype=counts.dtype)
        # Cell indexes lie in [0, size): int32 halves the memory to fill, as for keys.
        cells = np.repeat(shift[blob_groups].astype(np.int32 if size < 2**30 else np.int64), sizes)
        cells += keys
        np.add.at(grid, cells, counts)
        return np.repeat(-shift, spans) + np.arange(size), grid, starts
    bucket_groups = np.repeat(blob_groups, sizes)
    order = np.lexsort((keys, bucket_groups))
    sorted_groups, sorted_keys = bucket_groups[order], keys[order]
    firsts = np.flatnonzero(
        np.concatenate(
            [
                [True],
                (sorted_groups[1:] != sorted_groups[:-1]) | (sorted_keys[1:] != sorted_keys[:-1]),
            ]
        )
    )
    run_starts = np.searchsorted(sorted_groups[firsts], np.arange(group_count), side="left")
    return sorted_keys[firsts], np.add.reduceat(counts[order], firsts), run_starts


_LIMB_BITS: Final = 32
_LIMB_MASK: Final = (1 << _LIMB_BITS) - 1
# Non-negative finite floats are integer multiples of the smallest subnormal, 2**-1074.
_SUBNORMAL_EXPONENT: Final = -1074


def _exact_sums(values: FloatArray, groups: IntArray, group_count: int) -> FloatArray:
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
    """:func:`_exact_sums` of any groups, by fixed-point arithmetic.

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


def sketches_by_group(group_ids: npt.ArrayLike, values: npt.ArrayLike) -> dict[int, Sketch]:
    """Build one sketch per distinct group id with a fixed number of numpy operations.

    ``group_ids`` (integers) and ``values`` (ms) are parallel 1-D arrays; the only Python
    loop is over the distinct groups, to hand out the sketches. Each result equals
    ``Sketch.from_values(values[group_ids == g])`` except that ``sum`` may differ by float
    rounding (it is accumulated in a different order). Raises ValueError for mismatched
    shapes or invalid values, TypeError for non-integer group ids.
    """
    groups_in = np.asarray(group_ids)
    values_in = np.asarray(values, dtype=np.float64)
    if groups_in.ndim != 1 or groups_in.shape != values_in.shape:
        raise ValueError(
            f"group_ids and values must be 1-D and of equal length, got shapes "
            f"{groups_in.shape} and {values_in.shape}"
        )
    array, _, _ = _as_values(values_in)
    if array.size == 0:
        return {}
    if groups_in.dtype.kind not in "iu":
        raise TypeError(f"group_ids must be integers, got dtype {groups_in.dtype}")
    groups, group_of = np.unique(groups_in, return_inverse=True)
    group_count = groups.size
    counts = np.bincount(group_of, minlength=group_count)
    sums = np.bincount(group_of, weights=array, minlength=group_count)
    lowest = np.full(group_count, math.inf)
    np.minimum.at(lowest, group_of, array)
    highest = np.full(group_count, -math.inf)
    np.maximum.at(highest, group_of, array)

    positive = array >= MIN_VALUE
    keys = _keys(array[positive])
    key_group = group_of[positive]
    zero_counts = counts - np.bincount(key_group, minlength=group_count)
    first_keys = np.full(group_count, _MAX_KEY + 1, dtype=np.int64)
    np.minimum.at(first_keys, key_group, keys)
    last_keys = np.full(group_count, _MIN_KEY - 1, dtype=np.int64)
    np.maximum.at(last_keys, key_group, keys)
    # Each group gets its own slice [first_key, last_key] of one flat bucket array, so the
    # memory used is what the resulting sketches hold anyway (groups without keys get none).
    spans = np.maximum(last_keys - first_keys + 1, 0)
    ends = np.cumsum(spans)
    flat = np.bincount(
        (ends - spans)[key_group] + keys - first_keys[key_group], minlength=int(ends[-1])
    )

    result: dict[int, Sketch] = {}
    # Python scalars up front: indexing numpy arrays element by element costs ~10x more.
    for group, count, zero_count, total, low, high, first, span, end in zip(
        groups.tolist(),
        counts.tolist(),
        zero_counts.tolist(),
        sums.tolist(),
        lowest.tolist(),
        highest.tolist(),
        first_keys.tolist(),
        spans.tolist(),
        ends.tolist(),
        strict=True,
    ):
        sketch = Sketch()
        sketch._count, sketch._zero_count, sketch._sum = count, zero_count, total
        sketch._min, sketch._max = low, high
        if span:
            sketch._offset, sketch._counts = first, flat[end - span : end].copy()
        result[group] = sketch
    return result
