"""A sketch's quantiles with distribution-free confidence intervals: the one interval rule
of compare and the regression detector (pure: numpy, the standard library and the sketch).

Two steps, each in one place:

Ranks
    :func:`~latencyboard.stats.binomial.quantile_rank_bounds`: the order statistics of ranks
    ``lower`` and ``upper`` bracket the true quantile with the confidence asked for, whatever
    the latency distribution (the number of values below it is ``Binomial(n, q)``).
Values
    A sketch does not hold those order statistics, only their buckets: a value of bucket
    ``k`` lies in ``(gamma**(k-1), gamma**k]`` and the bucket reports its centre
    ``2 gamma**k / (gamma + 1)``, so a reported ``x`` came from ``(x / (1 + alpha),
    x / (1 - alpha)]``. :func:`widened` takes the two order statistics to those edges, so the
    interval still brackets the exact order statistics; ``(1 + alpha) * x``, a little
    smaller, can miss one at its bucket's top edge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.sketches.sketch import Sketch
from latencyboard.stats.binomial import quantile_rank_bounds

__all__ = ["Interval", "RankBounds", "quantile_intervals", "rank_bounds", "widened"]


@dataclass(frozen=True)
class Interval:
    """A quantile estimate with a distribution-free confidence interval (ms).

    ``low``/``high`` bracket the true quantile with probability at least the confidence
    asked for, sketch error included; ``0.0`` (no latency is below it) / ``inf`` when the
    sample is too small for that side.
    """

    estimate: float
    low: float
    high: float


def widened(low: float, high: float) -> tuple[float, float]:
    """The sketch's estimates of the two bounding order statistics taken to the edges of their
    buckets (see the module docstring): where the exact order statistics may lie."""
    return low / (1.0 + RELATIVE_ERROR), high / (1.0 - RELATIVE_ERROR)


@dataclass(frozen=True)
class RankBounds:
    """A quantile estimate and the sketch's values at its binomial rank bounds, as the sketch
    reports them (bucket centres, not widened); ``None`` where there is no such rank."""

    estimate: float
    low: float | None
    high: float | None


def rank_bounds(sketch: Sketch, qs: Sequence[float], confidence: float) -> tuple[RankBounds, ...]:
    """``sketch``'s quantiles ``qs`` and its order statistics at their ``confidence`` rank
    bounds (non-empty sketch), from one :meth:`Sketch.quantiles` call."""
    last = sketch.count - 1
    bounds = [quantile_rank_bounds(sketch.count, q, confidence) for q in qs]
    levels = list(qs)
    for lower, upper in bounds:
        levels.extend(_level_of(rank, last) for rank in (lower, upper))
    values = [float(value) for value in sketch.quantiles(levels)]
    return tuple(
        RankBounds(
            values[index],
            None if lower is None else values[len(qs) + 2 * index],
            None if upper is None else values[len(qs) + 2 * index + 1],
        )
        for index, (lower, upper) in enumerate(bounds)
    )


def quantile_intervals(
    sketch: Sketch, qs: Sequence[float], confidence: float
) -> tuple[Interval, ...]:
    """``sketch``'s quantiles ``qs`` with ``confidence`` intervals (non-empty sketch): its
    :func:`rank_bounds`, :func:`widened`."""
    intervals = []
    for bounds in rank_bounds(sketch, qs, confidence):
        low, high = widened(bounds.low or 0.0, math.inf if bounds.high is None else bounds.high)
        intervals.append(Interval(bounds.estimate, low, high))
    return tuple(intervals)


def _level_of(rank: int | None, last: int) -> float:
    """The level at which :meth:`Sketch.quantiles` reads the order statistic of 0-based
    ``rank`` (any level when there is no rank: its value is not used)."""
    if rank is None or last == 0 or rank >= last:
        return 1.0
    # Sketch.quantiles reads rank floor(q * last); half a rank of margin keeps float
    # rounding from landing on the rank below.
    return (rank + 0.5) / last
