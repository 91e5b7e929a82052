"""Tests for latencyboard.stats.rank against brute force: pairwise comparisons for U and the
exact permutation distribution for its mean and tie-corrected variance."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.rank import rank_shift, smallest_p_values


def _buckets(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    keys, counts = np.unique(np.array(values, dtype=np.int64), return_counts=True)
    return keys, counts.astype(np.int64)


def _u(baseline: list[int], window: list[int]) -> float:
    return sum((w > b) + 0.5 * (w == b) for w in window for b in baseline)


def test_probability_larger_is_the_pairwise_share_ties_counted_half() -> None:
    baseline, window = [1, 2, 2, 3, 5, 5, 5, 8], [2, 5, 5, 9, 1]
    result = rank_shift(*_buckets(baseline), *_buckets(window))
    assert result.probability_larger == pytest.approx(_u(baseline, window) / 40)


def test_z_uses_the_exact_permutation_mean_and_tie_corrected_variance() -> None:
    baseline, window = [1, 1, 2, 2, 2, 3, 4, 4], [2, 3, 4, 4]
    pooled = baseline + window
    us = []
    for chosen in itertools.combinations(range(len(pooled)), len(window)):
        w = [pooled[i] for i in chosen]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        us.append(_u(b, w))
    mean, sd = float(np.mean(us)), float(np.std(us))
    result = rank_shift(*_buckets(baseline), *_buckets(window))
    assert result.z == pytest.approx((_u(baseline, window) - mean - 0.5) / sd)
    assert result.p_value == pytest.approx(0.5 * math.erfc(result.z / math.sqrt(2)))


def test_a_shifted_window_is_significant_and_an_unshifted_one_is_not() -> None:
    rng = np.random.default_rng(7)
    baseline = Sketch.from_values(rng.lognormal(3.0, 0.8, 20_000))
    same = Sketch.from_values(rng.lognormal(3.0, 0.8, 600))
    slower = Sketch.from_values(1.25 * rng.lognormal(3.0, 0.8, 600))
    assert rank_shift(*baseline.buckets(), *slower.buckets()).p_value < 1e-7
    assert rank_shift(*baseline.buckets(), *same.buckets()).p_value > 1e-3
    faster = Sketch.from_values(0.8 * rng.lognormal(3.0, 0.8, 600))
    assert rank_shift(*baseline.buckets(), *faster.buckets()).p_value > 0.99


def test_without_change_small_p_values_are_no_more_frequent_than_their_level() -> None:
    rng = np.random.default_rng(11)
    baseline = Sketch.from_values(rng.pareto(2.5, 10_000) * 100)
    p_values = np.array(
        [
            rank_shift(
                *baseline.buckets(), *Sketch.from_values(rng.pareto(2.5, 120) * 100).buckets()
            ).p_value
            for _ in range(2_000)
        ]
    )
    assert np.mean(p_values <= 0.01) <= 0.02
    assert np.mean(p_values <= 0.1) <= 0.13


def test_one_bucket_on_both_sides_tells_nothing_and_empty_sides_are_refused() -> None:
    keys, counts = _buckets([4, 4, 4])
    assert rank_shift(keys, counts, keys, counts).p_value == 1.0
    with pytest.raises(ValueError, match="both sides"):
        rank_shift(keys, counts, keys[:0], counts[:0])


def test_the_bound_of_a_window_above_a_one_bucket_baseline_can_be_significant() -> None:
    # given a baseline of 10,000 values in one bucket and 30 window values ten buckets above
    keys, counts = np.array([100]), np.array([10_000])
    found = rank_shift(keys, counts, np.array([110]), np.array([30]))
    u = found.probability_larger * 30 * 10_000
    # then the lower bound of its p-value is no more than the test's own (which is tiny)
    bound = smallest_p_values(np.array([u]), np.array([30]), counts)[0]
    assert found.p_value < 1e-9
    assert bound <= found.p_value
