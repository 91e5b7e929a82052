"""The slowest 1% of a window's requests, from the root-duration buckets of its stage shares
(pure: numpy only).

Every stage-share row keeps its requests counted per root-duration bucket, the buckets of
:mod:`latencyboard.sketches.buckets` (relative accuracy 1%). The counts of a window's rows,
merged, are a sketch of the window's end-to-end latency; its p99 bucket is found as the
sketch finds any quantile (0-based rank ``floor(0.99 * (n - 1))``), and the window's *tail*
is every request in a bucket above it: the requests slower than the p99 bucket's upper
bound. That is the exact set of requests slower than the exact p99, less those within the
p99's own bucket (within 2% above it), whatever the traffic of each minute.

A tail of fewer than :data:`MIN_TAIL_REQUESTS` requests is not shown: with fewer than some
1,000 requests in the window "the slowest 1%" is a handful of requests, and a mean or a
class built on it says more about those few than about the tail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.sketches.buckets import MIN_KEY, MIN_VALUE, bucket_estimates, bucket_keys

TAIL_QUANTILE: Final = 0.99
"""The tail is the requests above this quantile of the window's end-to-end latency."""

MIN_TAIL_REQUESTS: Final = 10
"""Fewest requests in a tail for its figures (and a class) to be given: about 1,000 requests
in the window."""

ZERO_KEY: Final = MIN_KEY - 1
"""The bucket of root durations below ``MIN_VALUE`` (reported as 0 ms)."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def root_keys(duration_ms: FloatArray) -> IntArray:
    """The sketch bucket of each root duration (ms); :data:`ZERO_KEY` below ``MIN_VALUE``."""
    keys = np.full(len(duration_ms), ZERO_KEY, dtype=np.int64)
    counted = duration_ms >= MIN_VALUE
    keys[counted] = bucket_keys(duration_ms[counted])
    return keys


@dataclass(frozen=True, slots=True)
class TailCut:
    """Where a window's tail starts: requests with a root bucket above ``key`` are the tail.

    ``p99_ms`` is the p99 as the sketch reports it (within 1%); ``key`` and ``p99_ms`` are
    None without requests.
    """

    requests: int
    key: int | None
    p99_ms: float | None
    tail_requests: int

    @property
    def enough(self) -> bool:
        """Whether the tail holds enough requests for its figures to be given."""
        return self.tail_requests >= MIN_TAIL_REQUESTS


def tail_cut(keys: IntArray, counts: IntArray) -> TailCut:
    """The tail of requests counted ``counts`` per root bucket ``keys`` (any order; a key may
    repeat, its counts are added)."""
    total = int(counts.sum())
    if total == 0:
        return TailCut(0, None, None, 0)
    merged_keys, where = np.unique(keys, return_inverse=True)
    merged = np.bincount(where, weights=counts, minlength=len(merged_keys)).astype(np.int64)
    rank = int(np.floor(TAIL_QUANTILE * (total - 1)))
    index = int(np.searchsorted(np.cumsum(merged), rank, side="right"))
    key = int(merged_keys[index])
    p99 = 0.0 if key == ZERO_KEY else float(bucket_estimates(np.array([key]))[0])
    return TailCut(total, key, p99, int(merged[index + 1 :].sum()))
