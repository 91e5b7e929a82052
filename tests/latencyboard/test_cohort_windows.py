"""Which rollup rows a whole-window answer merges, and the cohort cap (pure, no database)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from latencyboard.rollups.cohort_windows import cover_window, finest_cover
from latencyboard.rollups.cohorts import OTHER, _sorted_by, admit_values
from latencyboard.windows import Resolution, Segment, StoredRows

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


# --- the cardinality cap (pure) ----------------------------------------------------------------


def test_values_already_stored_that_day_keep_their_place_and_new_ones_fill_the_cap():
    minute = int(T.timestamp()) // 60
    day = minute * 60 // 86_400 * 86_400

    key = (1, "model.version", day)
    counts = {key: {"v1": 5, "v2": 50, "v3": 30, "v4": 40}}

    stored_as = admit_values(counts, {key: {"v1", OTHER}}, cap=3)

    assert {value: stored_as[(key, value)] for value in ("v1", "v2", "v3", "v4")} == {
        "v1": "v1",
        "v2": "v2",
        "v3": OTHER,
        "v4": "v4",
    }


# --- the fold's sort order (pure) ------------------------------------------------------------


@pytest.mark.parametrize("spread", [10, 2**40], ids=["packed", "too-wide-to-pack"])
def test_cohort_folds_sort_by_pipeline_cohort_stage_and_minute(spread):
    rng = np.random.default_rng(5)
    columns = [rng.integers(0, 4, size=5000) * spread for _ in range(4)]

    order = _sorted_by(columns)

    np.testing.assert_array_equal(order, np.lexsort(columns[::-1]))
