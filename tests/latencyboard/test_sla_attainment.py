"""Tests for latencyboard.sla.attainment: windows, attainment and error budgets (no database)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest

from latencyboard.sla import attainment
from latencyboard.sla.attainment import (
    Bucket,
    BudgetPoint,
    Counts,
    MinuteRange,
    Window,
    WindowBudget,
    bucket_count,
    budget,
    burn_down,
    excluded_minutes,
    objective_window,
    series,
)
from latencyboard.sla.models import Window as WindowKind
from latencyboard.windows import ceil_minute

T0 = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)


def minute(n: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n)


def unix(*minutes: int) -> np.ndarray:
    return np.array([int(minute(n).timestamp()) for n in minutes], dtype=np.int64)


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def test_window_kinds_are_the_models():
    assert {attainment.ROLLING_28D, attainment.CALENDAR_MONTH} == set(WindowKind.values)


@pytest.mark.parametrize(
    ("good", "total", "target", "met", "bad", "allowed", "remaining", "consumed"),
    [
        pytest.param(999, 1000, "99.900", True, 1, "1", "0", 100.0, id="exactly-on-target"),
        pytest.param(998, 1000, "99.900", False, 2, "1", "-1", 200.0, id="one-request-short"),
        pytest.param(1000, 1000, "99.900", True, 0, "1", "1", 0.0, id="budget-untouched"),
        # 99.9% of 1,001 requests allows 1.001 bad ones: one is within, two are not.
        pytest.param(1000, 1001, "99.900", True, 1, "1.001", "0.001", 99.9000999000999, id="fr-in"),
        pytest.param(
            999, 1001, "99.900", False, 2, "1.001", "-0.999", 199.8001998001998, id="fr-out"
        ),
        # 95% attained against 95.001%: short by a thousandth of a percent, still not met.
        pytest.param(95, 100, "95.001", False, 5, "4.999", "-0.001", 100.0200040008002, id="hair"),
    ],
)
def test_budget_is_exact(good, total, target, met, bad, allowed, remaining, consumed):
    result = budget(good, total, Decimal(target))

    assert result.met is met
    assert result.bad == bad
    assert result.allowed_bad == Decimal(allowed)
    assert result.remaining_bad == Decimal(remaining)
    assert result.consumed_percent == pytest.approx(consumed, rel=1e-12)
    assert result.remaining_percent == pytest.approx(100 - consumed, rel=1e-12)


def test_attainment_is_the_float_nearest_the_exact_ratio():
    assert budget(999, 1000, Decimal("99.9")).attainment_percent == 99.9
    assert budget(1, 3, Decimal("10")).attainment_percent == 100 / 3


def test_empty_window_has_no_attainment_not_100_percent():
    result = budget(0, 0, Decimal("99.9"))

    assert result.attainment_percent is None
    assert result.met is None
    assert result.allowed_bad == 0
    assert result.remaining_bad == 0
    assert result.consumed_percent is None
    assert result.remaining_percent is None


@pytest.mark.parametrize(
    ("good", "total", "met"),
    [pytest.param(5, 5, True, id="all-good"), pytest.param(4, 5, False, id="one-bad")],
)
def test_a_100_percent_target_has_no_budget_to_divide(good, total, met):
    result = budget(good, total, Decimal(100))

    assert result.met is met
    assert result.allowed_bad == 0
    assert result.consumed_percent is None


def test_budget_refuses_more_good_than_total():
    with pytest.raises(ValueError, match="good <= total"):
        budget(3, 2, Decimal(99))


@pytest.mark.parametrize(
    ("now", "start", "end"),
    [
        pytest.param(
            "2026-03-01T00:00:00+00:00",
            "2026-03-01T00:00:00+00:00",
            "2026-03-01T00:01:00+00:00",
            id="first-instant-of-march",
        ),
        pytest.param(
            "2026-02-28T23:59:59.999999+00:00",
            "2026-02-01T00:00:00+00:00",
            "2026-03-01T00:00:00+00:00",
            id="last-instant-of-february",
        ),
        pytest.param(
            "2028-02-29T12:30:10+00:00",
            "2028-02-01T00:00:00+00:00",
            "2028-02-29T12:31:00+00:00",
            id="leap-day",
        ),
        pytest.param(
            "2026-12-31T23:59:00+00:00",
            "2026-12-01T00:00:00+00:00",
            "2027-01-01T00:00:00+00:00",
            id="new-years-eve",
        ),
        # Already March in Athens, still February in UTC: months are UTC months.
        pytest.param(
            "2026-03-01T01:30:00+02:00",
            "2026-02-01T00:00:00+00:00",
            "2026-02-28T23:31:00+00:00",
            id="utc-not-local",
        ),
    ],
)
def test_calendar_month_window_is_a_utc_month_up_to_the_current_minute(now, start, end):
    window = objective_window(attainment.CALENDAR_MONTH, dt.datetime.fromisoformat(now))

    assert window == Window(
        attainment.CALENDAR_MONTH, dt.datetime.fromisoformat(start), dt.datetime.fromisoformat(end)
    )


def test_rolling_window_is_28_days_of_whole_minutes_ending_with_the_current_one():
    window = objective_window(attainment.ROLLING_28D, T0 + dt.timedelta(seconds=30))

    assert window.start == dt.datetime(2026, 10, 23, 12, 1, tzinfo=dt.UTC)
    assert window.end == dt.datetime(2026, 11, 20, 12, 1, tzinfo=dt.UTC)
    assert window.end - window.start == dt.timedelta(minutes=28 * 1440)


def test_windows_refuse_naive_time():
    with pytest.raises(ValueError, match="aware"):
        objective_window(attainment.ROLLING_28D, dt.datetime(2026, 11, 20))


def test_series_sums_minutes_into_steps_aligned_to_start():
    buckets = series(
        minute(0),
        minute(180),
        HOUR,
        unix(0, 59, 60, 179),
        ints(10, 5, 0, 7),
        ints(10, 6, 3, 7),
    )

    assert buckets == (
        Bucket(minute(0), minute(60), 15, 16, 100 * 15 / 16),
        Bucket(minute(60), minute(120), 0, 3, 0.0),
        Bucket(minute(120), minute(180), 7, 7, 100.0),
    )


def test_series_has_empty_steps_without_attainment():
    buckets = series(minute(0), minute(120), HOUR, ints(), ints(), ints())

    assert buckets == (
        Bucket(minute(0), minute(60), 0, 0, None),
        Bucket(minute(60), minute(120), 0, 0, None),
    )


def test_series_cuts_the_last_step_at_end_and_ignores_rows_outside():
    buckets = series(
        minute(0), minute(90), HOUR, unix(-1, 0, 89, 90), ints(1, 2, 3, 4), ints(1, 2, 3, 4)
    )

    assert buckets == (
        Bucket(minute(0), minute(60), 2, 2, 100.0),
        Bucket(minute(60), minute(90), 3, 3, 100.0),
    )


def test_series_sums_stay_exact_beyond_float_precision():
    big = 2**53 + 1  # float64 would round this to 2**53

    (bucket,) = series(minute(0), minute(60), HOUR, unix(0, 1), ints(big, 1), ints(big, 1))

    assert bucket.good == bucket.total == 2**53 + 2


@pytest.mark.parametrize(
    ("start", "end", "step", "count"),
    [
        pytest.param(0, 60, HOUR, 1, id="one"),
        pytest.param(0, 61, HOUR, 2, id="partial-last"),
        pytest.param(0, 0, HOUR, 0, id="empty"),
        pytest.param(60, 0, HOUR, 0, id="reversed"),
        pytest.param(0, 28 * 1440, dt.timedelta(days=1), 28, id="28-days"),
    ],
)
def test_bucket_count(start, end, step, count):
    assert bucket_count(minute(start), minute(end), step) == count


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(dt.timedelta(0), id="zero"),
        pytest.param(-HOUR, id="negative"),
        pytest.param(dt.timedelta(seconds=1.5), id="fractional"),
    ],
)
def test_bucket_count_refuses_bad_steps(step):
    with pytest.raises(ValueError, match="step"):
        bucket_count(minute(0), minute(60), step)


def at(minutes: int, seconds: float = 0) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes, seconds=seconds)


# --- maintenance windows: which minutes they exclude; the budget over time ---------------


@pytest.mark.parametrize(
    ("windows", "expected"),
    [
        pytest.param([(at(0), at(5))], [(at(0), at(5))], id="whole-minutes"),
        pytest.param(
            [(at(0, 30), at(5))],
            [(at(1), at(5))],
            id="starts-mid-minute",
        ),
        pytest.param([(at(0), at(4, 30))], [(at(0), at(5))], id="ends-mid-minute"),
        pytest.param([(at(0, 10), at(0, 50))], [], id="inside-one-minute-no-start"),
        pytest.param(
            [(at(0), at(0, 1))],
            [(at(0), at(1))],
            id="one-second-on-a-start",
        ),
        pytest.param(
            [
                (at(20), at(30)),
                (at(0), at(10)),
                (at(5), at(12)),
            ],
            [(at(0), at(12)), (at(20), at(30))],
            id="overlapping-merged-and-sorted",
        ),
        pytest.param(
            [(at(0), at(5)), (at(5), at(9))],
            [(at(0), at(9))],
            id="touching-merged",
        ),
        pytest.param(
            [(at(0), at(5)), (at(1), at(2))],
            [(at(0), at(5))],
            id="nested",
        ),
        pytest.param(
            [(at(-30), at(3)), (at(58), at(90))],
            [(at(0), at(3)), (at(58), at(60))],
            id="clipped",
        ),
        pytest.param([(at(60), at(70)), (at(-10), at(0))], [], id="outside"),
    ],
)
def test_excluded_minutes_are_those_starting_inside_a_window(windows, expected):
    ranges = excluded_minutes(windows, at(0), at(60))

    assert ranges == tuple(MinuteRange(start, end) for start, end in expected)


def test_excluded_minutes_refuse_naive_times():
    with pytest.raises(ValueError, match="aware"):
        excluded_minutes([(dt.datetime(2026, 11, 2, 10), at(5))], at(0), at(60))


def test_ceil_minute():
    assert ceil_minute(at(3)) == at(3)
    assert ceil_minute(at(3, 0.000001)) == at(4)
    assert ceil_minute(at(3, 59.5)) == at(4)


def test_burn_down_is_the_budget_of_the_counts_so_far():
    buckets = [
        Bucket(at(0), at(60), 0, 0, None),
        Bucket(at(60), at(120), 999, 1000, 99.9),
        Bucket(at(120), at(180), 998, 1000, 99.8),
    ]

    points = burn_down(buckets, Decimal("99.9"))

    # 1 bad of 1 allowed, then 3 bad of 2 allowed
    assert points == (
        BudgetPoint(at(60), 0, 0, None),
        BudgetPoint(at(120), 999, 1000, 0.0),
        BudgetPoint(at(180), 1997, 2000, -50.0),
    )
    assert points[-1].remaining_percent == budget(1997, 2000, Decimal("99.9")).remaining_percent


def test_burn_down_of_a_100_percent_target_has_no_budget():
    points = burn_down([Bucket(at(0), at(60), 5, 5, 100.0)], Decimal(100))

    assert points == (BudgetPoint(at(60), 5, 5, None),)


def test_budget_counting_maintenance_adds_the_excluded_counts_back():
    window = Window(attainment.ROLLING_28D, at(0), at(60))
    kept = WindowBudget(window, budget(1999, 2000, Decimal(99)), Counts(90, 100))

    assert kept.counting_maintenance() == budget(2089, 2100, Decimal(99))
