"""The interval of a quantile's change between two sketches: both sides joined in one
procedure (latencyboard.stats.difference), through compare."""

from __future__ import annotations

import numpy as np

from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.comparison import Change, compare_sketches
from latencyboard.stats.difference import quantile_change_intervals
from latencyboard.stats.interval import rank_bounds


def lognormal(rng: np.random.Generator, n: int, scale: float = 1.0) -> Sketch:
    return Sketch.from_values(scale * rng.lognormal(np.log(40.0), 0.5, n))


def test_ten_percent_at_p99_with_20000_spans_a_side_is_found() -> None:
    # given 20 seeded pairs of 20,000 spans a side, B every value 10% slower (log-sigma 0.5)
    rng = np.random.default_rng(11)
    found = 0
    for _ in range(20):
        a, b = lognormal(rng, 20_000), lognormal(rng, 20_000, 1.1)
        # when compared at p50, p95 and p99 (95% simultaneous)
        p99 = compare_sketches(a, b).quantiles[2]
        found += p99.change is Change.SLOWER
    # then p99 is called slower in at least 16 (the two sides' intervals summed: about half)
    assert found >= 16


def test_a_far_larger_side_leaves_the_other_sides_own_interval() -> None:
    # given 200,000 spans on A and 2,000 on B, from one distribution
    rng = np.random.default_rng(12)
    a, b = lognormal(rng, 200_000), lognormal(rng, 2_000)
    # when the median's change is bounded at 95%
    ((low, high),) = quantile_change_intervals(a, b, [0.5], 0.05)
    # then it is about B's own 95% rank interval less A's median: A's error hardly counts
    (b_side,) = rank_bounds(b, [0.5], 0.95)
    a_median = a.quantile(0.5)
    assert b_side.low is not None
    assert b_side.high is not None
    assert abs(low - (b_side.low - a_median)) < 0.03 * a_median
    assert abs(high - (b_side.high - a_median)) < 0.03 * a_median
    assert low < 0 < high


def test_no_change_is_covered_in_at_least_38_of_40_trials_at_every_quantile() -> None:
    # given 40 seeded pairs of 2,000 spans a side from one heavy-tailed distribution
    rng = np.random.default_rng(13)
    covered = np.zeros(3, dtype=int)
    for _ in range(40):
        a = Sketch.from_values(60.0 * rng.pareto(2.5, 2_000))
        b = Sketch.from_values(60.0 * rng.pareto(2.5, 2_000))
        # when the change of p50, p95 and p99 is bounded (each at 1 - 0.05 / 3)
        intervals = quantile_change_intervals(a, b, [0.5, 0.95, 0.99], 0.05 / 3)
        covered += [low <= 0.0 <= high for low, high in intervals]
    # then 0, the true change, is inside nearly always
    assert (covered >= 38).all()


def test_too_few_values_above_leave_the_change_unbounded_on_that_side() -> None:
    # given 100 values a side: p99's upper rank bound would need a 101st value
    values = Sketch.from_values(np.arange(1.0, 101.0))
    ((low, high),) = quantile_change_intervals(values, values, [0.99], 0.05)
    # then the change's bounds that need it are unbounded
    assert (low, high) == (-np.inf, np.inf)
