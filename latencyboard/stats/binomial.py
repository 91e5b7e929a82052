"""Exact binomial tails, distribution-free quantile rank bounds and Holm's step-down test.

Everything here is computed exactly (up to float64 rounding) from the binomial probability
mass function, with ``math.lgamma`` for one anchor term and the pmf's ratio recurrence for the
rest, summed with numpy. No normal approximation and no scipy: the tails the detectors need
(``n`` up to millions, a few thousand terms at most) are cheap to sum directly.

Terms further than ``12 sd + 40`` from where a sum starts are left out: past the mode each
term shrinks faster than a Gaussian with that sd (or, for small means, than a Poisson term),
so what is dropped is below ``1e-30`` of the sum.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["binomial_upper_tail", "holm_rejections", "quantile_rank_bounds"]


def _span(n: int, p: float) -> int:
    """How many terms past its start a tail sum needs (see the module docstring)."""
    return math.ceil(12.0 * math.sqrt(n * p * (1.0 - p))) + 40


def _pmf(n: int, p: float, first: int, last: int) -> np.ndarray:
    """``P(K = j)`` for ``K ~ Binomial(n, p)`` and ``j`` in ``first..last`` (0 < p < 1)."""
    j = np.arange(first, last + 1, dtype=np.float64)
    anchor = (
        math.lgamma(n + 1)
        - math.lgamma(first + 1)
        - math.lgamma(n - first + 1)
        + first * math.log(p)
        + (n - first) * math.log1p(-p)
    )
    # log P(j + 1) - log P(j) = log((n - j) / (j + 1)) + log(p / (1 - p))
    steps = np.log((n - j[:-1]) / (j[:-1] + 1.0)) + (math.log(p) - math.log1p(-p))
    logs = np.concatenate(([anchor], anchor + np.cumsum(steps)))
    return np.exp(logs)


@functools.lru_cache(maxsize=65536)
def binomial_upper_tail(k: int, n: int, p: float) -> float:
    """``P(K >= k)`` for ``K ~ Binomial(n, p)``: the one-sided p-value of seeing ``k`` or more
    of ``n`` values above a threshold each value exceeds with probability ``p``.

    Raises ValueError for ``n < 0`` or ``p`` outside [0, 1]. Cached: a steady pipeline
    sees the same window sizes and counts over and over.
    """
    if n < 0 or not 0.0 <= p <= 1.0:
        raise ValueError(f"need n >= 0 and 0 <= p <= 1, got n={n!r} p={p!r}")
    if k <= 0:
        return 1.0
    if k > n or p == 0.0:
        return 0.0
    if p == 1.0:
        return 1.0
    span = _span(n, p)
    if k >= n * p:
        return float(min(1.0, _pmf(n, p, k, min(n, k + span)).sum()))
    # Below the mean the upper tail is close to 1: sum the small lower tail instead.
    lower = _pmf(n, p, max(0, k - 1 - span), k - 1).sum()
    return float(max(0.0, 1.0 - lower))


@functools.lru_cache(maxsize=1024)
def quantile_rank_bounds(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """0-based ranks ``(lower, upper)`` of the order statistics that bracket the ``q``
    quantile of the distribution ``n`` independent values were drawn from, with probability
    at least ``confidence`` (each side missing with at most ``(1 - confidence) / 2``).

    Distribution-free: the number of values at or below the true quantile is
    ``Binomial(n, q)`` whatever the (continuous) distribution, so the 1-based ``i``-th
    smallest value lies above it with probability ``P(B <= i - 1)`` and below it with
    ``P(B >= i)``. A side is ``None`` when no order statistic reaches the confidence (too few
    values: the bound is then the sample's edge at best, so none is claimed). At a
    ``confidence`` of 1 (an alert rule's one minus a significance below float resolution) no
    order statistic is certain to bracket it: both sides are ``None``.
    Cached: the same window sizes and baselines come back every minute.
    """
    if not 0.0 < q < 1.0 or not 0.0 < confidence <= 1.0 or n < 1:
        raise ValueError(
            f"need n >= 1, q in (0, 1), confidence in (0, 1], got {n!r} {q!r} {confidence!r}"
        )
    if confidence == 1.0:
        return None, None
    miss = (1.0 - confidence) / 2.0
    span = _span(n, q)
    mean = n * q
    first, last = max(0, math.floor(mean) - span), min(n, math.ceil(mean) + span)
    pmf = _pmf(n, q, first, last)
    # cdf[i] = P(B <= first + i); sf[i] = P(B >= first + i).
    cdf = np.cumsum(pmf)
    sf = np.cumsum(pmf[::-1])[::-1]
    # The mass outside first..last is negligible, so below ``first`` the cdf is ~0 and from
    # ``last`` on the survival function is ~0.
    # Lower: the largest 1-based i with P(B <= i - 1) <= miss, as a 0-based rank i - 1.
    below = np.flatnonzero(cdf <= miss)
    lower = first + int(below[-1]) if below.size else first - 1
    # Upper: the smallest 1-based i with P(B >= i) <= miss, as a 0-based rank i - 1.
    above = np.flatnonzero(sf <= miss)
    upper = first + int(above[0]) - 1 if above.size else last
    return (lower if lower >= 0 else None), (upper if upper < n else None)


def holm_rejections(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise level ``alpha``.

    Sorted ascending, the ``i``-th smallest p-value (0-based) is rejected while it is at most
    ``alpha / (m - i)``; the first that is not stops the procedure. Holm controls the
    family-wise error rate like Bonferroni, under any dependence between the tests, and
    rejects at least as much.
    """
    m = len(p_values)
    rejected = [False] * m
    for position, index in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        if p_values[index] > alpha / (m - position):
            break
        rejected[index] = True
    return rejected
