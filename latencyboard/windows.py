"""Time, and which rollup rows answer a window: the one home of both.

Pure (no Django): aware UTC datetimes in, frozen dataclasses out. The bottom row of the
package layers (docs/architecture.md), so every module takes its epoch, minute, hour and day,
its conversions to and from Unix nanoseconds (how OpenTelemetry stamps spans) and its longest
windows from here, and every rollup read lays windows on one grid.

The rollup worker writes minute rows as spans arrive and compacts a whole hour into hour rows
a few minutes after it ends, a whole day into day rows after its last hour; retention then
drops minutes first, hours next. So the newest part of any window exists only in finer rows
and the oldest only in coarser ones. A window is tiled (:func:`cover_window`) with the
coarsest rows stored for each part and finer ones around them (*segments*); the segments never
overlap in time, so no span is counted twice. A read that merges the window into one sketch
takes every resolution; a read in step buckets (:func:`plan_window`) takes none coarser than
its step allows.

Step buckets are anchored at the Unix epoch, so a 1-hour step starts every bucket on the hour
and a 1-day step at midnight UTC, whatever window is asked for. A step is accepted only when it
nests with every rollup resolution: it divides an hour (1m, 5m, 15m, 30m), or is whole hours
dividing a day (1h, 2h, 6h, 12h), or is whole days. Then every rollup row lies inside exactly
one step bucket, whichever resolution is read, and falling back to a coarser resolution just
widens the step to that resolution.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final, Literal

Resolution = Literal["minute", "hour", "day"]

RESOLUTIONS: Final[tuple[Resolution, ...]] = ("minute", "hour", "day")
"""Finest first; the values of ``latencyboard.rollups.models.Resolution``."""

EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
"""The Unix epoch: what Unix timestamps count from, and where every step grid is anchored."""

SECOND: Final = dt.timedelta(seconds=1)
MINUTE: Final = dt.timedelta(minutes=1)
HOUR: Final = dt.timedelta(hours=1)
DAY: Final = dt.timedelta(days=1)
_MICROSECOND: Final = dt.timedelta(microseconds=1)

RESOLUTION_SECONDS: Final[Mapping[Resolution, int]] = {
    "minute": MINUTE // SECOND,
    "hour": HOUR // SECOND,
    "day": DAY // SECOND,
}

MAX_SERIES_WINDOW: Final = dt.timedelta(days=400)
"""Longest window a series of rollups (a chart, the percentiles API, PromQL) may cover: a year
plus a quarter, for year-over-year views. Also the longest duration any request may name."""

MAX_COMPARE_WINDOW: Final = dt.timedelta(days=31)
"""Longest window of each side of a comparison."""

MAX_TRACE_SEARCH_WINDOW: Final = dt.timedelta(hours=24)
"""Longest window a trace search or an exemplar read may cover: they read raw spans, so their
cost grows with the spans stored in the window."""

MAX_POINTS: Final = 5000
"""Most step buckets times series one query may return (a chart has no use for more)."""


@dataclass(frozen=True)
class StoredRows:
    """Starts of the oldest and the newest stored row of one resolution (of one pipeline)."""

    first: dt.datetime
    last: dt.datetime


@dataclass(frozen=True)
class Segment:
    """Read rows of ``resolution`` starting in ``[start, end)``."""

    resolution: Resolution
    start: dt.datetime
    end: dt.datetime


@dataclass(frozen=True)
class WindowPlan:
    """The rows to read and the step buckets to merge them into.

    ``start`` and ``end`` are the requested window widened to whole steps; buckets are
    ``[start + i * step, start + (i + 1) * step)`` for ``i < bucket_count``. ``step_seconds``
    is the requested step, or the main resolution's length when the query fell back to rows
    coarser than the step. ``segments`` tile the window in time order without overlap
    (:func:`cover_window`); every resolution in them nests in the step.
    """

    start: dt.datetime
    end: dt.datetime
    step_seconds: int
    segments: tuple[Segment, ...]

    @property
    def resolution(self) -> Resolution:
        """The coarsest resolution read: the one most of a long window comes from."""
        return max((part.resolution for part in self.segments), key=RESOLUTIONS.index)

    @property
    def bucket_count(self) -> int:
        """Number of step buckets in the window."""
        return int((self.end - self.start).total_seconds()) // self.step_seconds


def check_step(step_seconds: int) -> None:
    """Raise ValueError unless the step nests with every resolution (see the module doc)."""
    if step_seconds <= 0 or step_seconds % 60:
        raise ValueError("The step must be a whole number of minutes.")
    hour, day = RESOLUTION_SECONDS["hour"], RESOLUTION_SECONDS["day"]
    if step_seconds < hour:
        fits = hour % step_seconds == 0
    elif step_seconds < day:
        fits = step_seconds % hour == 0 and day % step_seconds == 0
    else:
        fits = step_seconds % day == 0
    if not fits:
        raise ValueError(
            "The step must divide an hour (e.g. 5m, 15m), be whole hours dividing a day "
            "(e.g. 1h, 6h) or be whole days (e.g. 1d, 7d)."
        )


def duration_ns(duration: dt.timedelta) -> int:
    """``duration`` in nanoseconds (exact: a timedelta holds whole microseconds)."""
    return duration // _MICROSECOND * 1000


def unix_ns(moment: dt.datetime) -> int:
    """Nanoseconds from the Unix epoch to aware ``moment``, as OTLP counts time; exact, and
    negative before 1970."""
    return duration_ns(moment - EPOCH)


def from_unix_ns(ns: int) -> dt.datetime:
    """The aware UTC moment ``ns`` nanoseconds after the Unix epoch, cut to the whole
    microsecond at or before it (a datetime's and PostgreSQL's precision)."""
    return EPOCH + dt.timedelta(microseconds=ns // 1000)


def floor_to(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The start of the bucket of the epoch-anchored ``step`` grid holding aware ``moment``."""
    return EPOCH + (moment - EPOCH) // step * step


def ceil_to(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """``moment`` if it starts a bucket of the ``step`` grid, else the start of the next one."""
    floored = floor_to(moment, step)
    return floored if floored == moment else floored + step


def steps(start: dt.datetime, end: dt.datetime, step: dt.timedelta) -> Iterator[dt.datetime]:
    """``start``, ``start + step``, … while before ``end``."""
    moment = start
    while moment < end:
        yield moment
        moment += step


def floor_minute(moment: dt.datetime) -> dt.datetime:
    """The start of the minute aware ``moment`` lies in, in UTC; ValueError for a naive one."""
    if moment.tzinfo is None:
        raise ValueError("aware datetimes only")
    return floor_to(moment, MINUTE)


def ceil_minute(moment: dt.datetime) -> dt.datetime:
    """The first minute start at or after aware ``moment``, in UTC."""
    floor = floor_minute(moment)
    return floor if floor == moment else floor + MINUTE


def check_window(start: dt.datetime, end: dt.datetime) -> None:
    """Raise ValueError unless ``start < end`` and the window is at most
    ``MAX_SERIES_WINDOW``."""
    if start >= end:
        raise ValueError("The window must end after it starts.")
    if end - start > MAX_SERIES_WINDOW:
        raise ValueError(f"The window may span at most {MAX_SERIES_WINDOW.days} days.")


def align(
    start: dt.datetime, end: dt.datetime, step_seconds: int
) -> tuple[dt.datetime, dt.datetime]:
    """Widen ``[start, end)`` to whole buckets of the epoch-anchored step grid."""
    step = dt.timedelta(seconds=step_seconds)
    return floor_to(start, step), ceil_to(end, step)


def point_count(start: dt.datetime, end: dt.datetime, step_seconds: int, series: int) -> int:
    """Step buckets of the aligned window times ``series``: what ``MAX_POINTS`` limits."""
    aligned_start, aligned_end = align(start, end, step_seconds)
    return int((aligned_end - aligned_start).total_seconds()) // step_seconds * series


def preferred_resolution(step_seconds: int) -> Resolution:
    """The coarsest resolution that nests in the step: the fewest rows to merge per bucket."""
    if step_seconds % RESOLUTION_SECONDS["day"] == 0:
        return "day"
    if step_seconds % RESOLUTION_SECONDS["hour"] == 0:
        return "hour"
    return "minute"


def choose_resolution(
    start: dt.datetime,
    end: dt.datetime,
    step_seconds: int,
    stored: Mapping[Resolution, StoredRows | None],
) -> Resolution:
    """Pick the main resolution to read ``[start, end)`` at this step from.

    ``stored`` gives the stored rows of each resolution (None: none). The preferred
    resolution (:func:`preferred_resolution`) is chosen unless it lacks rows for an older
    part of the window that another resolution still has: finer rows expire first
    (retention), and a young pipeline may have no coarse rows yet. Then finer resolutions
    are tried (they nest in the step too), then coarser ones (the caller widens the step to
    them). When every candidate lacks something, the preferred one is chosen. Rows missing
    at the newest end are not a reason to change: :func:`plan_window` reads finer rows there.
    """
    preferred = RESOLUTIONS.index(preferred_resolution(step_seconds))
    finer = RESOLUTIONS[preferred - 1 :: -1] if preferred else ()
    candidates = (RESOLUTIONS[preferred], *finer, *RESOLUTIONS[preferred + 1 :])
    for resolution in candidates:
        if not _lacks_older_rows(resolution, start, end, stored):
            return resolution
    return candidates[0]


def plan_window(
    start: dt.datetime,
    end: dt.datetime,
    step_seconds: int,
    stored: Mapping[Resolution, StoredRows | None],
) -> WindowPlan:
    """Choose the main resolution (:func:`choose_resolution`), lay the step grid over the
    window and tile it (:func:`cover_window`) with the main resolution's rows and finer ones:
    the main resolution up to the end of its newest row, then each finer one up to the end
    of its own, the finest to the end of the window.

    Raises ValueError for a step or window that :func:`check_step` or :func:`check_window`
    rejects.
    """
    check_step(step_seconds)
    check_window(start, end)
    main = choose_resolution(start, end, step_seconds, stored)
    step = max(step_seconds, RESOLUTION_SECONDS[main])
    aligned_start, aligned_end = align(start, end, step)
    up_to_main = {resolution: stored.get(resolution) for resolution in RESOLUTIONS}
    for coarser in RESOLUTIONS[RESOLUTIONS.index(main) + 1 :]:
        up_to_main[coarser] = None
    segments = cover_window(aligned_start, aligned_end, up_to_main)
    return WindowPlan(aligned_start, aligned_end, step, tuple(segments))


def cover_window(
    start: dt.datetime, end: dt.datetime, stored: Mapping[Resolution, StoredRows | None]
) -> list[Segment]:
    """Segments tiling ``[start, end)`` (whole minutes) in time order without overlap,
    coarsest rows first wherever they are stored; minutes fill whatever no coarser row
    covers. What every read that merges rows answers from: one sketch per window (compare,
    baselines, reports) or per step bucket (:func:`plan_window`)."""
    segments: list[Segment] = []
    _fill(start, end, len(RESOLUTIONS) - 1, stored, segments)
    return segments


def finest_cover(
    start: dt.datetime, end: dt.datetime, stored: Mapping[Resolution, StoredRows | None]
) -> list[Segment]:
    """Segments covering ``[start, end)`` with the finest rows stored for each part, in time
    order: minutes back to the oldest kept, hours before them, days before those. Each
    segment is widened to whole buckets of its resolution, so neighbours may overlap by less
    than a bucket: for questions about when something was seen, not for counting."""
    segments: list[Segment] = []
    upper = end
    for resolution in RESOLUTIONS:
        rows = stored.get(resolution)
        if rows is None:
            continue
        width = dt.timedelta(seconds=RESOLUTION_SECONDS[resolution])
        lower = max(floor_to(start, width), floor_to(rows.first, width))
        if lower < upper:
            segments.append(Segment(resolution, lower, upper))
            upper = lower
        if upper <= start:
            break
    return segments[::-1]


def _fill(
    start: dt.datetime,
    end: dt.datetime,
    level: int,
    stored: Mapping[Resolution, StoredRows | None],
    segments: list[Segment],
) -> None:
    if start >= end:
        return
    resolution = RESOLUTIONS[level]
    rows = stored.get(resolution)
    if level == 0:
        segments.append(Segment(resolution, start, end))
        return
    width = dt.timedelta(seconds=RESOLUTION_SECONDS[resolution])
    if rows is None:
        _fill(start, end, level - 1, stored, segments)
        return
    first = max(ceil_to(start, width), floor_to(rows.first, width))
    last = min(floor_to(end, width), rows.last + width)
    if first >= last:
        _fill(start, end, level - 1, stored, segments)
        return
    _fill(start, first, level - 1, stored, segments)
    segments.append(Segment(resolution, first, last))
    _fill(last, end, level - 1, stored, segments)


def _lacks_older_rows(
    resolution: Resolution,
    start: dt.datetime,
    end: dt.datetime,
    stored: Mapping[Resolution, StoredRows | None],
) -> bool:
    """Whether another resolution holds rows inside the window from before this one's first."""
    own = stored.get(resolution)
    for other_resolution in RESOLUTIONS:
        other = stored.get(other_resolution)
        if other_resolution == resolution or other is None:
            continue
        # Compare at the coarser grain of the two: a pipeline's first spans at 10:37 give a
        # minute row at 10:37 and an hour row at 10:00, and nothing is missing.
        grain = dt.timedelta(
            seconds=max(RESOLUTION_SECONDS[resolution], RESOLUTION_SECONDS[other_resolution])
        )
        other_start = floor_to(other.first, grain)
        own_start = end if own is None else min(floor_to(own.first, grain), end)
        if max(other_start, start) < own_start:
            return True
    return False
