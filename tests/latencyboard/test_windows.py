"""Tests for latencyboard.windows: Unix nanoseconds, step grid, resolution choice, retention
fallback."""

from __future__ import annotations

import datetime as dt

import pytest

from latencyboard.windows import (
    MAX_SERIES_WINDOW,
    Resolution,
    Segment,
    StoredRows,
    WindowPlan,
    align,
    check_step,
    check_window,
    choose_resolution,
    cover_window,
    duration_ns,
    finest_cover,
    floor_minute,
    from_unix_ns,
    plan_window,
    point_count,
    preferred_resolution,
    unix_ns,
)

MINUTE, HOUR, DAY = 60, 3600, 86400
NOW = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def ago(**delta: float) -> dt.datetime:
    return NOW - dt.timedelta(**delta)


def stored(first: dt.datetime, last: dt.datetime = NOW) -> StoredRows:
    return StoredRows(first, last)


# The rollup worker's steady state at noon: minutes for 2 days up to now; hours for 90 days
# up to 10:00 (11:00 is compacted at 12:05); days for two years up to yesterday.
STEADY: dict[Resolution, StoredRows | None] = {
    "minute": stored(ago(days=2), at("2026-03-10 11:59")),
    "hour": stored(ago(days=90), at("2026-03-10 10:00")),
    "day": stored(ago(days=730), at("2026-03-09 00:00")),
}
# A pipeline whose first spans arrived at 10:37 today: its first hour row starts at 10:00.
FRESH: dict[Resolution, StoredRows | None] = {
    "minute": stored(at("2026-03-10 10:37")),
    "hour": stored(at("2026-03-10 10:00"), at("2026-03-10 10:00")),
    "day": None,
}
NO_DAYS: dict[Resolution, StoredRows | None] = {
    "minute": stored(ago(days=2)),
    "hour": stored(ago(days=5)),
    "day": None,
}
ONLY_MINUTES: dict[Resolution, StoredRows | None] = {
    "minute": stored(ago(days=5)),
    "hour": None,
    "day": None,
}
NO_ROWS: dict[Resolution, StoredRows | None] = {"minute": None, "hour": None, "day": None}


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (MINUTE, "minute"),
        (5 * MINUTE, "minute"),
        (15 * MINUTE, "minute"),
        (30 * MINUTE, "minute"),
        (HOUR, "hour"),
        (6 * HOUR, "hour"),
        (12 * HOUR, "hour"),
        (DAY, "day"),
        (7 * DAY, "day"),
    ],
    ids=["1m", "5m", "15m", "30m", "1h", "6h", "12h", "1d", "7d"],
)
def test_preferred_resolution_is_the_coarsest_that_nests_in_the_step(step, expected):
    assert preferred_resolution(step) == expected


@pytest.mark.parametrize(
    "step",
    [MINUTE, 2 * MINUTE, 5 * MINUTE, 15 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 6 * HOUR,
     12 * HOUR, DAY, 7 * DAY],
    ids=["1m", "2m", "5m", "15m", "30m", "1h", "2h", "6h", "12h", "1d", "7d"],
)  # fmt: skip
def test_steps_that_nest_with_every_resolution_are_accepted(step):
    check_step(step)


@pytest.mark.parametrize(
    "step",
    [0, -HOUR, 30, 90, 7 * MINUTE, 45 * MINUTE, 90 * MINUTE, 5 * HOUR, 36 * HOUR],
    ids=["zero", "negative", "30s", "90s", "7m", "45m", "90m", "5h", "36h"],
)
def test_steps_that_straddle_rollup_rows_are_rejected(step):
    with pytest.raises(ValueError, match="step must"):
        check_step(step)


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (NOW, NOW, "must end after it starts"),
        (NOW, ago(hours=1), "must end after it starts"),
        (NOW - MAX_SERIES_WINDOW - dt.timedelta(minutes=1), NOW, "at most 400 days"),
    ],
    ids=["empty", "reversed", "401-days"],
)
def test_bad_windows_are_rejected(start, end, message):
    with pytest.raises(ValueError, match=message):
        check_window(start, end)


def test_a_window_of_exactly_400_days_is_accepted():
    check_window(NOW - MAX_SERIES_WINDOW, NOW)


@pytest.mark.parametrize(
    ("start", "end", "step", "expected_start", "expected_end"),
    [
        ("2026-03-10 10:37", "2026-03-10 12:05", HOUR, "2026-03-10 10:00", "2026-03-10 13:00"),
        ("2026-03-10 10:00", "2026-03-10 12:00", HOUR, "2026-03-10 10:00", "2026-03-10 12:00"),
        (
            "2026-03-10 10:07",
            "2026-03-10 10:08",
            5 * MINUTE,
            "2026-03-10 10:05",
            "2026-03-10 10:10",
        ),
        (
            "2026-03-10 10:00:30",
            "2026-03-10 10:00:31",
            MINUTE,
            "2026-03-10 10:00",
            "2026-03-10 10:01",
        ),
        ("2026-03-10 05:00", "2026-03-10 07:00", 6 * HOUR, "2026-03-10 00:00", "2026-03-10 12:00"),
        ("2026-03-09 23:00", "2026-03-10 01:00", DAY, "2026-03-09 00:00", "2026-03-11 00:00"),
    ],
    ids=[
        "hour-unaligned",
        "hour-aligned",
        "5m",
        "sub-minute",
        "6h-from-midnight",
        "day-at-midnight-utc",
    ],
)
def test_windows_widen_to_the_epoch_anchored_step_grid(
    start, end, step, expected_start, expected_end
):
    assert align(at(start), at(end), step) == (at(expected_start), at(expected_end))


@pytest.mark.parametrize(
    ("start", "end", "step", "series", "expected"),
    [
        (ago(days=7), NOW, HOUR, 7, 168 * 7),
        (ago(days=7, minutes=30), NOW - dt.timedelta(minutes=30), HOUR, 7, 169 * 7),
        (ago(days=1), NOW, MINUTE, 1, 1440),
        (ago(days=400), NOW, DAY, 2, 401 * 2),  # noon to noon spans 401 UTC days
    ],
    ids=[
        "week-hourly-aligned",
        "week-hourly-unaligned",
        "day-by-minute",
        "400-days-daily-noon-to-noon",
    ],
)
def test_point_count_counts_aligned_buckets_times_series(start, end, step, series, expected):
    assert point_count(start, end, step, series) == expected


@pytest.mark.parametrize(
    ("start", "end", "step", "earliest", "expected"),
    [
        (ago(hours=6), NOW, 5 * MINUTE, STEADY, "minute"),
        (ago(days=7), NOW, HOUR, STEADY, "hour"),
        (ago(days=30), NOW, 6 * HOUR, STEADY, "hour"),
        (ago(days=365), NOW, DAY, STEADY, "day"),
        (ago(days=7), NOW, 5 * MINUTE, STEADY, "hour"),
        (ago(days=5), ago(days=3), MINUTE, STEADY, "hour"),
        (ago(days=200), ago(days=100), HOUR, STEADY, "day"),
        (ago(days=200), ago(days=100), 15 * MINUTE, STEADY, "day"),
        (ago(days=100), ago(days=95), HOUR, STEADY, "day"),
        (ago(days=89), ago(days=80), HOUR, STEADY, "hour"),
        (ago(hours=3), NOW, HOUR, ONLY_MINUTES, "minute"),
        (ago(days=3), NOW, DAY, NO_DAYS, "hour"),
        (ago(days=3), NOW, DAY, ONLY_MINUTES, "minute"),
        (at("2026-03-10 09:00"), NOW, 5 * MINUTE, FRESH, "minute"),
        (at("2026-03-10 09:00"), NOW, HOUR, FRESH, "hour"),
        (ago(days=1), NOW, HOUR, NO_ROWS, "hour"),
        (ago(days=1), NOW, 5 * MINUTE, NO_ROWS, "minute"),
    ],
    ids=[
        "5m-within-minute-retention",
        "1h-week",
        "6h-month",
        "1d-year",
        "5m-week-minutes-expired-falls-back-to-hours",
        "1m-window-wholly-before-minute-retention",
        "1h-beyond-hour-retention-falls-back-to-days",
        "15m-beyond-hour-retention-falls-back-to-days",
        "1h-window-straddling-hour-retention",
        "1h-window-just-inside-hour-retention",
        "1h-hour-rows-not-written-yet-uses-minutes",
        "1d-day-rows-not-written-yet-uses-hours",
        "1d-only-minutes-uses-minutes",
        "fresh-pipeline-first-span-mid-hour-is-not-a-gap",
        "fresh-pipeline-hourly",
        "no-rows-at-all-keeps-hour",
        "no-rows-at-all-keeps-minute",
    ],
)  # fmt: skip
def test_resolution_choice(start, end, step, earliest, expected):
    assert choose_resolution(start, end, step, earliest) == expected


def test_falling_back_to_coarser_rows_widens_the_step_and_realigns():
    plan = plan_window(at("2026-03-03 10:07"), at("2026-03-10 11:52"), 5 * MINUTE, STEADY)

    assert (plan.start, plan.end, plan.step_seconds) == (
        at("2026-03-03 10:00"),
        at("2026-03-10 12:00"),
        HOUR,
    )
    assert plan.bucket_count == 7 * 24 + 2
    assert plan.resolution == "hour"


def test_finer_rows_keep_the_step_asked_for():
    plan = plan_window(ago(hours=3), NOW, HOUR, ONLY_MINUTES)

    assert plan == WindowPlan(ago(hours=3), NOW, HOUR, (Segment("minute", ago(hours=3), NOW),))
    assert plan.bucket_count == 3


@pytest.mark.parametrize(
    ("start", "end", "step", "rows", "expected"),
    [
        (ago(days=7), NOW, HOUR, STEADY, [
            ("hour", ago(days=7), at("2026-03-10 11:00")),
            ("minute", at("2026-03-10 11:00"), NOW),
        ]),
        (at("2026-02-08 00:00"), NOW, DAY, STEADY, [
            ("day", at("2026-02-08 00:00"), at("2026-03-10 00:00")),
            ("hour", at("2026-03-10 00:00"), at("2026-03-10 11:00")),
            ("minute", at("2026-03-10 11:00"), at("2026-03-11 00:00")),
        ]),
        (ago(days=7), NOW, 5 * MINUTE, STEADY, [
            ("hour", ago(days=7), at("2026-03-10 11:00")),
            ("minute", at("2026-03-10 11:00"), NOW),
        ]),
        (ago(minutes=30), NOW, HOUR, STEADY, [("minute", ago(hours=1), NOW)]),
        (ago(hours=6), NOW, 5 * MINUTE, STEADY, [("minute", ago(hours=6), NOW)]),
        (ago(days=200), ago(days=100), HOUR, STEADY, [
            ("day", at("2025-08-22 00:00"), at("2025-12-01 00:00")),
        ]),
        (at("2026-03-10 09:00"), NOW, HOUR, FRESH, [
            ("minute", at("2026-03-10 09:00"), at("2026-03-10 10:00")),
            ("hour", at("2026-03-10 10:00"), at("2026-03-10 11:00")),
            ("minute", at("2026-03-10 11:00"), NOW),
        ]),
        (ago(days=1), NOW, HOUR, NO_ROWS, [("minute", ago(days=1), NOW)]),
    ],
    ids=[
        "week-hourly-current-hour-from-minutes",
        "month-daily-today-from-hours-then-minutes",
        "week-5m-falls-back-to-hours-plus-minutes",
        "within-the-uncompacted-hour-only-minutes",
        "minutes-only",
        "beyond-hour-retention-only-days",
        "fresh-pipeline",
        "no-rows",
    ],
)  # fmt: skip
def test_the_newest_part_of_a_window_is_read_from_finer_rows(start, end, step, rows, expected):
    plan = plan_window(start, end, step, rows)

    assert plan.segments == tuple(Segment(*segment) for segment in expected)


def test_a_fresh_pipelines_plan_is_at_the_resolution_most_of_it_comes_from():
    plan = plan_window(at("2026-03-10 09:00"), NOW, HOUR, FRESH)

    assert plan.resolution == "hour"


def test_plan_rejects_a_bad_step_before_looking_at_rows():
    with pytest.raises(ValueError, match="step must"):
        plan_window(ago(hours=3), NOW, 7 * MINUTE, STEADY)


def test_a_minute_is_floored_in_utc_whatever_the_zone_it_is_given_in():
    # given 12:34:56.7 in UTC+05:30, i.e. 07:04:56.7 UTC
    moment = dt.datetime(
        2026, 3, 10, 12, 34, 56, 700_000, tzinfo=dt.timezone(dt.timedelta(hours=5.5))
    )

    # then its minute starts at 07:04 UTC, and a naive moment is refused
    assert floor_minute(moment) == at("2026-03-10T07:04:00")
    assert floor_minute(moment).tzinfo is dt.UTC
    with pytest.raises(ValueError, match="aware"):
        floor_minute(dt.datetime(2026, 3, 10, 12, 34))


UTC = dt.UTC


@pytest.mark.parametrize(
    ("moment", "ns"),
    [
        pytest.param(dt.datetime(1970, 1, 1, tzinfo=UTC), 0, id="epoch"),
        pytest.param(
            dt.datetime(2026, 3, 10, 12, 0, 0, 250_001, tzinfo=UTC),
            1_773_144_000_250_001_000,
            id="microseconds-exact",
        ),
        pytest.param(
            dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), -1000, id="before-1970"
        ),
        pytest.param(dt.datetime(1, 1, 1, tzinfo=UTC), -62_135_596_800 * 10**9, id="year-1"),
        pytest.param(
            dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
            253_402_300_799_999_999_000,
            id="year-9999",
        ),
        pytest.param(
            dt.datetime(2026, 3, 10, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            1_773_144_000 * 10**9,
            id="other-zone",
        ),
    ],
)
def test_unix_ns_counts_every_nanosecond_from_the_epoch_and_back(moment, ns):
    assert unix_ns(moment) == ns
    assert from_unix_ns(ns) == moment


@pytest.mark.parametrize(
    ("ns", "moment"),
    [
        pytest.param(1999, dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), id="cut-not-rounded"),
        pytest.param(
            -1, dt.datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), id="before-1970-down"
        ),
        pytest.param(
            1_773_144_000_250_001_999,
            dt.datetime(2026, 3, 10, 12, 0, 0, 250_001, tzinfo=UTC),
            id="span-start",
        ),
    ],
)
def test_from_unix_ns_cuts_to_the_microsecond_at_or_before(ns, moment):
    assert from_unix_ns(ns) == moment
    assert from_unix_ns(ns).tzinfo == UTC


def test_unix_ns_refuses_a_naive_datetime():
    with pytest.raises(TypeError):
        unix_ns(dt.datetime(2026, 3, 10, 12, 0))


def test_duration_ns_is_exact_for_long_durations():
    assert duration_ns(dt.timedelta(days=30)) == 30 * 86_400 * 10**9
    assert duration_ns(dt.timedelta(microseconds=-3)) == -3000


# --- tiling a window for a whole-window answer ----------------------------------------------

T = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)
H = dt.timedelta(hours=1)
D = dt.timedelta(days=1)
M = dt.timedelta(minutes=1)

# Days compacted up to the 8th, hours up to 11:00 on the 10th, minutes for the last 2 days.
STORED: dict[Resolution, StoredRows | None] = {
    "day": StoredRows(T - 30 * D, T - 2 * D),
    "hour": StoredRows(T - 20 * D, T + 11 * H),
    "minute": StoredRows(T - 2 * D, T + 12 * H + 10 * M),
}


def test_a_window_is_tiled_by_days_then_hours_then_minutes_without_overlap():
    start, end = T - 5 * D + 30 * M, T + 12 * H + 7 * M

    segments = cover_window(start, end, STORED)

    assert segments == [
        Segment("minute", start, T - 5 * D + H),
        Segment("hour", T - 5 * D + H, T - 4 * D),
        Segment("day", T - 4 * D, T - D),
        Segment("hour", T - D, T + 12 * H),
        Segment("minute", T + 12 * H, end),
    ]


def test_a_pipeline_without_coarse_rows_is_read_from_minutes():
    only_minutes: dict[Resolution, StoredRows | None] = {"minute": StoredRows(T, T + 9 * M)}

    segments = cover_window(T, T + 10 * M, only_minutes)

    assert segments == [Segment("minute", T, T + 10 * M)]


def test_finest_cover_prefers_minutes_then_hours_then_days():
    segments = finest_cover(T - 25 * D + 5 * H, T + 12 * H, STORED)

    assert segments == [
        Segment("day", T - 25 * D, T - 20 * D),
        Segment("hour", T - 20 * D, T - 2 * D),
        Segment("minute", T - 2 * D, T + 12 * H),
    ]
