"""Serialized sketches merged group by group and summarized, all groups at once.

:func:`group_summaries` and :class:`SketchBatch` (which decodes the blobs once, to group them
several ways) report for each group the count, zero count, min, max and quantiles of
:func:`~latencyboard.sketches.sketch.merge_many` of its blobs, bit for bit, and the exact sum
of their sums (:mod:`latencyboard.sketches.exact_sums`), with a fixed number of numpy
operations: no Python work per group or bucket.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.buckets import (
    MAX_KEY,
    MIN_KEY,
    CountArray,
    FloatArray,
    IntArray,
    KeyArray,
    bucket_estimates,
    bucket_keys,
)
from latencyboard.sketches.exact_sums import exact_sums
from latencyboard.sketches.format import Parts, Runs, decode, joined
from latencyboard.sketches.sketch import QuantileMethod, quantile_levels

__all__ = ["GroupSummaries", "SketchBatch", "group_summaries"]


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
        self._load(*joined(blobs))

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
        self._parts: Parts | None = None
        self._runs: Runs | None = None
        self._cumulative: CountArray | None = None
        if self._size:
            positions = np.arange(self._size, dtype=np.int64)
            self._parts, self._runs = decode(data, lengths, positions, narrow_counts=True)

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
        q = quantile_levels(qs, method).ravel()
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
        # As in sketch._assemble: fmin/fmax skip the NaN extremes of empty sketches and are
        # applied in input order; + 0.0 turns -0.0 into 0.0.
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
        total = exact_sums(parts.sum, groups, group_count)
        return GroupSummaries(count, zero, total, low, high, quantiles)

    def _running_count(self) -> CountArray:
        """The bucket counts of all decoded runs summed up to each bucket, worked out once,
        in the counts' own type (int32 only below format._NARROW_TOTAL values in the
        batch)."""
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
        return bucket_estimates(self.keys[index])


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
        parts: Parts,
        runs: Runs,
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
    parts: Parts,
    runs: Runs,
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
    lowest = np.full(group_count, MAX_KEY + 1, dtype=np.int64)
    np.minimum.at(lowest, blob_groups, runs.first_key[blobs])
    highest = np.full(group_count, MIN_KEY - 1, dtype=np.int64)
    np.maximum.at(highest, blob_groups, bucket_keys(parts.max[blobs]))
    spans = np.maximum(highest - lowest + 1, 0)
    ends = np.cumsum(spans)
    starts = ends - spans
    size = int(ends[-1])
    if size <= max(_DENSE_CELLS_PER_BUCKET * keys.size, _DENSE_MIN_CELLS):
        # Every key from each group's lowest to its highest: key k of group g is cell
        # starts[g] + k - lowest[g].
        shift = starts - lowest
        # The counts' own type (see format._NARROW_TOTAL): ufunc.at has no fast loop
        # for a cast.
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
