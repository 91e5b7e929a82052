"""The SQL that reads whole-window sketches from rollups and cohort rollups (pure: no Django).

Cohort rows are read through the view of every cohort row, those rollup minutes stand for
(``Rollup.cohorts``) included.

A window is a list of segments (one resolution over a time range, see
:func:`latencyboard.windows.cover_window`); each segment is one range scan of the table's
window index, joined with UNION ALL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from latencyboard.storage.tables import COHORT_ROWS, ROLLUP
from latencyboard.windows import Segment

END_TO_END_KEY: Final = 0
"""The series of end-to-end latency in the rows read here; stage ids start at 1."""

_ROLLUP_SEGMENT: Final = f"""
SELECT %s::int, coalesce(stage_id, {END_TO_END_KEY}), sketch FROM {ROLLUP}
WHERE pipeline_id = %s AND resolution = %s AND bucket_start >= %s AND bucket_start < %s
"""  # noqa: S608 - constant names
_COHORT_SEGMENT: Final = f"""
SELECT value, coalesce(stage_id, {END_TO_END_KEY}), error_count, sketch FROM {COHORT_ROWS}
WHERE pipeline_id = %s AND attribute = %s AND resolution = %s
  AND bucket_start >= %s AND bucket_start < %s {{values}}
"""  # noqa: S608


def rollup_sketches(
    pipeline_id: int, segments: Sequence[tuple[int, Segment]]
) -> tuple[str, list[Any]]:
    """Rows ``(side, series, sketch)`` of a pipeline over ``segments``, each paired with the
    side (any integer) its rows are tagged with: several windows in one statement."""
    params: list[Any] = []
    for side, part in segments:
        params += [side, pipeline_id, part.resolution, part.start, part.end]
    return " UNION ALL ".join([_ROLLUP_SEGMENT] * len(segments)), params


def cohort_sketches(
    pipeline_id: int, attribute: str, values: Sequence[str] | None, segments: Sequence[Segment]
) -> tuple[str, list[Any]]:
    """Rows ``(value, series, error_count, sketch)`` of an attribute's cohorts over ``segments``,
    of ``values`` only unless None."""
    segment = _COHORT_SEGMENT.format(values="" if values is None else "AND value = ANY(%s)")
    params: list[Any] = []
    for part in segments:
        params += [pipeline_id, attribute, part.resolution, part.start, part.end]
        if values is not None:
            params.append(list(values))
    return " UNION ALL ".join([segment] * len(segments)), params


_VERSION_SEGMENT: Final = f"""
SELECT attribute, value, bucket_start, %s, sum(count) FROM {COHORT_ROWS}
WHERE pipeline_id = %s AND attribute = ANY(%s) AND resolution = %s
  AND bucket_start >= %s AND bucket_start < %s
GROUP BY 1, 2, 3
"""  # noqa: S608


def version_buckets(
    pipeline_id: int, attributes: Sequence[str], segments: Sequence[tuple[Segment, int]]
) -> tuple[str, list[Any]]:
    """Rows ``(attribute, value, bucket_start, bucket seconds, spans)``: each bucket in which
    a value of one of ``attributes`` was seen, all stages together; ``segments`` pairs each
    segment with its resolution's length in seconds."""
    params: list[Any] = []
    for part, seconds in segments:
        params += [seconds, pipeline_id, list(attributes), part.resolution, part.start, part.end]
    return " UNION ALL ".join([_VERSION_SEGMENT] * len(segments)), params
