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
(:func:`merge_many`), per-group construction (:func:`sketches_by_group`) and multi-quantile
queries do a fixed number of numpy operations. There is never a Python loop per value or per
bucket, only per sketch taken in or handed out (a type check, a slice, an object).

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
from collections.abc import Iterable, Sequence
from typing import Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = [
    "ALPHA",
    "FORMAT_VERSION",
    "GAMMA",
    "MIN_VALUE",
    "RELATIVE_ERROR",
    "QuantileMethod",
    "Sketch",
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


def _keys(values: FloatArray) -> IntArray:
    """Bucket keys ``ceil(log_gamma(x))`` of values that are all ``>= MIN_VALUE``."""
    logs = np.log(values)
    logs /= _LN_GAMMA
    np.ceil(logs, out=logs)
    return logs.astype(np.int64)


_MIN_KEY: Final = int(_keys(np.array([MIN_VALUE]))[0])
_MAX_KEY: Final = int(_keys(np.array([sys.float_info.max]))[0])


def _estimates(keys: IntArray) -> FloatArray:
    """The value reported for each bucket key: ``2 * gamma**k / (gamma + 1)``."""
    # The topmost keys (values near the float64 maximum) overflow to inf; callers clamp to max.
    with np.errstate(over="ignore"):
        result: FloatArray = np.power(GAMMA, keys.astype(np.float64)) * _ESTIMATE_SCALE
    return result


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
        q = np.asarray(qs, dtype=np.float64)
        if not np.all((q >= 0.0) & (q <= 1.0)):
            raise ValueError(f"quantiles must lie in [0, 1], got {qs!r}")
        if method not in ("lower", "linear"):
            raise ValueError(f"unknown quantile method {method!r}; use 'lower' or 'linear'")
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
        """Decode :meth:`to_bytes` output (any bytes-like object) exactly. Raises ValueError
        for an unknown version, a truncated or over-long blob, or inconsistent contents."""
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
    keys: IntArray  # one entry per bucket of every sketch
    bucket_counts: IntArray


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
    blob_count = len(blobs)
    lengths = np.fromiter(map(len, blobs), np.int64, blob_count)
    _reject(lengths == 0, positions, "empty")
    head_sizes = np.minimum(lengths, _HEADER_SIZE)
    heads = np.frombuffer(b"".join([blob[:_HEADER_SIZE] for blob in blobs]), dtype=np.uint8)
    versions = heads[np.cumsum(head_sizes) - head_sizes]
    bad_version = versions != FORMAT_VERSION
    if bad_version.any():
        version = int(versions[np.argmax(bad_version)])
        _reject(bad_version, positions, f"unsupported format version {version}")
    _reject(lengths < _HEADER_SIZE, positions, f"truncated: header needs {_HEADER_SIZE} bytes")
    header = heads.view(_HEADER)

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

    keys_parts, counts_parts = [], []
    layouts = set(zip(sparse[has_buckets].tolist(), code[has_buckets].tolist(), strict=True))
    for is_sparse, width in sorted(layouts):
        chosen = np.flatnonzero(has_buckets & (sparse == is_sparse) & (code == width))
        sizes = n[chosen]
        body: npt.NDArray[np.unsignedinteger] = np.frombuffer(
            b"".join([blobs[i][_HEADER_SIZE:] for i in chosen.tolist()]),
            dtype=_WIDTH_DTYPES[width],
        )
        first_bucket = np.cumsum(sizes) - sizes
        last_bucket = first_bucket + sizes - 1
        if is_sparse:
            # (delta, count) pairs; the first delta is 0 so that the keys are one running
            # sum per blob, offset by the blob's first key.
            deltas, counts = body[0::2], body[1::2]
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
            _reject_subset(counts == 0, chosen, sizes, blob_count, positions, "empty sparse bucket")
            running = np.cumsum(deltas.astype(np.int64))
            keys = running + np.repeat(first_key[chosen] - running[first_bucket], sizes)
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
            keys = np.repeat(first_key[chosen] - first_bucket, sizes) + np.arange(counts.size)
        _reject_subset(
            counts >= _COUNT_LIMIT, chosen, sizes, blob_count, positions, "bucket count too large"
        )
        signed_counts = counts.astype(np.int64)
        _reject_subset(
            np.add.reduceat(signed_counts, first_bucket) != count[chosen] - zero[chosen],
            chosen,
            None,
            blob_count,
            positions,
            "bucket counts do not add up to count",
        )
        _reject_subset(
            keys[last_bucket] != _keys(high[chosen]),
            chosen,
            None,
            blob_count,
            positions,
            "max outside buckets",
        )
        keys_parts.append(keys)
        counts_parts.append(signed_counts)
    return _Parts(
        count,
        zero,
        total.astype(np.float64),
        low.astype(np.float64),
        high.astype(np.float64),
        np.concatenate(keys_parts) if keys_parts else np.zeros(0, np.int64),
        np.concatenate(counts_parts) if counts_parts else np.zeros(0, np.int64),
    )


def _assemble(parts: _Parts) -> Sketch:
    """Sum side-by-side sketch fields into one new sketch."""
    sketch = Sketch()
    sketch._count = int(parts.value_count.sum())
    if sketch._count == 0:
        return sketch
    sketch._zero_count = int(parts.zero_count.sum())
    sketch._sum = float(parts.sum.sum())
    # fmin/fmax skip the NaN extremes of empty inputs.
    sketch._min = float(np.fmin.reduce(parts.min))
    sketch._max = float(np.fmax.reduce(parts.max))
    if parts.keys.size:
        low = int(parts.keys.min())
        counts = np.zeros(int(parts.keys.max()) - low + 1, dtype=np.int64)
        np.add.at(counts, parts.keys - low, parts.bucket_counts)
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
