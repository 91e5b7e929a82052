"""A confidence interval for the change of a quantile between two samples held as sketches
(pure: the standard library and :mod:`latencyboard.stats`): the one compare quotes and an
alert's evidence quotes (``stats.comparison.compare_sketches``,
``detectors.evidence.change_intervals``).

Each side alone has the classical distribution-free interval for its quantile: the order
statistics at the binomial rank bounds (:func:`~latencyboard.stats.interval.rank_bounds`).
Adding the two sides' intervals, each at half the error budget, is valid but wide: the sum
is needed only when both sides miss far in opposite directions at once, far rarer than
either missing. So the sides are combined as Price and Bonett (2001) combine two medians'
rank intervals: each side's distance from its estimate to its bound, taken at the whole
error budget, stands for ``z`` standard errors of that side, and the change's bound is its
estimate minus (plus) the root of the sum of the squares of the two distances that point
that way (B's down and A's up for the lower bound). When one side is far more precise than
the other this is the noisy side's own interval; when both are alike it is ``1/sqrt(2)`` of
the sum. The combination is asymptotic (each side's error taken as normal), so its coverage
is measured rather than proven: ``make bench-compare-coverage``.

A sketch holds each order statistic only to its bucket: the value it reports, ``x``, is its
bucket's centre, so the exact one lies in ``(x / (1 + e), x / (1 - e)]`` (``e`` the
sketch's relative error). That error is bounded, not random, so it is added once, whole, to
each bound of the change (the two estimates taken to the edges of their buckets that widen
it, by :func:`~latencyboard.stats.interval.widened`, the rule of every sketch interval), rather
than widening each side's bounds before they are combined. The distances stand
for standard errors and are read from the sketch as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.interval import RankBounds, rank_bounds, widened

__all__ = ["quantile_change_intervals"]


def quantile_change_intervals(
    a: Sketch, b: Sketch, qs: Sequence[float], error: float
) -> list[tuple[float, float]]:
    """For each quantile ``q`` of ``qs``, bounds for the change ``quantile_B(q) -
    quantile_A(q)`` of the distributions the sketches' values were drawn from, each missing
    with at most ``error / 2`` (see the module docstring); ``-inf`` / ``inf`` when a side has
    too few values for its bound. Both sketches non-empty."""
    intervals = []
    for a_side, b_side in zip(
        rank_bounds(a, qs, 1.0 - error), rank_bounds(b, qs, 1.0 - error), strict=True
    ):
        # The bucket error, once: each estimate at the edge of its bucket that widens the change.
        a_bottom, a_top = widened(a_side.estimate, a_side.estimate)
        b_bottom, b_top = widened(b_side.estimate, b_side.estimate)
        intervals.append(
            (
                b_bottom - a_top - math.hypot(_below(b_side), _above(a_side)),
                b_top - a_bottom + math.hypot(_above(b_side), _below(a_side)),
            )
        )
    return intervals


def _below(side: RankBounds) -> float:
    """From the estimate down to the lower rank bound (``inf`` without one)."""
    return math.inf if side.low is None else max(side.estimate - side.low, 0.0)


def _above(side: RankBounds) -> float:
    """From the estimate up to the upper rank bound (``inf`` without one)."""
    return math.inf if side.high is None else max(side.high - side.estimate, 0.0)
