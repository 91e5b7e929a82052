"""Reads of the per-resolution tables (rollups and stage shares): which rows a pipeline keeps,
and a window's rollup rows as binary records.

Resolutions are passed in as the values stored in the ``resolution`` column, so that this
module knows how rows sit, not how windows are planned (``latencyboard.windows``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt
import psycopg

# Dashboard reads: the read replica when a dashboard request may use it (db_router).
from latencyboard.db import psycopg_cursor
from latencyboard.db import read_connection as connection
from latencyboard.storage import tables
from latencyboard.storage.timestamps import PG_EPOCH_S

RowBounds = dict[str, tuple[dt.datetime, dt.datetime] | None]
"""Oldest and newest bucket start per resolution; None where the pipeline has no row."""

_BOUND_PROBE: Final = """(
    SELECT bucket_start FROM {table} WHERE pipeline_id = {pipeline} AND resolution = %s
    ORDER BY bucket_start {order} LIMIT 1
)"""
_ROW_BOUNDS_SQL: Final = "SELECT {probes} FROM (SELECT %s::bigint AS id) AS p"
_ROW_BOUNDS_OF_SQL: Final = "SELECT p.id, {probes} FROM unnest(%s::bigint[]) AS p(id)"
_PIPELINE_SQL: Final = f"""
SELECT p.id, p.service_name, p.environment,
       (SELECT json_agg(json_build_array(s.id, s.name) ORDER BY s.id)
        FROM {tables.STAGE} s WHERE s.pipeline_id = p.id),
       {{probes}}
FROM {tables.PIPELINE} p
WHERE p.id = %s AND p.id IN ({{visible}})
"""  # noqa: S608 - constant table names


class PipelineRollups(NamedTuple):
    """A pipeline, its stages (id and name, by id) and the bounds of its rollup rows."""

    id: int
    service_name: str
    environment: str
    stages: list[tuple[int, str]]
    bounds: RowBounds


def row_bounds(table: str, pipeline_id: int, resolutions: Sequence[str]) -> RowBounds:
    """Oldest and newest row of ``pipeline_id`` in ``table`` (``tables.ROLLUP`` or
    ``tables.STAGE_SHARE``) for each resolution: two index probes each, in one query."""
    probes, params = _bound_probes(table, "p.id", resolutions)
    with connection.cursor() as cursor:
        cursor.execute(_ROW_BOUNDS_SQL.format(probes=probes), [*params, pipeline_id])
        return _bounds(resolutions, cursor.fetchone())


def row_bounds_of(
    table: str, pipeline_ids: Sequence[int], resolutions: Sequence[str]
) -> dict[int, RowBounds]:
    """:func:`row_bounds` of several pipelines (by id) in one query."""
    probes, params = _bound_probes(table, "p.id", resolutions)
    with connection.cursor() as cursor:
        cursor.execute(_ROW_BOUNDS_OF_SQL.format(probes=probes), [*params, list(pipeline_ids)])
        return {row[0]: _bounds(resolutions, row[1:]) for row in cursor.fetchall()}


def pipeline_rollups(
    pipeline_id: int, visible: tuple[str, Sequence[Any]] | None, resolutions: Sequence[str]
) -> PipelineRollups | None:
    """The pipeline, its stages and the bounds of its rollup rows in one statement (each
    round trip to PostgreSQL costs more than its query here), when its id is among those the
    SQL ``visible`` (a query of pipeline ids and its parameters; None: any) selects; else
    None."""
    probes, probe_params = _bound_probes(tables.ROLLUP, "p.id", resolutions)
    sql, visible_params = visible or ("p.id", ())
    with connection.cursor() as cursor:
        cursor.execute(
            _PIPELINE_SQL.format(probes=probes, visible=sql),
            [*probe_params, pipeline_id, *visible_params],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    pk, service_name, environment, named, *found = row
    return PipelineRollups(
        pk,
        service_name,
        environment,
        [(stage_id, name) for stage_id, name in named or ()],
        _bounds(resolutions, found),
    )


def _bound_probes(
    table: str, pipeline_id: str, resolutions: Sequence[str]
) -> tuple[str, list[str]]:
    """The probes of :func:`row_bounds` as SQL columns, for the pipeline whose id is the SQL
    expression ``pipeline_id``, and their parameters."""
    # Written out: the ORM takes longer to compile the correlated subqueries than
    # PostgreSQL takes to answer them.
    probes = ", ".join(
        _BOUND_PROBE.format(table=table, pipeline=pipeline_id, order=order)
        for _ in resolutions
        for order in ("ASC", "DESC")
    )
    return probes, [resolution for resolution in resolutions for _ in range(2)]


def _bounds(resolutions: Sequence[str], found: Sequence[dt.datetime | None]) -> RowBounds:
    """The probes' answers, oldest then newest per resolution, by resolution."""
    return {
        resolution: None if first is None or last is None else (first, last)
        for resolution, first, last in zip(resolutions, found[0::2], found[1::2], strict=True)
    }


class WindowRows(NamedTuple):
    """Rollup rows as parallel arrays, one entry per row, and their sketches end to end
    (``sketch_sizes[i]`` bytes each)."""

    stage_ids: npt.NDArray[np.int64]  # -1 for end to end
    epochs: npt.NDArray[np.int64]  # bucket start, Unix seconds
    error_counts: npt.NDArray[np.int64]
    sketch_sizes: npt.NDArray[np.int32]
    sketches: bytes


class Segment(NamedTuple):
    """Rows of one resolution with bucket starts in ``[start, end)``."""

    resolution: str
    start: dt.datetime
    end: dt.datetime


# The rows come back as two values (as the rollup worker reads spans): their other fields as
# one fixed-width binary record each, end to end, and their sketches end to end, rather than
# a Python object per row and column. Both aggregates of one SELECT see the rows in the same
# order. The count and sum_ms columns are left out: they are the sketches' own count and sum.
_ROW_RECORD: Final = (
    "int8send(coalesce(stage_id, -1)) || timestamptz_send(bucket_start)"
    " || int8send(error_count) || int4send(octet_length(sketch))"
)
_RECORD: Final = np.dtype(
    [
        ("stage_id", ">i8"),  # -1 for end to end
        ("start_us", ">i8"),  # microseconds since 2000-01-01 UTC
        ("error_count", ">i8"),
        ("sketch_bytes", ">i4"),
    ]
)
_ROWS_SQL: Final = f"""
SELECT string_agg({_ROW_RECORD}, ''), string_agg(sketch, '') FROM ({{segments}}) AS rows
"""  # noqa: S608 - constant text
# One range scan of rollup_pipeline_window per segment. UNION ALL rather than OR:
# PostgreSQL factors the pipeline out of ORed ranges and then scans every row of the
# pipeline through its foreign key index.
_SEGMENT_SQL: Final = f"""
SELECT stage_id, bucket_start, error_count, sketch
FROM {tables.ROLLUP}
WHERE pipeline_id = %s AND resolution = %s AND bucket_start >= %s AND bucket_start < %s
"""  # noqa: S608 - a constant table name
_OF_STAGES_SQL: Final = """  AND (stage_id = ANY(%s::bigint[]) {or_end_to_end})
"""


def window_rows(
    pipeline_id: int,
    segments: Sequence[Segment],
    stage_ids: Sequence[int] | None,
    *,
    end_to_end: bool,
) -> WindowRows:
    """The rollup rows of ``segments``, in one statement: those of ``stage_ids`` (and of the
    root spans when ``end_to_end``), or every row of the pipeline for None."""
    segment, of_stages = _SEGMENT_SQL, []
    if stage_ids is not None:
        or_end_to_end = "OR stage_id IS NULL" if end_to_end else ""
        segment += _OF_STAGES_SQL.format(or_end_to_end=or_end_to_end)
        of_stages = [list(stage_ids)]
    params: list[Any] = []
    for part in segments:
        params += [pipeline_id, part.resolution, part.start, part.end, *of_stages]
    sql = _ROWS_SQL.format(segments=" UNION ALL ".join([segment] * len(segments)))
    records, sketches = _fetch_binary_row(sql, params)
    rows = np.frombuffer(records or b"", _RECORD)  # string_agg of no rows is NULL
    return WindowRows(
        rows["stage_id"].astype(np.int64),
        rows["start_us"] // 1_000_000 + PG_EPOCH_S,
        rows["error_count"].astype(np.int64),
        rows["sketch_bytes"].astype(np.int32),
        sketches or b"",
    )


def _fetch_binary_row(sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
    """The one row of ``sql``, fetched in PostgreSQL's binary format (bytea as raw bytes).

    Django's cursors bind parameters client side, which psycopg allows only with text
    results, and a bytea in text is hex: twice the bytes, to encode and decode. So the
    parameters are bound client side as Django would (psycopg's own quoting), and the
    resulting statement runs on a binary psycopg cursor wrapped like any Django cursor
    (database errors, query logging with the full statement).
    """
    raw = psycopg_cursor(db=connection)
    statement = psycopg.ClientCursor(connection.connection).mogrify(sql, params)
    raw.format = psycopg.pq.Format.BINARY  # what connection.cursor(binary=True) does
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as cursor:  # type: ignore[arg-type]  # the stubs want a wrapper here
        cursor.execute(statement)
        row: tuple[Any, ...] = cursor.fetchone()
    return row
