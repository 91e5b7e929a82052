"""The cohort cap and the cohort fold's sort order (pure, no database)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from latencyboard.rollups.cohorts import OTHER, _sorted_by, admit_values

T = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)

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
