"""Quarters and their months in UTC (pure)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from latencyboard.windows import floor_minute


@dataclass(frozen=True, slots=True)
class Period:
    """``[start, end)``; ``label`` is ``2026-04`` for a month, ``2026-Q2`` for a quarter."""

    label: str
    start: dt.datetime
    end: dt.datetime


def _month_start(year: int, month: int) -> dt.datetime:
    return dt.datetime(year + (month - 1) // 12, (month - 1) % 12 + 1, 1, tzinfo=dt.UTC)


def quarter(year: int, number: int) -> Period:
    if not 1 <= number <= 4:
        raise ValueError("quarter must be 1 to 4")
    first = 3 * (number - 1) + 1
    return Period(f"{year}-Q{number}", _month_start(year, first), _month_start(year, first + 3))


def months(year: int, number: int) -> tuple[Period, ...]:
    quarter(year, number)  # validates number
    first = 3 * (number - 1) + 1
    return tuple(
        Period(
            f"{year}-{first + i:02d}",
            _month_start(year, first + i),
            _month_start(year, first + i + 1),
        )
        for i in range(3)
    )


def clip(period: Period, start: dt.datetime | None, end: dt.datetime | None) -> Period | None:
    """``period`` cut to ``[start, end)`` (None: unbounded); None when nothing is left."""
    lo = period.start if start is None else max(period.start, start)
    hi = period.end if end is None else min(period.end, end)
    return Period(period.label, lo, hi) if lo < hi else None


def cut_off_minute(as_of: dt.datetime) -> dt.datetime:
    """The end of the last whole minute before ``as_of``: a report counts nothing later."""
    return floor_minute(as_of)


def provisional(quarter: Period, as_of: dt.datetime) -> bool:
    """Whether a report cut off at ``as_of`` covers less than the whole ``quarter``."""
    return cut_off_minute(as_of) < quarter.end
