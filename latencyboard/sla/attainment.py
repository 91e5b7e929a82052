"""SLA attainment and error budgets from exact minute counts (pure: numpy, no Django).

Everything here works on integers summed from :class:`~latencyboard.sla.models.SlaMinute`
rows, so an auditor re-counting raw spans gets the same numbers: whether an objective is met is
decided in exact decimal arithmetic, and percentages are only for display.

Maintenance windows take whole minutes out of every sum here: a minute is excluded when it
*starts* inside a window (see :func:`excluded_minutes`). The counters are never changed, so the
numbers with and without maintenance can both be recomputed from them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
from numpy.typing import NDArray

from latencyboard.windows import EPOCH, MINUTE, SECOND, ceil_minute, floor_minute

# The values of ``latencyboard.sla.models.Window``; repeated because this module stays pure.
ROLLING_28D = "rolling_28d"
CALENDAR_MONTH = "calendar_month"

# Enough for a year of hours or a quarter of 15-minute steps; more is no chart anyone reads.
MAX_BUCKETS = 10_000


@dataclass(frozen=True, slots=True)
class Window:
    """The minutes whose start lies in ``[start, end)``."""

    kind: str
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True, slots=True)
class Bucket:
    """Counts of one step of a series; ``attainment_percent`` is None when nothing was counted."""

    start: dt.datetime
    end: dt.datetime
    good: int
    total: int
    attainment_percent: float | None


@dataclass(frozen=True, slots=True)
class Budget:
    """Attainment of one window against its target, and what is left of the error budget.

    ``allowed_bad`` is ``(1 - target) * total`` exactly (a decimal: 99.9% of 1,001 requests
    allows 1.001 bad ones). Percentages of the budget are None when there is no budget to
    divide by (nothing counted yet, or a 100% target); ``met`` is None when nothing was counted.
    """

    good: int
    total: int
    bad: int
    target_percent: Decimal
    attainment_percent: float | None
    met: bool | None
    allowed_bad: Decimal
    remaining_bad: Decimal  # negative once the budget is overspent
    consumed_percent: float | None
    remaining_percent: float | None


@dataclass(frozen=True, slots=True)
class MinuteRange:
    """The minutes whose start lies in ``[start, end)``; both are whole minutes."""

    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True, slots=True)
class Counts:
    good: int
    total: int


@dataclass(frozen=True, slots=True)
class BudgetPoint:
    """The error budget left at ``at``, from the counts since the series' start."""

    at: dt.datetime
    good: int
    total: int
    remaining_percent: float | None


@dataclass(frozen=True, slots=True)
class WindowBudget:
    """The objective's window as of now: its budget without maintenance minutes, and the
    counts of the maintenance minutes left out (``summary`` plus ``excluded`` is the window
    with maintenance counted)."""

    window: Window
    summary: Budget
    excluded: Counts

    def counting_maintenance(self) -> Budget:
        """The window's budget as it would be with its maintenance minutes counted."""
        return budget(
            self.summary.good + self.excluded.good,
            self.summary.total + self.excluded.total,
            self.summary.target_percent,
        )


@dataclass(frozen=True, slots=True)
class AttainmentSeries:
    """Per-step counts over ``[start, end)`` and the objective's own window as of now.

    ``buckets`` and ``burn_down`` leave out the minutes in ``maintenance`` (the excluded
    ranges within ``[start, end)``), as ``summary`` leaves out those within ``window``.
    """

    start: dt.datetime
    end: dt.datetime
    step: dt.timedelta
    buckets: tuple[Bucket, ...]
    burn_down: tuple[BudgetPoint, ...]
    maintenance: tuple[MinuteRange, ...]
    window: Window
    summary: Budget
    excluded: Counts


def _utc(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        raise ValueError("aware datetimes only")
    return moment.astimezone(dt.UTC)


def objective_window(kind: str, now: dt.datetime) -> Window:
    """The window an objective is judged over, as of ``now``.

    It ends after the current minute (whose counts may still grow): rolling 28 days is the
    28 * 1,440 minutes up to and including it, a calendar month starts at midnight UTC on
    the month's first day.
    """
    now = _utc(now)
    end = floor_minute(now) + MINUTE
    if kind == ROLLING_28D:
        return Window(kind, end - dt.timedelta(days=28), end)
    if kind == CALENDAR_MONTH:
        return Window(kind, now.replace(day=1, hour=0, minute=0, second=0, microsecond=0), end)
    raise ValueError(f"unknown window {kind!r}")


def excluded_minutes(
    windows: Iterable[tuple[dt.datetime, dt.datetime]], start: dt.datetime, end: dt.datetime
) -> tuple[MinuteRange, ...]:
    """The minutes of ``[start, end)`` that maintenance ``windows`` exclude, sorted and merged.

    A minute is excluded when it starts inside a window ``[window_start, window_end)``: those
    are the minutes of ``[ceil_minute(window_start), ceil_minute(window_end))``. So a window of
    10:00:30 to 10:05:00 excludes 10:01 to 10:04 (10:00 started before it), one of 10:00:10
    to 10:00:50 excludes nothing, and one of 10:00 to 10:00:01 excludes 10:00. Overlapping and
    touching ranges are merged; ``start`` and ``end`` are rounded down to the minute.
    """
    start, end = floor_minute(start), floor_minute(end)
    ranges = sorted(
        (max(ceil_minute(window_start), start), min(ceil_minute(window_end), end))
        for window_start, window_end in windows
    )
    merged: list[MinuteRange] = []
    for range_start, range_end in ranges:
        if range_start >= range_end:
            continue
        if merged and range_start <= merged[-1].end:
            if range_end > merged[-1].end:
                merged[-1] = MinuteRange(merged[-1].start, range_end)
        else:
            merged.append(MinuteRange(range_start, range_end))
    return tuple(merged)


def bucket_count(start: dt.datetime, end: dt.datetime, step: dt.timedelta) -> int:
    """How many steps cover ``[start, end)``; the last one may be cut short by ``end``."""
    if step <= dt.timedelta(0) or step % SECOND:
        raise ValueError("step must be a positive whole number of seconds")
    span = _utc(end) - _utc(start)
    if span <= dt.timedelta(0):
        return 0
    return -(-span // step)


def unix_seconds(moment: dt.datetime) -> int:
    """Whole seconds since the Unix epoch; sub-second parts are not allowed."""
    since = _utc(moment) - EPOCH
    if since % SECOND:
        raise ValueError("whole seconds only")
    return since // SECOND


def attainment_percent(good: int, total: int) -> float | None:
    """``good`` as a percentage of ``total``; None for no requests (not 100%).

    One division of exact integers, so the float is the one nearest the true ratio.
    """
    if total == 0:
        return None
    return 100 * good / total


def series(
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    minutes: NDArray[np.int64],
    good: NDArray[np.int64],
    total: NDArray[np.int64],
) -> tuple[Bucket, ...]:
    """Sum minute counts into steps of ``step`` aligned to ``start``, empty steps included.

    ``minutes`` are Unix seconds of each row's start (a minute, or an already summed bucket
    aligned to ``start``); rows outside ``[start, end)`` are ignored. Sums stay int64.
    """
    n = bucket_count(start, end, step)
    start_s, end_s = unix_seconds(start), unix_seconds(end)
    step_s = step // SECOND
    inside = (minutes >= start_s) & (minutes < end_s)
    index = (minutes[inside] - start_s) // step_s
    goods = np.zeros(n, dtype=np.int64)
    totals = np.zeros(n, dtype=np.int64)
    # add.at, not bincount: bincount's weights are float64 and would round large counts.
    np.add.at(goods, index, good[inside])
    np.add.at(totals, index, total[inside])
    buckets = []
    for i in range(n):
        bucket_start = _utc(start) + i * step
        bucket_end = min(bucket_start + step, _utc(end))
        g, t = int(goods[i]), int(totals[i])
        buckets.append(Bucket(bucket_start, bucket_end, g, t, attainment_percent(g, t)))
    return tuple(buckets)


def budget(good: int, total: int, target_percent: Decimal) -> Budget:
    """Attainment and error budget of ``good`` out of ``total`` against ``target_percent``."""
    if not 0 <= good <= total:
        raise ValueError("need 0 <= good <= total")
    bad = total - good
    allowed = (100 - target_percent) * total / 100
    remaining = allowed - bad
    consumed_percent = float(100 * bad / allowed) if allowed else None
    return Budget(
        good=good,
        total=total,
        bad=bad,
        target_percent=target_percent,
        attainment_percent=attainment_percent(good, total),
        # Exact: good / total >= target / 100, without a float in the way.
        met=good * 100 >= target_percent * total if total else None,
        allowed_bad=allowed,
        remaining_bad=remaining,
        consumed_percent=consumed_percent,
        remaining_percent=None if consumed_percent is None else 100 - consumed_percent,
    )


def burn_down(buckets: Iterable[Bucket], target_percent: Decimal) -> tuple[BudgetPoint, ...]:
    """The error budget left at the end of each bucket, counting from the first one.

    Each point is :func:`budget` of the counts so far, so over an objective's window the last
    point equals the window's summary. ``remaining_percent`` is None until something was
    counted (or for a 100% target, which has no budget).
    """
    good = total = 0
    points = []
    for bucket in buckets:
        good += bucket.good
        total += bucket.total
        remaining = budget(good, total, target_percent).remaining_percent
        points.append(BudgetPoint(bucket.end, good, total, remaining))
    return tuple(points)
