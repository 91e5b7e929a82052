"""Reads of tiered retention: which periods of raw spans are sampled, and at what rate."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from latencyboard.retention.models import ThinnedDay


@dataclass(frozen=True, slots=True)
class SampledPeriod:
    """Consecutive UTC days thinned at one rate: ``first`` to ``last`` inclusive."""

    first: dt.date
    last: dt.date
    percent: int


def sampled_periods(
    start: dt.datetime | None = None, end: dt.datetime | None = None
) -> list[SampledPeriod]:
    """The thinned days overlapping ``[start, end)`` (None: unbounded), as runs of days.

    Thinning applies to every team's spans alike, so this says nothing about any one team.
    """
    days = ThinnedDay.objects.order_by("day")
    if start is not None:
        days = days.filter(day__gte=start.astimezone(dt.UTC).date())
    if end is not None:
        days = days.filter(day__lte=(end - dt.timedelta(microseconds=1)).astimezone(dt.UTC).date())
    periods: list[SampledPeriod] = []
    for day, percent in days.values_list("day", "sample_percent"):
        last = periods[-1] if periods else None
        if last and last.percent == percent and last.last + dt.timedelta(days=1) == day:
            periods[-1] = SampledPeriod(last.first, day, percent)
        else:
            periods.append(SampledPeriod(day, day, percent))
    return periods
