"""Tests for latencyboard.detectors.tail: counts above a baseline quantile's bucket, intervals."""

from __future__ import annotations

import numpy as np

from latencyboard.detectors.tail import (
    count_above,
    counts_above_many,
    threshold_of,
)
from latencyboard.sketches.buckets import GAMMA
from latencyboard.sketches.sketch import Sketch


def test_a_value_in_the_thresholds_bucket_is_not_counted() -> None:
    # given a baseline whose p99 is 10 ms
    baseline = Sketch.from_values([10.0] * 99 + [100.0])
    threshold = threshold_of(baseline, 0.99)
    edge = threshold.upper_edge_ms
    # when a window holds values in the p99's own bucket above 10 ms, and values beyond it
    window = Sketch.from_values([10.0, edge * 0.9999, edge * 1.0001, 50.0])
    # then only those in buckets wholly above the bucket are counted
    assert 10.0 < edge < 10.0 * GAMMA
    assert count_above(window, [threshold]) == [2]


def test_counts_above_several_thresholds_at_once() -> None:
    baseline = Sketch.from_values(np.arange(1.0, 101.0))
    thresholds = [threshold_of(baseline, q) for q in (0.5, 0.9)]
    window = Sketch.from_values([1.0, 60.0, 95.0, 200.0])
    assert count_above(window, thresholds) == [3, 2]


def test_a_quantile_in_the_zero_bucket_counts_every_positive_value() -> None:
    baseline = Sketch.from_values([0.0] * 99 + [5.0])
    window = Sketch.from_values([0.0, 0.001, 3.0])
    assert count_above(window, [threshold_of(baseline, 0.5)]) == [2]


def test_counts_above_many_blobs_are_those_of_each_sketch() -> None:
    rng = np.random.default_rng(7)
    sketches = [Sketch.from_values(rng.lognormal(3.0, 0.6, size)) for size in (1, 40, 0, 900)]
    sketches.append(Sketch.from_values([0.0, 0.0, 12.0]))
    baseline = Sketch.from_values(rng.lognormal(3.0, 0.5, 5000))
    thresholds = [threshold_of(baseline, q) for q in (0.5, 0.99)]

    counts, above = counts_above_many([s.to_bytes() for s in sketches], thresholds)

    assert counts.tolist() == [s.count for s in sketches]
    assert above.tolist() == [count_above(s, thresholds) for s in sketches]
