"""Same-hours-of-day baselines: which hours they merge, and when the trailing baseline stands."""

from __future__ import annotations

import datetime as dt

import numpy as np

from latencyboard.detectors import seasonal
from latencyboard.sketches.sketch import Sketch


def test_the_spans_are_the_hour_before_to_the_hour_after_on_each_previous_day() -> None:
    spans = seasonal.day_spans(dt.datetime(2026, 3, 10, 11, 0, 20, tzinfo=dt.UTC), days=7)

    assert len(spans) == 7
    assert spans[0] == (
        dt.datetime(2026, 3, 9, 10, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 9, 13, tzinfo=dt.UTC),
    )
    assert spans[-1] == (
        dt.datetime(2026, 3, 3, 10, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 3, 13, tzinfo=dt.UTC),
    )


def day(n: int, seed: int) -> Sketch:
    return Sketch.from_values(np.random.default_rng(seed).lognormal(3.0, 0.5, n))


def test_three_days_with_enough_values_make_the_seasonal_baseline() -> None:
    days = [day(4000, 1), Sketch(), day(4000, 2), day(4000, 3)]

    merged = seasonal.seasonal_sketch(days, min_count=10_000)

    assert merged is not None
    assert merged.count == 12_000


def test_too_few_days_or_values_leave_the_trailing_baseline() -> None:
    # Two days of history (a new pipeline), however busy: one day would be the norm.
    assert seasonal.seasonal_sketch([day(9000, 1), day(9000, 2)], min_count=10_000) is None
    # Three days, too quiet at this hour together.
    assert seasonal.seasonal_sketch([day(3000, s) for s in range(3)], min_count=10_000) is None
