"""Which rollup rows cover a window exactly, for answers that merge one sketch per side (pure:
no Django).

Compare and the attribute breakdown merge every row of a window into one sketch, so the rows
must tile the window without overlap: whole days where day rows exist, whole hours where hour
rows exist around them, minutes for the rest. Coarse rows exist only once compacted (after
their end) and fine rows only within their retention; ``stored`` says which ranges each
resolution holds, as :func:`latencyboard.rollups.queries.stored_rows` reports them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from latencyboard.windows import (
    RESOLUTION_SECONDS,
    RESOLUTIONS,
    Resolution,
    Segment,
    StoredRows,
    ceil_to,
    floor_to,
)


def cover_window(
    start: dt.datetime, end: dt.datetime, stored: Mapping[Resolution, StoredRows | None]
) -> list[Segment]:
    """Segments tiling ``[start, end)`` (whole minutes) in time order, coarsest rows first
    wherever they are stored; minutes fill whatever no coarser row covers."""
    segments: list[Segment] = []
    _fill(start, end, len(RESOLUTIONS) - 1, stored, segments)
    return segments


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
