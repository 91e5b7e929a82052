"""What a sketch can say exactly about its tail: counts above a baseline quantile's bucket.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from latencyboard.sketches.buckets import GAMMA, MIN_KEY, MIN_VALUE, bucket_keys
from latencyboard.sketches.format import decode, joined
from latencyboard.sketches.sketch import Sketch

__all__ = [
    "Threshold",
    "bucket_counts",
    "count_above",
    "counts_above_many",
    "pairs_above_many",
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
