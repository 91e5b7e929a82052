"""What a sketch can say exactly about its tail: counts above a bucket and quantile intervals.

A sketch knows each value only up to its bucket: bucket ``k`` holds the values in
``(gamma**(k-1), gamma**k]`` (:mod:`latencyboard.sketches.buckets`). The baseline's quantile
is an estimate inside some bucket ``K``; the true quantile lies somewhere in that bucket.
:func:`count_above` therefore counts only the values of buckets *wholly above* the
threshold's bucket (keys ``> K``, i.e. values ``> gamma**K``, the bucket's upper edge). Every
value counted is certainly above the baseline's quantile, so under no change each value is
counted with probability *at most* ``1 - q``: the binomial test stays valid and errs on the
side of silence (by about half a bucket's probability mass, a few percent of ``1 - q``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from latencyboard.sketches.buckets import GAMMA, MIN_KEY, MIN_VALUE, RELATIVE_ERROR, bucket_keys
from latencyboard.sketches.format import decode, joined
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.binomial import quantile_rank_bounds

__all__ = [
    "Interval",
    "Threshold",
    "bucket_counts",
    "count_above",
    "counts_above_many",
    "pairs_above_many",
    "quantile_intervals",
    "threshold_of",
]


@dataclass(frozen=True)
class Threshold:
    """The bucket of a baseline quantile: values above ``upper_edge_ms`` are counted."""

    quantile_ms: float
    """The baseline's quantile estimate."""
    key: int
    """Its bucket key; buckets with a larger key are wholly above it."""
    upper_edge_ms: float
    """``gamma**key``: every counted value is larger than this."""


@dataclass(frozen=True)
class Interval:
    """A quantile estimate with a distribution-free confidence interval (ms).

    ``low``/``high`` bracket the true quantile with probability at least the confidence
    asked for, sketch error included; ``0.0`` / ``inf`` when the sample is too small for
    that side.
    """

    estimate: float
    low: float
    high: float


def threshold_of(sketch: Sketch, q: float) -> Threshold:
    """The threshold for counting values above ``sketch``'s ``q`` quantile (non-empty)."""
    value = sketch.quantile(q)
    if value < MIN_VALUE:
        # A quantile in the zero bucket: every value of a regular bucket is above it.
        return Threshold(value, MIN_KEY - 1, MIN_VALUE)
    key = int(bucket_keys(np.array([value]))[0])
    return Threshold(value, key, GAMMA**key)


def count_above(sketch: Sketch, thresholds: Sequence[Threshold]) -> list[int]:
    """How many values of ``sketch`` lie in buckets wholly above each threshold's bucket."""
    keys, counts = sketch.buckets()
    # Counts of the buckets from each position to the top, and where each threshold cuts.
    above = np.concatenate((np.cumsum(counts[::-1])[::-1], [0]))
    cuts = np.searchsorted(keys, [threshold.key for threshold in thresholds], side="right")
    return [int(count) for count in above[cuts]]


def bucket_counts(sketch: Sketch) -> tuple[np.ndarray, np.ndarray]:
    """A sketch's keys and counts, the zero bucket as a key below every other (rank order)."""
    keys, counts = sketch.buckets()
    if sketch.zero_count:
        keys = np.concatenate(([MIN_KEY - 1], keys))
        counts = np.concatenate(([sketch.zero_count], counts))
    return keys, counts


def _decoded(
    blobs: Sequence[bytes],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Many stored sketches decoded at once: each one's count of values and of zero-bucket
    values, and each bucket's owner (index of its blob), key and count."""
    parts, runs = decode(*joined(blobs), None, narrow_counts=False)
    # Which blob each bucket belongs to: a blob's buckets are one run from its first_bucket.
    sizes = runs.size
    ids = np.repeat(np.arange(sizes.size), sizes)
    within = np.arange(ids.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    owner = np.empty(ids.size, dtype=np.int64)
    owner[np.repeat(runs.first_bucket, sizes) + within] = ids
    counts = parts.bucket_counts.astype(np.float64)
    return parts.value_count, parts.zero_count, owner, parts.keys, counts


def counts_above_many(
    blobs: Sequence[bytes], thresholds: Sequence[Threshold]
) -> tuple[np.ndarray, np.ndarray]:
    """Of many stored sketches (their blobs, at least one) at once: each one's count of
    values, and its :func:`count_above` of each threshold (one column per threshold), with
    a fixed number of numpy operations instead of a sketch decoded per blob."""
    value_count, _, owner, keys, counts = _decoded(blobs)
    above = np.empty((value_count.size, len(thresholds)), dtype=np.int64)
    for j, threshold in enumerate(thresholds):
        wholly_above = np.where(keys > threshold.key, counts, 0.0)
        above[:, j] = np.bincount(owner, weights=wholly_above, minlength=value_count.size)
    return value_count, above


def pairs_above_many(
    blobs: Sequence[bytes], baseline_keys: np.ndarray, baseline_counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Of many stored sketches at once: each one's count of values, and how many (value,
    baseline value) pairs have the value in a higher bucket, a pair in one bucket counted
    half (the Mann-Whitney ``U`` of the sketch against the baseline; baseline keys as
    :func:`bucket_counts` gives them, the zero bucket
    ``MIN_KEY - 1``). ``U`` adds up over minutes, so a window's is a sum of its minutes'."""
    value_count, zeros, owner, keys, counts = _decoded(blobs)
    last = baseline_keys.size - 1
    below = np.concatenate(([0], np.cumsum(baseline_counts)))
    at = np.searchsorted(baseline_keys, keys)
    tied = np.where(
        baseline_keys[np.minimum(at, last)] == keys, baseline_counts[np.minimum(at, last)], 0
    )
    pairs = np.bincount(
        owner, weights=counts * (below[at] + 0.5 * tied), minlength=value_count.size
    )
    # Values of the zero bucket: below every regular bucket, tied with the baseline's zeros.
    baseline_zeros = baseline_counts[0] if baseline_keys[0] < MIN_KEY else 0
    return value_count, pairs + zeros * 0.5 * baseline_zeros


def quantile_intervals(
    sketch: Sketch, qs: Sequence[float], confidence: float
) -> tuple[Interval, ...]:
    """``sketch``'s quantiles ``qs`` with ``confidence`` intervals (non-empty sketch).

    Each interval is the binomial rank bound (:func:`quantile_rank_bounds`) read from the
    sketch and widened by the sketch's relative error: an estimate ``e`` of bucket ``k`` is
    the bucket's centre, so ``e / (1 + alpha)`` and ``e / (1 - alpha)`` are exactly the
    bucket's edges. All figures come from one :meth:`Sketch.quantiles` call.
    """
    last = sketch.count - 1
    bounds = [quantile_rank_bounds(sketch.count, q, confidence) for q in qs]
    levels = list(qs)
    for lower, upper in bounds:
        levels.extend(_level_of(rank, last) for rank in (lower, upper))
    values = sketch.quantiles(levels)
    intervals = []
    for index, (lower, upper) in enumerate(bounds):
        low, high = values[len(qs) + 2 * index : len(qs) + 2 * index + 2]
        intervals.append(
            Interval(
                float(values[index]),
                0.0 if lower is None else float(low) / (1.0 + RELATIVE_ERROR),
                math.inf if upper is None else float(high) / (1.0 - RELATIVE_ERROR),
            )
        )
    return tuple(intervals)


def _level_of(rank: int | None, last: int) -> float:
    """The level at which :meth:`Sketch.quantiles` reads the order statistic of 0-based
    ``rank`` (any level when there is no rank: its value is not used)."""
    if rank is None or last == 0 or rank >= last:
        return 1.0
    # Sketch.quantiles reads rank floor(q * last); half a rank of margin keeps float
    # rounding from landing on the rank below.
    return (rank + 0.5) / last
