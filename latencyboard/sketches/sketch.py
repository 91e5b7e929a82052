"""Mergeable log-bucket quantile sketch for latencies in milliseconds (DDSketch-style).

Values land in log-spaced buckets (:mod:`latencyboard.sketches.buckets`), each reported within
``RELATIVE_ERROR`` of every value it can hold. Exact ``count``, ``sum``, ``min`` and ``max``
are kept alongside, and estimates are clamped to ``[min, max]`` (which can only reduce the
error).

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
and quantiles of serialized blobs (:mod:`latencyboard.sketches.batch`: bit for bit
``merge_many`` of each group, as arrays) and multi-quantile queries do a fixed number of numpy
operations. There is never a Python loop per value or per bucket, only per sketch taken in or
handed out (a type check, a slice, an object).

:meth:`Sketch.to_bytes` writes the binary format of :mod:`latencyboard.sketches.format`, which
:meth:`Sketch.from_bytes` and :func:`merge_many` read.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.buckets import (
    MAX_KEY,
    MIN_KEY,
    MIN_VALUE,
    FloatArray,
    IntArray,
    bucket_estimates,
    bucket_keys,
)
from latencyboard.sketches.encoding import encode_many
from latencyboard.sketches.format import Parts, decode_blobs, encode

__all__ = [
    "QuantileMethod",
    "Sketch",
    "merge_many",
    "quantile_levels",
    "sketches_by_group",
    "to_bytes_many",
]

QuantileMethod = Literal["lower", "linear"]


def quantile_levels(qs: Sequence[float] | npt.NDArray[np.floating], method: str) -> FloatArray:
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
            keys = bucket_keys(positive)
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
        q = quantile_levels(qs, method)
        if self._count == 0:
            return np.full(q.shape, math.nan)
        rank = q * (self._count - 1)
        lower = np.floor(rank).astype(np.int64)
        result = self._values_at(lower)
        if method == "linear":
            upper = np.minimum(lower + 1, self._count - 1)
            result += (rank - lower) * (self._values_at(upper) - result)
        return result

    def order_statistics(self, ranks: npt.ArrayLike) -> FloatArray:
        """Estimates of the order statistics of these 0-based ranks (each in
        ``[0, count)``), within ``RELATIVE_ERROR`` like every quantile. Raises ValueError
        for a rank out of range, or any rank of an empty sketch."""
        wanted = np.asarray(ranks, dtype=np.int64)
        if wanted.size and not (wanted.min() >= 0 and wanted.max() < self._count):
            raise ValueError(f"ranks must lie in [0, {self._count}), got {ranks!r}")
        return self._values_at(wanted)

    def to_bytes(self) -> bytes:
        """Serialize to the compact version-1 format of :mod:`latencyboard.sketches.format`."""
        return encode(
            self._count,
            self._zero_count,
            self._sum,
            self._min,
            self._max,
            self._offset,
            self._counts,
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> Sketch:
        """Decode :meth:`to_bytes` output (any bytes-like object) exactly (except that a
        ``-0.0`` min or max reads back as ``0.0``). Raises ValueError for an unknown version,
        a truncated or over-long blob, or inconsistent contents."""
        return _assemble(decode_blobs([blob], None))

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
        result = np.where(ranks < self._zero_count, 0.0, bucket_estimates(index + self._offset))
        np.clip(result, self._min, self._max, out=result)
        result[ranks == 0] = self._min
        result[ranks == self._count - 1] = self._max
        return result


def _parts_of(sketches: Sequence[Sketch]) -> Parts:
    """Lay the fields and buckets of (non-empty list of) in-memory sketches side by side."""
    sizes = np.fromiter((s._counts.size for s in sketches), np.int64, len(sketches))
    offsets = np.fromiter((s._offset for s in sketches), np.int64, len(sketches))
    counts = np.concatenate([s._counts for s in sketches])
    # key of element i of sketch j = offsets[j] + (i - start of sketch j in the concatenation)
    keys = np.repeat(offsets - (np.cumsum(sizes) - sizes), sizes) + np.arange(counts.size)
    return Parts(
        np.fromiter((s._count for s in sketches), np.int64, len(sketches)),
        np.fromiter((s._zero_count for s in sketches), np.int64, len(sketches)),
        np.fromiter((s._sum for s in sketches), np.float64, len(sketches)),
        np.fromiter((s._min for s in sketches), np.float64, len(sketches)),
        np.fromiter((s._max for s in sketches), np.float64, len(sketches)),
        keys,
        counts,
    )


def _assemble(parts: Parts) -> Sketch:
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


def to_bytes_many(sketches: Sequence[Sketch]) -> list[bytes]:
    """``[sketch.to_bytes() for sketch in sketches]``, byte for byte, with a fixed number of
    numpy operations (:func:`~latencyboard.sketches.encoding.encode_many`)."""
    size = len(sketches)
    return encode_many(
        np.fromiter((s._count for s in sketches), np.int64, size),
        np.fromiter((s._zero_count for s in sketches), np.int64, size),
        np.fromiter((s._sum for s in sketches), np.float64, size),
        np.fromiter((s._min for s in sketches), np.float64, size),
        np.fromiter((s._max for s in sketches), np.float64, size),
        np.fromiter((s._offset for s in sketches), np.int64, size),
        [s._counts for s in sketches],
    )


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
        parts.append(decode_blobs(blobs, np.array(blob_positions, dtype=np.int64)))
    if sketches:
        parts.append(_parts_of(sketches))
    if not parts:
        return Sketch()
    if len(parts) == 1:
        return _assemble(parts[0])
    return _assemble(Parts(*(np.concatenate(field) for field in zip(*parts, strict=True))))


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
    keys = bucket_keys(array[positive])
    key_group = group_of[positive]
    zero_counts = counts - np.bincount(key_group, minlength=group_count)
    first_keys = np.full(group_count, MAX_KEY + 1, dtype=np.int64)
    np.minimum.at(first_keys, key_group, keys)
    last_keys = np.full(group_count, MIN_KEY - 1, dtype=np.int64)
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
