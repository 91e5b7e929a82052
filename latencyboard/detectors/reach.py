"""What a regression rule can find at a pipeline's traffic: the smallest shift of a stage it
finds within its window, and the window a +25% shift needs (pure: no Django).

A shift here is the stage's whole distribution scaled by ``1 + d`` (every request ``d``
slower). For each test of the detector (:mod:`latencyboard.detectors.regression`) its power
against that shift is worked out from the stage's own baseline, not from an assumed shape:

* the count test at ``q``: with ``n`` values in the window, the count above the baseline
  quantile's bucket is significant from the smallest ``k`` whose binomial tail at ``1 - q``
  is at most the test's level; under the shift each value lands above with the baseline's
  share above ``threshold / (1 + d)`` (read from its buckets, log-uniform within one), so
  the power is that binomial's tail from ``k``;
* the rank test: the baseline's buckets moved ``log(1 + d) / log(gamma)`` buckets up give
  the chance a window value ranks above a baseline value; the power is the normal
  approximation of the Mann-Whitney statistic (the variance without ties, under no change).

The level of each test is the rule's family-wise level over the family's size (the
evaluation's Holm procedure starts there). A shift must also show past the rule's minimum
effect: in ms, as a bound; relative, as the chance that the window's figure (its median for
the rank test) reads the shift past the floor, from the standard error of the window's
quantile (the slope of the baseline's quantile function there). The smallest shift found
with probability ``POWER`` is the rule's *detectable shift* at that traffic; ``None`` when
even ``MAX_SHIFT`` is not.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Final

import numpy as np

from latencyboard.detectors.regression import MEDIAN, Baseline, RegressionRule
from latencyboard.detectors.tail import threshold_of
from latencyboard.sketches.buckets import GAMMA, RELATIVE_ERROR
from latencyboard.stats.binomial import binomial_upper_tail
from latencyboard.stats.labels import quantile_label
from latencyboard.stats.rank import MIN_VALUES

__all__ = ["POWER", "TARGET", "Reach", "family_size", "reach"]

POWER: Final = 0.8
MAX_SHIFT: Final = 3.0
"""The largest shift looked at (+300%)."""
TARGET: Final = 0.25
"""The shift whose window is worked out (+25%)."""
MAX_TARGET_MINUTES: Final = 24 * 60
"""The longest window the search for the +25% window tries (a day)."""
_STEPS: Final = 14
"""Bisection steps of a search: the shift to within ``MAX_SHIFT / 2**14`` (0.02%)."""
Test = Callable[[Baseline, int, float, float, float], float]


@dataclass(frozen=True)
class Reach:
    """What a rule finds in one stage at the stage's traffic."""

    per_minute: float
    """Requests a minute."""
    window_n: int
    """Values in the rule's window at that traffic."""
    detectable: float | None
    """The smallest shift found within the window with probability ``POWER`` (0.25: +25%);
    ``None`` when none up to ``MAX_SHIFT`` is."""
    test: str | None
    """The test that finds it (``p99``, ``p50`` for the rank test)."""
    target_minutes: int | None
    """The window in which +25% is found with probability ``POWER``; ``None`` when even
    ``MAX_TARGET_MINUTES`` is too short."""

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    @property
    def detectable_percent(self) -> float | None:
        return None if self.detectable is None else round(100.0 * self.detectable, 1)


def family_size(window_ns: list[int], rule: RegressionRule) -> int:
    """How many tests an evaluation of stages with these window sizes runs (Holm's ``m``)."""
    return sum(len(_tests(n, rule)) for n in window_ns) or 1


def reach(
    baseline: Baseline, per_minute: float, window_minutes: int, rule: RegressionRule, family: int
) -> Reach:
    """The rule's reach in a stage (its ready ``baseline``) at ``per_minute`` requests a
    minute, in an evaluation of ``family`` tests."""
    level = rule.significance / max(family, 1)
    found = _detectable(baseline, round(per_minute * window_minutes), rule, level)
    return Reach(
        per_minute,
        round(per_minute * window_minutes),
        found[0] if found else None,
        found[1] if found else None,
        _target_minutes(baseline, per_minute, rule, level),
    )


def _tests(n: int, rule: RegressionRule) -> list[float]:
    """The quantiles tested in a window of ``n`` values (``MEDIAN``: the rank test)."""
    counted = [q for q in rule.quantiles if n * (1.0 - q) >= rule.min_expected_above]
    return ([MEDIAN] if n >= MIN_VALUES else []) + counted


def _detectable(
    baseline: Baseline, n: int, rule: RegressionRule, level: float
) -> tuple[float, str] | None:
    best: tuple[float, str] | None = None
    for q in _tests(n, rule):
        test = _rank_power if q == MEDIAN else _count_power
        spread = _log_spread(baseline, q, n)

        def power(shift: float, q: float = q, test: Test = test, spread: float = spread) -> float:
            return test(baseline, n, q, shift, level) * _past_floor(shift, spread, rule)

        floor_ms = rule.min_absolute_effect_ms / _quantile(baseline, q)
        if floor_ms > MAX_SHIFT or power(MAX_SHIFT) < POWER:
            continue
        shift = max(_bisect(power), floor_ms)
        if best is None or shift < best[0]:
            best = (shift, quantile_label(q))
    return best


def _log_spread(baseline: Baseline, q: float, n: int) -> float:
    """The standard error of the log of a window's ``q`` quantile (``n`` values), from the
    slope of the baseline's log quantile function there."""
    step = min(0.02, q / 2, (1.0 - q) / 2)
    slope = math.log(_quantile(baseline, q + step) / _quantile(baseline, q - step)) / (2 * step)
    return slope * math.sqrt(q * (1.0 - q) / n)


def _past_floor(shift: float, spread: float, rule: RegressionRule) -> float:
    """The chance the window's figure shows the shift past the rule's relative floor (as
    :func:`regression.large_enough` applies it)."""
    floor = (1.0 + rule.min_relative_effect) / (1.0 + RELATIVE_ERROR)
    if spread <= 0:
        return 1.0 if 1.0 + shift >= floor else 0.0
    return NormalDist().cdf((math.log1p(shift) - math.log(floor)) / spread)


def _target_minutes(
    baseline: Baseline, per_minute: float, rule: RegressionRule, level: float
) -> int | None:
    def finds(minutes: int) -> bool:
        found = _detectable(baseline, round(per_minute * minutes), rule, level)
        return found is not None and found[0] <= TARGET

    if per_minute <= 0 or not finds(MAX_TARGET_MINUTES):
        return None
    low, high = 0, MAX_TARGET_MINUTES
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if finds(middle) else (middle, high)
    return high


def _bisect(power: Callable[[float], float]) -> float:
    """The smallest shift in ``(0, MAX_SHIFT]`` found with probability ``POWER`` (it is at
    the top, and power grows with the shift)."""
    low, high = 0.0, MAX_SHIFT
    for _ in range(_STEPS):
        middle = (low + high) / 2
        low, high = (low, middle) if power(middle) >= POWER else (middle, high)
    return high


def _quantile(baseline: Baseline, q: float) -> float:
    return max(baseline.sketch.quantile(q), 1e-9)


def _count_power(baseline: Baseline, n: int, q: float, shift: float, level: float) -> float:
    """Power of the count test at ``q`` against ``shift``."""
    needed = _critical(n, 1.0 - q, level)
    if needed is None:
        return 0.0
    keys, counts = baseline.buckets()
    cut = threshold_of(baseline.sketch, q).key - math.log1p(shift) / math.log(GAMMA)
    share = _share_above(keys, counts, cut)
    return binomial_upper_tail(needed, n, min(share, 1.0))


def _critical(n: int, p: float, level: float) -> int | None:
    """The smallest count of ``n`` whose tail at ``p`` is at most ``level``."""
    if binomial_upper_tail(n, n, p) > level:
        return None
    low, high = math.floor(n * p), n
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if binomial_upper_tail(middle, n, p) <= level else (middle, high)
    return high


def _share_above(keys: np.ndarray, counts: np.ndarray, cut: float) -> float:
    """The baseline's share of values above ``gamma**cut`` (log-uniform within a bucket)."""
    whole = math.floor(cut) + 1
    above = counts[keys > whole].sum()
    partial = counts[keys == whole].sum() * (whole - cut)
    return float((above + partial) / counts.sum())


def _rank_power(baseline: Baseline, n: int, q: float, shift: float, level: float) -> float:
    """Power of the rank test against ``shift``."""
    keys, counts = baseline.buckets()
    total = float(counts.sum())
    moved = math.log1p(shift) / math.log(GAMMA)
    lower = math.floor(moved)
    auc = (1 - (moved - lower)) * _ranks_above(keys, counts, lower) + (moved - lower) * (
        _ranks_above(keys, counts, lower + 1)
    )
    sd = math.sqrt((n + total + 1.0) / (12.0 * n * total))
    z = NormalDist().inv_cdf(1.0 - level)
    return NormalDist().cdf((auc - 0.5) / sd - z)


def _ranks_above(keys: np.ndarray, counts: np.ndarray, moved: int) -> float:
    """The chance a baseline value moved ``moved`` buckets up ranks above another baseline
    value (ties half)."""
    share = counts / counts.sum()
    below = np.concatenate(([0.0], np.cumsum(share)))
    at = np.searchsorted(keys, keys + moved)
    inside = np.minimum(at, keys.size - 1)
    tied = np.where(keys[inside] == keys + moved, share[inside], 0.0)
    return float((share * (below[at] + 0.5 * tied)).sum())
