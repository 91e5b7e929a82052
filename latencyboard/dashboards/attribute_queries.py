"""Reads of raw spans by attribute: exact latency per value of a span attribute, for the
pipeline page's breakdown by ``model.version``, ``cache_hit``, …

Raw spans answer any attribute without a rollup per attribute, at a cost proportional to the
spans read, so a breakdown reads recent spans only: at most :data:`MAX_WINDOW` and
:data:`MAX_SPANS` of them, the newest first. The caller has checked the user may see
the pipeline (``queries.pipeline_of``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from django.db import connection

from latencyboard.pipelines.models import Pipeline

MAX_WINDOW: Final = dt.timedelta(hours=24)
"""Longest window the attribute breakdown reads raw spans for."""
MAX_SPANS: Final = 25_000
"""Most spans one attribute breakdown reads, the newest of the window. A pipeline's spans lie
scattered among other pipelines' on the heap, so each costs a page read: about 4 µs when the
pages are not in shared buffers, 25,000 spans about 100 ms (benchmarks/bench_pages.py), within
the page's budget of 150 ms per call; at the demo's full rate that is the last few minutes."""
MAX_VALUES: Final = 12
"""Values of an attribute shown, the most frequent first."""
KEY_SAMPLE: Final = 2000
"""Newest spans whose attribute keys are offered for a breakdown."""
_HIDDEN_KEYS: Final = frozenset({"inference.stage"})  # the stage itself

_ATTRIBUTE_GROUPS = """
WITH newest AS MATERIALIZED (
    SELECT stage_id, is_root, duration_ns, status_code, start_time,
           attributes -> %(key)s #>> '{}' AS value
    FROM spans_span
    WHERE pipeline_id = %(pipeline)s AND start_time >= %(start)s AND start_time < %(end)s
    ORDER BY start_time DESC
    LIMIT %(limit)s
)
SELECT CASE WHEN is_root THEN NULL ELSE stage_id END, value, count(*), min(start_time),
       count(*) FILTER (WHERE status_code = 2),
       percentile_disc(%(levels)s::float8[]) WITHIN GROUP (ORDER BY duration_ns)
           FILTER (WHERE value IS NOT NULL)
FROM newest
GROUP BY 1, 2
"""
_ATTRIBUTE_KEYS = """
SELECT DISTINCT jsonb_object_keys(attributes) FROM (
    SELECT attributes FROM spans_span
    WHERE pipeline_id = %(pipeline)s AND start_time >= %(start)s AND start_time < %(end)s
    ORDER BY start_time DESC
    LIMIT %(limit)s
) AS newest
"""


@dataclass(frozen=True, slots=True)
class AttributeGroup:
    """Exact latency of the spans of one stage (None: the root spans, end to end) carrying
    one value of the attribute. ``quantiles_ms[i]`` is the smallest duration with at least
    ``quantiles[i]`` of the group's spans at or below it."""

    stage_id: int | None
    value: str
    n: int
    error_rate: float
    quantiles_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class AttributeBreakdown:
    """Latency by value of ``key`` over the newest spans of ``[start, end)``.

    ``start`` is the asked-for start moved up to at most :data:`MAX_WINDOW` before
    ``end``. When ``capped``, only the newest :data:`MAX_SPANS` spans were read and
    they cover ``[covered_from, end)``. ``values`` are the most frequent values, at most
    :data:`MAX_VALUES`; ``groups`` holds those only.
    """

    key: str
    start: dt.datetime
    end: dt.datetime
    covered_from: dt.datetime | None
    spans_read: int
    capped: bool
    quantiles: tuple[float, ...]
    values: tuple[str, ...]
    groups: tuple[AttributeGroup, ...]


def attribute_breakdown(
    pipeline: Pipeline,
    key: str,
    start: dt.datetime,
    end: dt.datetime,
    quantiles: Sequence[float],
) -> AttributeBreakdown:
    """Exact percentiles of each stage's spans per value of the span attribute ``key``, from
    raw spans: at most the last :data:`MAX_WINDOW` of the window and at most its
    newest :data:`MAX_SPANS` spans (one backward range scan of the
    ``(pipeline_id, start_time)`` index, then one sort per group in the database)."""
    start = max(start, end - MAX_WINDOW)
    levels = tuple(sorted(set(quantiles)))
    with connection.cursor() as cursor:
        cursor.execute(
            _ATTRIBUTE_GROUPS,
            {
                "pipeline": pipeline.pk,
                "key": key,
                "start": start,
                "end": end,
                "limit": MAX_SPANS,
                "levels": list(levels),
            },
        )
        rows = cursor.fetchall()
    spans_read = sum(row[2] for row in rows)
    per_value: dict[str, int] = {}
    for _, value, n, *_ in rows:
        if value is not None:
            per_value[value] = per_value.get(value, 0) + n
    values = tuple(sorted(per_value, key=lambda v: (-per_value[v], v))[:MAX_VALUES])
    shown = set(values)
    groups = sorted(
        (
            AttributeGroup(
                stage_id, value, n, errors / n, tuple(float(ns) / 1e6 for ns in durations)
            )
            for stage_id, value, n, _, errors, durations in rows
            if value in shown
        ),
        key=lambda g: (g.stage_id is not None, g.stage_id or 0, values.index(g.value)),
    )
    capped = spans_read >= MAX_SPANS
    return AttributeBreakdown(
        key=key,
        start=start,
        end=end,
        covered_from=min((row[3] for row in rows), default=None),
        spans_read=spans_read,
        capped=capped,
        quantiles=levels,
        values=values,
        groups=tuple(groups),
    )


def attribute_keys(pipeline: Pipeline, end: dt.datetime) -> tuple[str, ...]:
    """The attribute keys of the pipeline's newest :data:`KEY_SAMPLE` spans in the day
    before ``end``, sorted: the keys a breakdown can be asked for."""
    with connection.cursor() as cursor:
        cursor.execute(
            _ATTRIBUTE_KEYS,
            {
                "pipeline": pipeline.pk,
                "start": end - MAX_WINDOW,
                "end": end,
                "limit": KEY_SAMPLE,
            },
        )
        return tuple(sorted(key for (key,) in cursor.fetchall() if key not in _HIDDEN_KEYS))
