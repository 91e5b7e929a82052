"""Tests for latencyboard.detectors.burn_rate: the SRE Workbook's table, with exact counters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import numpy as np
import pytest

from latencyboard.detectors.burn_rate import SRE_WORKBOOK, BurnCondition, Severity, evaluate

START = datetime(2026, 3, 1, tzinfo=UTC)
# 10,000 requests a minute against a 99.9% objective: 10 bad requests a minute burn 1x.
PER_MINUTE = 10_000


def counters(bad_per_minute: list[int]) -> tuple[np.ndarray, np.ndarray]:
    bad = np.array(bad_per_minute, dtype=np.int64)
    return PER_MINUTE - bad, np.full(bad.size, PER_MINUTE)


def at_minute(minute: int) -> datetime:
    return START + timedelta(minutes=minute)


def test_the_conditions_are_the_workbooks() -> None:
    assert [(c.severity, c.factor, c.long_minutes, c.short_minutes) for c in SRE_WORKBOOK] == [
        (Severity.PAGE, Fraction(72, 5), 60, 5),
        (Severity.PAGE, Fraction(6), 360, 30),
        (Severity.TICKET, Fraction(3), 1440, 120),
        (Severity.TICKET, Fraction(1), 4320, 360),
    ]


@pytest.mark.parametrize(
    ("index", "bad_at_factor"),
    [
        pytest.param(0, 144, id="page-14.4x-1h-5m"),
        pytest.param(1, 60, id="page-6x-6h-30m"),
        pytest.param(2, 30, id="ticket-3x-1d-2h"),
        pytest.param(3, 10, id="ticket-1x-3d-6h"),
    ],
)
def test_each_condition_fires_at_its_factor_exactly(index: int, bad_at_factor: int) -> None:
    condition = SRE_WORKBOOK[index]
    minutes = condition.long_minutes
    # given the long window burning at exactly the factor, then one bad request fewer
    at = counters([bad_at_factor] * minutes)
    below = counters([bad_at_factor] * (minutes - 1) + [bad_at_factor - 1])
    # when evaluated at the end of the window
    fired = evaluate(*at, START, at_minute(minutes), "0.999").conditions[index]
    missed = evaluate(*below, START, at_minute(minutes), "0.999").conditions[index]
    # then the first fires with burn rates of exactly the factor, the second does not
    assert fired.firing
    assert (fired.long.burn_rate, fired.short.burn_rate) == (condition.factor, condition.factor)
    assert (fired.long.total, fired.short.total) == (
        minutes * PER_MINUTE,
        condition.short_minutes * PER_MINUTE,
    )
    assert not missed.firing


def test_14_4x_pages_and_14_3x_does_not() -> None:
    page, _, _, _ = SRE_WORKBOOK
    at = evaluate(*counters([144] * 60), START, at_minute(60), 0.999)
    under = evaluate(*counters([143] * 60), START, at_minute(60), 0.999)
    assert at.conditions[0].firing
    assert at.severity is Severity.PAGE
    assert under.conditions[0].long.burn_rate == Fraction("14.3")
    assert not under.conditions[0].firing
    assert page.factor == Fraction("14.4")


def test_a_burn_that_stopped_does_not_fire() -> None:
    # given an hour at 20x whose last 5 minutes were clean: the long window still averages
    # above 14.4x, the short one says it is over
    result = evaluate(*counters([240] * 55 + [0] * 5), START, at_minute(60), "0.999")
    page = result.conditions[0]
    assert page.long.burn_rate == Fraction(55 * 240, 60 * 10)
    assert page.short.burn_rate == 0
    assert not page.firing


def test_a_short_spike_does_not_fire() -> None:
    # given a 5-minute spike at 100x in an otherwise clean hour (8.3x over the hour)
    result = evaluate(*counters([0] * 55 + [1000] * 5), START, at_minute(60), "0.999")
    assert result.conditions[0].short.burn_rate == 100
    assert not result.conditions[0].firing


def test_the_minute_in_progress_is_not_counted() -> None:
    # given a bad minute 60 still in progress at 60:30
    result = evaluate(
        *counters([0] * 60 + [10_000]), START, at_minute(60) + timedelta(seconds=30), "0.999"
    )
    assert result.conditions[0].long.total == 60 * PER_MINUTE
    assert result.conditions[0].long.burn_rate == 0


def test_no_traffic_burns_nothing() -> None:
    result = evaluate([0] * 60, [0] * 60, START, at_minute(60), "0.999")
    assert [c.firing for c in result.conditions] == [False] * 4
    assert result.severity is None


def test_a_custom_condition() -> None:
    condition = BurnCondition(Severity.TICKET, Fraction(2), 10, 2)
    result = evaluate(*counters([20] * 10), START, at_minute(10), "0.999", (condition,))
    assert result.severity is Severity.TICKET


@pytest.mark.parametrize(
    ("good", "total", "target", "message"),
    [
        pytest.param([5], [4], "0.999", "good <= total", id="good-above-total"),
        pytest.param([1, 2], [2], "0.999", "same length", id="lengths-differ"),
        pytest.param([1], [2], "1", r"\(0, 1\)", id="target-one"),
    ],
)
def test_bad_input_is_refused(good: list[int], total: list[int], target: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate(good, total, START, at_minute(1), target)
