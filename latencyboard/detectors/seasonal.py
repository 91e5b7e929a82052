"""Same-hours-of-day baselines: a stage with a daily cycle is compared with itself at the
same time of day, not with its week's average (pure: no Django).

A stage 30% slower every night is not a regression, yet against the trailing week's
baseline it is one every night. So at the start of each hour the baseline job merges, for
each stage, the hours around the hour ahead from each of the previous ``days`` days: the
hour before it to the hour after it (``HOURS_BEFORE``, ``HOURS_AFTER``), enough values at
a quiet hour, close enough in time that a daily cycle of +-30% leaves the baseline's p90 within
6% of the window's (the effect floor is 20%; the more requests an hour has, the more it
weighs in the merge, so a span is not quite centred where traffic grows).

Merging several days keeps one bad day from becoming the norm (it is a seventh of the
values). A stage falls back to the trailing baseline until the same hours hold
``MIN_DAYS`` days with values and the rule's minimum count: a new pipeline, a stage too
quiet at that hour.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Final

from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.windows import HOUR, floor_to

__all__ = [
    "HOURS_AFTER",
    "HOURS_BEFORE",
    "MIN_DAYS",
    "day_spans",
    "hour_offsets",
    "seasonal_sketch",
]

HOURS_BEFORE: Final = 1
HOURS_AFTER: Final = 2
MIN_DAYS: Final = 3
"""Days whose same hours hold values before the seasonal baseline replaces the trailing one."""
DAY_HOURS: Final = 24


def hour_offsets(days: int) -> list[range]:
    """Per previous day (1 to ``days``), the hours of its span relative to the job's hour."""
    return [
        range(-DAY_HOURS * day - HOURS_BEFORE, -DAY_HOURS * day + HOURS_AFTER)
        for day in range(1, days + 1)
    ]


def day_spans(now: dt.datetime, days: int) -> list[tuple[dt.datetime, dt.datetime]]:
    """The ``[start, end)`` of each previous day's span, for a job running at ``now``."""
    hour = floor_to(now, HOUR)
    return [(hour + span.start * HOUR, hour + span.stop * HOUR) for span in hour_offsets(days)]


def seasonal_sketch(days: Sequence[Sketch], min_count: int) -> Sketch | None:
    """The previous days' spans merged, when ``MIN_DAYS`` of them hold values and together
    ``min_count``; else ``None`` (the trailing baseline stands)."""
    present = [sketch for sketch in days if sketch.count]
    if len(present) < MIN_DAYS:
        return None
    merged = merge_many(present)
    return merged if merged.count >= min_count else None
