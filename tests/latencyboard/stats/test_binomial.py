"""Tests for latencyboard.stats.binomial against exact rational arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from latencyboard.stats.binomial import (
    binomial_upper_tail,
    holm_rejections,
    quantile_rank_bounds,
)


def exact_upper_tail(k: int, n: int, p: Fraction) -> Fraction:
    """P(K >= k) summed over every term with fractions: no rounding anywhere."""
    return sum(
        (math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(max(k, 0), n + 1)),
        Fraction(0),
    )


@pytest.mark.parametrize(
    ("k", "n", "p"),
    [
        pytest.param(6, 600, Fraction(1, 100), id="p99-at-the-mean"),
        pytest.param(18, 600, Fraction(1, 100), id="p99-tripled"),
        pytest.param(40, 600, Fraction(1, 100), id="p99-far-tail"),
        pytest.param(2, 600, Fraction(1, 100), id="below-the-mean"),
        pytest.param(45, 600, Fraction(5, 100), id="p95"),
        pytest.param(1, 1, Fraction(1, 10), id="one-value"),
        pytest.param(300, 300, Fraction(1, 2), id="all-of-them"),
    ],
)
def test_upper_tail_matches_the_exact_sum(k: int, n: int, p: Fraction) -> None:
    # given the exact tail; when computed in floats; then it agrees to 1e-9 relative
    assert binomial_upper_tail(k, n, float(p)) == pytest.approx(
        float(exact_upper_tail(k, n, p)), rel=1e-9
    )


def test_upper_tail_of_a_known_value() -> None:
    # given 25 of 600 values above a p99 (6 expected); then P(K >= 25) is 4.38204e-9 (the
    # exact rational sum, rounded once to float)
    assert binomial_upper_tail(25, 600, 0.01) == pytest.approx(4.382041287626667e-09, rel=1e-9)


@pytest.mark.parametrize(
    ("k", "n", "p", "expected"),
    [
        pytest.param(0, 10, 0.3, 1.0, id="k-zero"),
        pytest.param(11, 10, 0.3, 0.0, id="k-above-n"),
        pytest.param(1, 10, 0.0, 0.0, id="p-zero"),
        pytest.param(10, 10, 1.0, 1.0, id="p-one"),
    ],
)
def test_upper_tail_edges(k: int, n: int, p: float, expected: float) -> None:
    assert binomial_upper_tail(k, n, p) == expected


def test_upper_tail_rejects_a_probability_above_one() -> None:
    with pytest.raises(ValueError, match="0 <= p <= 1"):
        binomial_upper_tail(1, 10, 1.5)


def test_rank_bounds_are_the_tightest_with_the_confidence() -> None:
    # given 600 values and their p99; when bounds are asked at 95%
    lower, upper = quantile_rank_bounds(600, 0.99, 0.95)
    assert lower is not None
    assert upper is not None
    p = Fraction(99, 100)
    # then each side misses with at most 2.5% and one rank further in would miss more
    assert 1 - exact_upper_tail(lower + 1, 600, p) <= Fraction(1, 40)
    assert 1 - exact_upper_tail(lower + 2, 600, p) > Fraction(1, 40)
    assert exact_upper_tail(upper + 1, 600, p) <= Fraction(1, 40)
    assert exact_upper_tail(upper, 600, p) > Fraction(1, 40)


def test_rank_bounds_say_none_when_too_few_values() -> None:
    # given 100 values: the p99's upper bound would need a 101st value
    lower, upper = quantile_rank_bounds(100, 0.99, 0.95)
    assert upper is None
    # and the lower bound is the 97th smallest: P(at least 4 of 100 above the p99) = 1.84%
    assert lower == 96


def test_rank_bounds_claim_nothing_at_certainty() -> None:
    # given a million values; when bounds are asked at a confidence of 1 (one minus a
    # significance too small for a float), no order statistic is certain to bracket the median
    assert quantile_rank_bounds(1_000_000, 0.5, 1.0) == (None, None)


@pytest.mark.parametrize(
    ("n", "q", "expected"),
    [
        pytest.param(3, 0.5, (None, None), id="three-values-median"),
        pytest.param(20, 0.5, (5, 14), id="twenty-values-median"),
        pytest.param(1000, 0.5, (468, 531), id="thousand-values-median"),
    ],
)
def test_rank_bounds_of_the_median(
    n: int, q: float, expected: tuple[int | None, int | None]
) -> None:
    # the textbook ranks (1-based 6 and 15 of 20, 469 and 532 of 1000), 0-based
    assert quantile_rank_bounds(n, q, 0.95) == expected


@pytest.mark.parametrize(("n", "q"), [(20, 0.5), (137, 0.9), (400, 0.99), (1_000, 0.95)])
def test_rank_bounds_are_the_binomial_tails(n: int, q: float) -> None:
    # given the exact binomial distribution of the values below the true quantile
    cdf = np.cumsum([math.comb(n, k) * q**k * (1 - q) ** (n - k) for k in range(n + 1)])

    lower, upper = quantile_rank_bounds(n, q, 0.95)

    # then the lower rank is the last whose tail is within 2.5%, the upper the first past
    # 97.5% (None where no rank is)
    assert lower == max((k for k in range(n + 1) if cdf[k] <= 0.025), default=None)
    assert upper == min((k for k in range(n) if cdf[k] >= 0.975), default=None)


def test_holm_steps_down_until_the_first_failure() -> None:
    # given 4 tests at 0.05: thresholds 0.0125, 0.0167, 0.025, 0.05 in p order
    rejected = holm_rejections([0.01, 0.04, 0.015, 0.03], 0.05)
    # then the smallest two pass and the third (0.03 > 0.025) stops the procedure
    assert rejected == [True, False, True, False]
