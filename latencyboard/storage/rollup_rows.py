"""Rollup rows (``Rollup``): what folds, compaction and rebuilds write, over a psycopg cursor.

Rows are keyed by (pipeline, stage, bucket), stage None being end to end, and written with
array parameters, one statement for many rows. See :mod:`latencyboard.rollups.services` for
how the writers take turns.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

import psycopg

from latencyboard.sketches.sketch import Sketch, to_bytes_many
from latencyboard.storage.tables import PIPELINE, ROLLUP

Key = tuple[int, int | None, int]  # pipeline, stage (None: end to end), bucket (Unix seconds)
Cohorts = Mapping[str, str]  # Rollup.cohorts: cohort attribute -> the value of every span


def _cohort_columns(maps: Iterable[Cohorts | None]) -> dict[str, list[Any]]:
    """``Rollup.cohorts`` of rows as the statements take them: each row's position (from 1,
    None for none) in the list of the distinct maps' JSON, which a fold's rows share."""
    position: dict[tuple[tuple[str, str], ...], int] = {}
    of_row: list[int | None] = []
    for cohorts in maps:
        of_row.append(
            position.setdefault(tuple(sorted(cohorts.items())), len(position) + 1)
            if cohorts
            else None
        )
    return {"cohort": of_row, "cohort_maps": [json.dumps(dict(items)) for items in position]}


class Row(Protocol):
    """A rollup row to write: ``rollups.folding.Fold``."""

    @property
    def pipeline_id(self) -> int: ...
    @property
    def stage_id(self) -> int | None: ...
    @property
    def bucket(self) -> int: ...
    @property
    def error_count(self) -> int: ...
    @property
    def sketch(self) -> Sketch: ...


_INSERT: Final = f"""
INSERT INTO {ROLLUP} AS r (
    team_id, pipeline_id, stage_id, resolution, bucket_start,
    count, error_count, sum_ms, min_ms, max_ms, sketch, cohorts
)
SELECT u.team_id, u.pipeline_id, u.stage_id, %(resolution)s, to_timestamp(u.bucket),
       u.count, u.error_count, u.sum_ms, u.min_ms, u.max_ms, u.sketch,
       (%(cohort_maps)b::jsonb[])[u.cohort]
FROM unnest(
    %(team)b::int8[], %(pipeline)b::int8[], %(stage)b::int8[], %(bucket)b::int8[],
    %(count)b::int8[], %(errors)b::int8[], %(sum)b::float8[], %(min)b::float8[],
    %(max)b::float8[], %(sketch)b::bytea[], %(cohort)b::int4[]
) WITH ORDINALITY AS u(
    team_id, pipeline_id, stage_id, bucket, count, error_count, sum_ms, min_ms, max_ms, sketch,
    cohort, position
)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT rollup_identity_unique DO
"""  # noqa: S608 - a constant table name, no input
_ADD_NEW: Final = (
    _INSERT + "NOTHING RETURNING pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8"
)
_REPLACE: Final = (
    _INSERT
    + """UPDATE SET count = EXCLUDED.count, error_count = EXCLUDED.error_count,
    sum_ms = EXCLUDED.sum_ms, min_ms = EXCLUDED.min_ms, max_ms = EXCLUDED.max_ms,
    sketch = EXCLUDED.sketch"""
)


def _of_keys(columns: str, bucket_match: str) -> str:
    """A query for ``columns`` of the rows of ``%(resolution)s`` matching the keys passed as
    ``%(pipeline)b``, ``%(stage)b`` (None: end to end) and ``%(bucket)b``, ``k`` being the key
    and ``r`` the row. One probe of the unique index per key: ``stage_id IS NOT DISTINCT FROM``
    cannot use it, hence an arm for stages and one, run only for None, for end to end."""
    return f"""
SELECT {columns}
FROM unnest(%(pipeline)b::int8[], %(stage)b::int8[], %(bucket)b::int8[])
    WITH ORDINALITY AS k(pipeline_id, stage_id, bucket, position)
CROSS JOIN LATERAL (
    SELECT * FROM {ROLLUP} r
    WHERE r.pipeline_id = k.pipeline_id AND r.stage_id = k.stage_id
      AND r.resolution = %(resolution)s AND {bucket_match}
    UNION ALL
    SELECT * FROM {ROLLUP} r
    WHERE k.stage_id IS NULL AND r.pipeline_id = k.pipeline_id AND r.stage_id IS NULL
      AND r.resolution = %(resolution)s AND {bucket_match}
) r
"""  # noqa: S608 - the caller's constant columns and conditions, not input


_SAME_BUCKET: Final = "r.bucket_start = to_timestamp(k.bucket)"
_WITHIN_BUCKET: Final = (
    "r.bucket_start >= to_timestamp(k.bucket)"
    " AND r.bucket_start < to_timestamp(k.bucket) + %(width)s"
)
# Locks in the order the rows were inserted in, so that two folds never wait on each other
# in a cycle.
_LOCK_ROWS: Final = f"""
SELECT id, pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8, error_count, sketch,
       cohorts::text
FROM {ROLLUP}
WHERE id IN ({_of_keys("r.id", _SAME_BUCKET)})
ORDER BY pipeline_id, stage_id NULLS FIRST, bucket_start
FOR UPDATE
"""  # noqa: S608 - constant fragments
_UPDATE_ROWS: Final = f"""
UPDATE {ROLLUP} r
SET count = u.count, error_count = u.error_count, sum_ms = u.sum_ms, min_ms = u.min_ms,
    max_ms = u.max_ms, sketch = u.sketch, cohorts = (%(cohort_maps)b::jsonb[])[u.cohort]
FROM unnest(
    %(id)b::int8[], %(count)b::int8[], %(errors)b::int8[], %(sum)b::float8[],
    %(min)b::float8[], %(max)b::float8[], %(sketch)b::bytea[], %(cohort)b::int4[]
) AS u(id, count, error_count, sum_ms, min_ms, max_ms, sketch, cohort)
WHERE r.id = u.id
"""  # noqa: S608 - a constant table name, no input
# A coarse bucket needs recomputing when its row is missing or its count is not the sum of
# its finer rows' (a fold adds at least one span to every row it touches, so the sum moved
# since the last recompute), and is checked whenever its finer rows are about to expire.
_CANDIDATES: Final = f"""
SELECT f.pipeline_id, f.stage_id, extract(epoch FROM f.bucket)::int8
FROM (
    SELECT pipeline_id, stage_id, date_bin(%(width)s, bucket_start, 'epoch') AS bucket,
           sum(count) AS count
    FROM {ROLLUP}
    WHERE resolution = %(fine)s AND bucket_start >= %(start)s AND bucket_start < %(end)s
      AND (%(pipelines)b::int8[] IS NULL OR pipeline_id = ANY(%(pipelines)b::int8[]))
    GROUP BY 1, 2, 3
) f
LEFT JOIN {ROLLUP} c
  ON c.pipeline_id = f.pipeline_id AND c.stage_id IS NOT DISTINCT FROM f.stage_id
 AND c.resolution = %(coarse)s AND c.bucket_start = f.bucket
WHERE c.id IS NULL OR c.count <> f.count OR f.bucket < %(kept_from)s
ORDER BY f.pipeline_id, f.stage_id NULLS FIRST, f.bucket
"""  # noqa: S608 - a constant table name, no input
_FINE_ROWS: Final = (
    _of_keys("r.pipeline_id, r.stage_id, k.bucket, r.error_count, r.sketch", _WITHIN_BUCKET)
    + "ORDER BY k.position, r.bucket_start"
)
_COARSE_ROWS: Final = _of_keys(
    "r.pipeline_id, r.stage_id, k.bucket, r.count, r.error_count, r.sketch", _SAME_BUCKET
)
_DELETE_OLDER: Final = f"DELETE FROM {ROLLUP} WHERE resolution = %s AND bucket_start < %s"  # noqa: S608
_DELETE_RANGE: Final = f"""
DELETE FROM {ROLLUP}
WHERE pipeline_id = ANY(%(pipelines)b::int8[]) AND (
    (resolution IN ('minute', 'hour') AND bucket_start >= %(start)s AND bucket_start < %(end)s)
    OR (resolution = 'day' AND bucket_start >= %(days_start)s AND bucket_start < %(days_end)s))
"""  # noqa: S608 - a constant table name, no input
_TEAMS: Final = f"SELECT id, team_id FROM {PIPELINE} WHERE id = ANY(%b::int8[])"  # noqa: S608


def _columns(
    rows: Sequence[Row], teams: dict[int, int], cohorts: Mapping[Key, Cohorts] | None = None
) -> dict[str, list[Any]]:
    cohorts = cohorts or {}
    return {
        **_cohort_columns(cohorts.get((row.pipeline_id, row.stage_id, row.bucket)) for row in rows),
        "team": [teams[row.pipeline_id] for row in rows],
        "pipeline": [row.pipeline_id for row in rows],
        "stage": [row.stage_id for row in rows],
        "bucket": [row.bucket for row in rows],
        "count": [row.sketch.count for row in rows],
        "errors": [row.error_count for row in rows],
        "sum": [row.sketch.sum for row in rows],
        "min": [row.sketch.min for row in rows],
        "max": [row.sketch.max for row in rows],
        "sketch": to_bytes_many([row.sketch for row in rows]),
    }


def _keys(keys: Sequence[Key]) -> dict[str, list[Any]]:
    return {
        "pipeline": [key[0] for key in keys],
        "stage": [key[1] for key in keys],
        "bucket": [key[2] for key in keys],
    }


def add_new(
    cursor: psycopg.Cursor[Any],
    resolution: str,
    rows: Sequence[Row],
    teams: dict[int, int],
    cohorts: Mapping[Key, Cohorts] | None = None,
) -> set[Key]:
    """Insert the rows nobody has yet (``teams`` by pipeline), each with its ``cohorts``
    (``Rollup.cohorts``) if any; returns the keys inserted."""
    if not rows:
        return set()
    cursor.execute(_ADD_NEW, {"resolution": resolution, **_columns(rows, teams, cohorts)})
    return {(p, s, b) for p, s, b in cursor.fetchall()}


def replace(
    cursor: psycopg.Cursor[Any], resolution: str, rows: Sequence[Row], teams: dict[int, int]
) -> None:
    """Insert the rows, or overwrite the stored row of the same key."""
    if rows:
        cursor.execute(_REPLACE, {"resolution": resolution, **_columns(rows, teams)})


def lock_minutes(
    cursor: psycopg.Cursor[Any], keys: Sequence[Key]
) -> dict[Key, tuple[int, int, bytes, Cohorts]]:
    """Lock the minute rows of ``keys``; ``(id, error count, sketch, cohorts)`` by key."""
    cursor.execute(_LOCK_ROWS, {"resolution": "minute", **_keys(keys)})
    return {
        (p, s, b): (row_id, errors, blob, json.loads(cohorts) if cohorts else {})
        for row_id, p, s, b, errors, blob, cohorts in cursor
    }


def update(cursor: psycopg.Cursor[Any], rows: Sequence[tuple[int, int, Sketch, Cohorts]]) -> None:
    """Overwrite rows ``(id, error count, sketch, cohorts)``."""
    cursor.execute(
        _UPDATE_ROWS,
        {
            "id": [row[0] for row in rows],
            "count": [row[2].count for row in rows],
            "errors": [row[1] for row in rows],
            "sum": [row[2].sum for row in rows],
            "min": [row[2].min for row in rows],
            "max": [row[2].max for row in rows],
            "sketch": to_bytes_many([row[2] for row in rows]),
            **_cohort_columns(row[3] for row in rows),
        },
    )


def compaction_candidates(
    cursor: psycopg.Cursor[Any],
    *,
    fine: str,
    coarse: str,
    width: dt.timedelta,
    start: dt.datetime,
    end: dt.datetime,
    kept_from: dt.datetime,
    pipelines: list[int] | None,
) -> list[Key]:
    """Keys of the ``coarse`` rows to recompute from their ``fine`` rows (see ``_CANDIDATES``)
    in ``[start, end)``, of ``pipelines`` (None: all), in lock order."""
    params = {
        "fine": fine,
        "coarse": coarse,
        "width": width,
        "start": start,
        "end": end,
        "kept_from": kept_from,
        "pipelines": pipelines,
    }
    return cursor.execute(_CANDIDATES, params).fetchall()


def finer_rows(
    cursor: psycopg.Cursor[Any], keys: Sequence[Key], resolution: str, width: dt.timedelta
) -> Iterable[tuple[int, int | None, int, int, bytes]]:
    """``(pipeline, stage, coarse bucket, error count, sketch)`` of the ``resolution`` rows
    within each key's ``width``-wide bucket, sorted by key and bucket."""
    cursor.execute(_FINE_ROWS, {**_keys(keys), "resolution": resolution, "width": width})
    return cursor


def stored_rows(
    cursor: psycopg.Cursor[Any], keys: Sequence[Key], resolution: str
) -> list[tuple[int, int | None, int, int, int, bytes]]:
    """``(pipeline, stage, bucket, count, error count, sketch)`` of the rows of ``keys``."""
    return cursor.execute(_COARSE_ROWS, {**_keys(keys), "resolution": resolution}).fetchall()


def delete_older(cursor: psycopg.Cursor[Any], resolution: str, before: dt.datetime) -> int:
    """Delete the ``resolution`` rows of buckets before ``before``; returns how many."""
    cursor.execute(_DELETE_OLDER, [resolution, before])
    return cursor.rowcount


def delete_range(
    cursor: psycopg.Cursor[Any],
    pipelines: list[int],
    *,
    start: dt.datetime,
    end: dt.datetime,
    days_start: dt.datetime,
    days_end: dt.datetime,
) -> None:
    """Delete the pipelines' minutes and hours in ``[start, end)`` and days in
    ``[days_start, days_end)``."""
    cursor.execute(
        _DELETE_RANGE,
        {
            "pipelines": pipelines,
            "start": start,
            "end": end,
            "days_start": days_start,
            "days_end": days_end,
        },
    )


def teams_of(cursor: psycopg.Cursor[Any], pipelines: Iterable[int]) -> dict[int, int]:
    """The team of each pipeline."""
    return dict(cursor.execute(_TEAMS, [list(pipelines)]).fetchall())
