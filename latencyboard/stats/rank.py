"""Did a window's values get larger than its baseline's, whatever their shape? A Mann-Whitney
rank test computed from two sketches' bucket counts.

Why a rank test
    Counting the window's values above a baseline quantile (:mod:`latencyboard.detectors.tail`)
    is exact at any shape but weak when the distribution is wide in log space: at log-sigma
    0.7 a +25% change of scale moves only a few of 600 values past the baseline's p99. A rank
    test uses every value: with no change, a window value is above a baseline value as often
    as below, and a shift of the whole distribution moves all of them.

The statistic, from buckets
    A sketch knows a value only up to its bucket, and a log bucket is a rank-preserving
    coarsening: values in one bucket are ties. With ``N`` baseline and ``n`` window values
    and midranks over the pooled buckets, ``U`` is the window's rank sum less
    ``n (n + 1) / 2``; with no change (the ``N + n`` values exchangeable) ``E[U] = n N / 2``
    and ``Var[U] = n N / 12 * ((T + 1) - sum(t**3 - t) / (T (T - 1)))``, ``T = N + n`` and
    ``t`` each bucket's pooled count (the tie correction). The baseline's own sampling error
    is in that variance: it is the two-sample test, not a test against a fixed distribution.

The p-value
    One-sided (the window larger), from the normal approximation with a continuity
    correction. ``U / N`` is close to a sum of ``n`` bounded scores (each value's share of the
    baseline below it), whose tails are lighter than the normal's, so the approximation errs
    toward larger p-values; it is used from ``MIN_VALUES`` window values on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["MIN_VALUES", "RankShift", "rank_shift", "smallest_p_values"]

MIN_VALUES: Final = 20
"""Window values below which no rank test is run."""

Counts = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RankShift:
    """The window against its baseline."""

    p_value: float
    """One-sided: of a window at least this much larger with no change."""
    z: float
    probability_larger: float
    """``U / (n N)``: how often a window value beats a baseline value (ties half): 0.5 with
    no change."""


def rank_shift(
    baseline_keys: Counts, baseline_counts: Counts, window_keys: Counts, window_counts: Counts
) -> RankShift:
    """The rank test of a window's buckets (keys ascending, counts > 0) against a
    baseline's; a zero bucket can take part as a key below every other. Raises ValueError
    when either side holds no value."""
    big_n, n = int(baseline_counts.sum()), int(window_counts.sum())
    if big_n == 0 or n == 0:
        raise ValueError("a rank test needs values on both sides")
    keys = np.union1d(baseline_keys, window_keys)
    a = np.zeros(keys.size, dtype=np.float64)
    b = np.zeros(keys.size, dtype=np.float64)
    a[np.searchsorted(keys, baseline_keys)] = baseline_counts
    b[np.searchsorted(keys, window_keys)] = window_counts
    ties = a + b
    midranks = np.cumsum(ties) - (ties - 1.0) / 2.0
    u = float(b @ midranks) - n * (n + 1) / 2.0
    z = _z(np.array([u]), np.array([float(n)]), big_n, np.array([float(np.sum(ties**3 - ties))]))[0]
    if not math.isfinite(z):
        # Every value in one bucket: nothing can be told apart.
        return RankShift(1.0, 0.0, 0.5)
    return RankShift(0.5 * math.erfc(z / math.sqrt(2.0)), z, u / (n * big_n))


def _z(u: np.ndarray, n: np.ndarray, big_n: int, ties: np.ndarray) -> np.ndarray:
    """``(U - E[U] - 1/2) / sd(U)`` with no change, ``ties`` the sum of ``t**3 - t`` over
    the pooled buckets (``nan`` where the variance is 0)."""
    total = n + big_n
    tie_term = np.where(total > 1, ties / np.maximum(total * (total - 1.0), 1.0), 0.0)
    variance = n * big_n / 12.0 * ((total + 1.0) - tie_term)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(variance > 0, (u - n * big_n / 2.0 - 0.5) / np.sqrt(variance), np.nan)


def smallest_p_values(u: np.ndarray, n: np.ndarray, baseline_counts: Counts) -> np.ndarray:
    """For windows known only by ``U`` against the baseline and their ``n`` (arrays), a
    lower bound of each one's :func:`rank_shift` p-value, whatever buckets its values are
    in: the ties are at most those of all ``n`` values in the baseline's largest bucket
    (``t**3`` is convex), so the variance is at least what that gives. A window whose bound
    is above a level cannot be significant at it."""
    big_n = int(baseline_counts.sum())
    counts = baseline_counts.astype(np.float64)
    largest = float(counts.max())
    ties = float(np.sum(counts**3 - counts)) + (largest + n) ** 3 - largest**3 - n
    z = _z(u.astype(np.float64), n.astype(np.float64), big_n, ties)
    # No variance left by the bound (the baseline in one bucket, as many window values as it
    # could tie): a window above the middle may be significant at any level, one below not.
    above = u - n * big_n / 2.0 - 0.5 > 0
    with np.errstate(invalid="ignore"):
        bound = 0.5 * np.vectorize(math.erfc)(z / math.sqrt(2.0))
    return np.where(np.isnan(z), np.where(above, 0.0, 0.5), bound)
