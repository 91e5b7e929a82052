"""Window reads of stage-share rows (``StageShare``) over a psycopg cursor: the requests of
each step bucket per root-duration bucket, and each stage's sums over all of them, over the
slowest ones and along the critical path. Written by ``stage_share_rows``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from latencyboard.storage.tables import STAGE_SHARE

# The rows of some pipelines' segments (pipeline, resolution, [lo, hi)) with the step bucket
# each falls in: date_bin(stride, bucket_start, origin).
_SEGMENT_ROWS: Final = f"""
SELECT t.*, date_bin(%(stride)s, t.bucket_start, %(origin)s) AS bucket
FROM unnest(%(seg_pipeline)s::int8[], %(seg_resolution)s::text[], %(seg_lo)s::timestamptz[],
            %(seg_hi)s::timestamptz[]) AS s(pipeline_id, resolution, lo, hi)
JOIN {STAGE_SHARE} t ON t.pipeline_id = s.pipeline_id AND t.resolution = s.resolution
  AND t.bucket_start >= s.lo AND t.bucket_start < s.hi
"""  # noqa: S608 - a constant table name, no input
# Each row's bucket totals are repeated on its stages' rows: one row per row bucket.
_DISTRIBUTION: Final = f"""
WITH one_per_bucket AS (
    SELECT DISTINCT ON (pipeline_id, resolution, bucket_start) *
    FROM ({_SEGMENT_ROWS}) AS r
    ORDER BY pipeline_id, resolution, bucket_start
)
SELECT o.pipeline_id, o.bucket, k.key, sum(k.requests)::int8,
       sum(k.root_ms ORDER BY o.bucket_start)
FROM one_per_bucket o,
     unnest(o.root_keys, o.key_requests, o.key_root_ms) AS k(key, requests, root_ms)
GROUP BY o.pipeline_id, o.bucket, k.key
ORDER BY o.pipeline_id, o.bucket, k.key
"""  # noqa: S608 - constant SQL, no input
# A row written before critical paths were makes its stage's critical sums NULL.
_STAGE_SUMS: Final = f"""
SELECT r.pipeline_id, r.bucket, r.stage_id, sum(r.self_ms_sum ORDER BY r.bucket_start),
       sum(CASE WHEN c.key IS NOT NULL THEN
               (SELECT coalesce(sum(u.self_ms), 0) FROM unnest(r.root_keys, r.key_self_ms)
                AS u(key, self_ms) WHERE u.key > c.key) END ORDER BY r.bucket_start),
       CASE WHEN bool_and(r.critical_ms_sum IS NOT NULL) THEN
           sum(r.critical_ms_sum ORDER BY r.bucket_start) END,
       CASE WHEN bool_and(r.critical_ms_sum IS NOT NULL) THEN
           sum(CASE WHEN c.key IS NOT NULL THEN
                   (SELECT coalesce(sum(u.ms), 0) FROM unnest(r.root_keys, r.key_critical_ms)
                    AS u(key, ms) WHERE u.key > c.key) END ORDER BY r.bucket_start) END
FROM ({_SEGMENT_ROWS}) AS r
LEFT JOIN unnest(%(cut_pipeline)s::int8[], %(cut_bucket)s::timestamptz[], %(cut_key)s::int4[])
    AS c(pipeline_id, bucket, key) ON c.pipeline_id = r.pipeline_id AND c.bucket = r.bucket
GROUP BY r.pipeline_id, r.bucket, r.stage_id
"""  # noqa: S608 - constant SQL, no input


@dataclass(frozen=True, slots=True)
class WindowSegment:
    """Read ``pipeline_id``'s rows of ``resolution`` starting in ``[start, end)``."""

    pipeline_id: int
    resolution: str
    start: dt.datetime
    end: dt.datetime


def _segment_params(
    segments: Sequence[WindowSegment], stride: dt.timedelta, origin: dt.datetime
) -> dict[str, Any]:
    return {
        "stride": stride,
        "origin": origin,
        "seg_pipeline": [s.pipeline_id for s in segments],
        "seg_resolution": [s.resolution for s in segments],
        "seg_lo": [s.start for s in segments],
        "seg_hi": [s.end for s in segments],
    }


def root_distribution(
    cursor: psycopg.Cursor[Any],
    segments: Sequence[WindowSegment],
    stride: dt.timedelta,
    origin: dt.datetime,
) -> list[tuple[int, dt.datetime, int, int, float]]:
    """``(pipeline, step bucket, root key, requests, root ms)`` of the segments' rows, the
    requests of each step bucket (``date_bin(stride, bucket_start, origin)``) counted per
    root-duration bucket; ordered."""
    return cursor.execute(_DISTRIBUTION, _segment_params(segments, stride, origin)).fetchall()


def stage_sums(
    cursor: psycopg.Cursor[Any],
    segments: Sequence[WindowSegment],
    stride: dt.timedelta,
    origin: dt.datetime,
    cuts: Sequence[tuple[int, dt.datetime, int]],
) -> list[tuple[int, dt.datetime, int, float, float | None, float | None, float | None]]:
    """``(pipeline, step bucket, stage, self ms, tail self ms, critical ms, tail critical
    ms)`` of the segments' rows: the tail of a step bucket is its requests with a root key
    above the bucket's cut in ``cuts`` (``(pipeline, step bucket, key)``), tail sums None for a
    bucket without a cut; critical sums None where a row of the stage has none."""
    params = {
        **_segment_params(segments, stride, origin),
        "cut_pipeline": [cut[0] for cut in cuts],
        "cut_bucket": [cut[1] for cut in cuts],
        "cut_key": [cut[2] for cut in cuts],
    }
    return cursor.execute(_STAGE_SUMS, params).fetchall()
