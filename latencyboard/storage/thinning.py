"""The SQL of thinning a day of raw spans: checking the day is folded, reading why each of its
traces may stay, and swapping the kept traces in for the whole day (pure: no Django).

The swap copies the kept spans out of the day's partition, empties the partition with
``TRUNCATE`` (a new, empty file; the old one goes at commit) and copies them back, in one
transaction: no row is deleted, so nothing is left to vacuum, and the partition keeps its
name, bounds and indexes. The indexes are then rebuilt from the sorted kept rows: an index
filled row by row in arrival order has its pages split half full along the way (the primary
key, on random trace ids, most of all), a rebuilt one packs them (~12% of a span's bytes on
the demo traffic). ``TRUNCATE`` already holds the partition exclusively until commit, so the
rebuild blocks nothing more. Detaching the partition and attaching a new table instead would
take an ACCESS EXCLUSIVE lock on the whole span table, which deadlocks with an ingest
transaction that holds the span table while waiting to write a late span into this day.

The day's span events (:mod:`.span_events`) are swapped the same way, for the same traces.

Every statement names the span table's columns as the catalog lists them, so the copy
follows whatever columns the span row has.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Final

import psycopg

from latencyboard.storage.partitions import DayPartition
from latencyboard.storage.tables import (
    INGEST_BATCH,
    PIPELINE,
    ROLLUP,
    SPAN,
    SPAN_EVENTS,
    STAGE_SHARE_WATERMARK,
    THINNED_DAY,
)

THIN: Final = 0x5A_1A_C0_02
"""Advisory lock key: one thinner at a time (a second waits, then finds the day thinned)."""

_LOCK: Final = "SELECT pg_advisory_xact_lock(%s)"
_COLUMNS: Final = """
SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped
"""
_THINNED: Final = f"""
SELECT day FROM {THINNED_DAY} WHERE day >= %s AND day < %s ORDER BY day
"""  # noqa: S608 - a constant table name, no input
# Spans of the day whose batch no fold has committed yet (a fold in flight included).
_UNFOLDED: Final = """
SELECT count(*) FROM {batches} b
WHERE b.rolled_up_at IS NULL AND EXISTS (SELECT 1 FROM {partition} s WHERE s.batch_id = b.id)
"""
# Pipelines deleted since are left out: nothing derived from their spans is kept.
_PIPELINES_OF_DAY: Final = f"""
SELECT p.id AS pipeline_id FROM {PIPELINE} p
WHERE EXISTS (SELECT 1 FROM {{partition}} s WHERE s.pipeline_id = p.id AND s.is_root)
"""  # noqa: S608 - a constant table name, no input
_SHARES_BEHIND: Final = f"""
SELECT r.pipeline_id FROM ({_PIPELINES_OF_DAY}) r
LEFT JOIN {STAGE_SHARE_WATERMARK} w ON w.pipeline_id = r.pipeline_id
WHERE w.done_until IS NULL OR w.done_until < %s
ORDER BY r.pipeline_id
"""  # noqa: S608 - constant table names, no input
_WITHOUT_MINUTES: Final = f"""
SELECT r.pipeline_id FROM ({_PIPELINES_OF_DAY}) r
WHERE NOT EXISTS (
    SELECT 1 FROM {ROLLUP} m
    WHERE m.pipeline_id = r.pipeline_id AND m.resolution = 'minute' AND m.stage_id IS NULL
      AND m.bucket_start >= %s AND m.bucket_start < %s
)
ORDER BY r.pipeline_id
"""  # noqa: S608 - constant table names, no input
_MINUTE_SKETCHES: Final = f"""
SELECT pipeline_id, bucket_start, sketch FROM {ROLLUP}
WHERE resolution = 'minute' AND stage_id IS NULL AND bucket_start >= %s AND bucket_start < %s
ORDER BY pipeline_id, bucket_start
"""  # noqa: S608 - a constant table name, no input
# One fixed-width record per trace with spans in the day: its id, whether any span failed,
# whether a root span is slower than its pipeline's p99 of its minute, and whether it has spans
# in a neighbouring day already thinned. Spans up to ``reach`` either side are read too, so
# a trace that crosses midnight is judged whole. Durations are compared in milliseconds as the
# fold computes them, so a root exactly at the p99 is not slow.
_TRACE_FLAGS: Final = f"""
WITH slow AS (
    SELECT * FROM unnest(%(pipelines)s::int8[], %(minutes)s::timestamptz[], %(p99_ms)s::float8[])
        AS t(pipeline_id, minute, p99_ms)
)
SELECT count(*), string_agg(
    uuid_send(trace_id) || boolsend(error) || boolsend(slow) || boolsend(nearby), ''::bytea
)
FROM (
    SELECT s.trace_id,
           bool_or(s.status_code = 2) AS error,
           coalesce(bool_or(s.duration_ns::float8 / 1e6::float8 > t.p99_ms), false) AS slow,
           bool_or((s.start_time < %(lower)s AND %(before_thinned)s)
                   OR (s.start_time >= %(upper)s AND %(after_thinned)s)) AS nearby
    FROM {SPAN} s
    LEFT JOIN slow t ON s.is_root AND t.pipeline_id = s.pipeline_id
                    AND t.minute = date_bin('1 minute', s.start_time, 'epoch')
    WHERE s.start_time >= %(reach_lower)s AND s.start_time < %(reach_upper)s
    GROUP BY s.trace_id
    HAVING bool_or(s.start_time >= %(lower)s AND s.start_time < %(upper)s)
) traces
"""  # noqa: S608 - a constant table name, no input
_KEEP_TABLE: Final = "thinning_keep"
_KEPT_TABLE: Final = "thinning_kept"
_INSERT_THINNED: Final = f"""
INSERT INTO {THINNED_DAY} (
    day, thinned_at, sample_percent, spans_before, spans_after, traces_before, error_traces,
    slow_traces, sampled_traces
) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""  # noqa: S608 - a constant table name, no input


def lock(cursor: Any) -> None:
    """Take the thinner's lock for the rest of the transaction, over any DB-API cursor."""
    cursor.execute(_LOCK, [THIN])


def hold_day(cursor: psycopg.Cursor[Any], partition: DayPartition) -> None:
    """Hold writes into the day's partitions back until commit (reads go on): a late span
    arriving while the day is thinned waits, then lands in the thinned day and is folded."""
    cursor.execute(f"LOCK TABLE {partition.name}, {partition.events_name} IN SHARE MODE")


def thinned_days(cursor: Any, start: dt.date, end: dt.date) -> list[dt.date]:
    """Days in ``[start, end)`` already thinned, over any DB-API cursor."""
    cursor.execute(_THINNED, [start, end])
    return [day for (day,) in cursor.fetchall()]


def unfolded_batches(cursor: psycopg.Cursor[Any], partition: str) -> int:
    """Ingest batches with spans in the partition that no fold has committed yet."""
    row = cursor.execute(_UNFOLDED.format(batches=INGEST_BATCH, partition=partition)).fetchone()
    assert row is not None
    return int(row[0])


def shares_behind(cursor: psycopg.Cursor[Any], partition: str, until: dt.datetime) -> list[int]:
    """Pipelines with requests in the partition whose stage shares are not written up to
    ``until`` (the shares of a minute read spans up to an hour after it)."""
    sql = _SHARES_BEHIND.format(partition=partition)
    return [pipeline_id for (pipeline_id,) in cursor.execute(sql, [until]).fetchall()]


def without_minutes(
    cursor: psycopg.Cursor[Any], partition: str, start: dt.datetime, end: dt.datetime
) -> list[int]:
    """Pipelines with requests in the partition but no end-to-end minute rollup in
    ``[start, end)``: their minutes expired, so no p99 says which of their traces are slow."""
    sql = _WITHOUT_MINUTES.format(partition=partition)
    return [pipeline_id for (pipeline_id,) in cursor.execute(sql, [start, end]).fetchall()]


def minute_sketches(
    cursor: psycopg.Cursor[Any], start: dt.datetime, end: dt.datetime
) -> list[tuple[int, dt.datetime, bytes]]:
    """``(pipeline, minute, sketch)`` of every end-to-end minute rollup in ``[start, end)``."""
    return cursor.execute(_MINUTE_SKETCHES, [start, end], binary=True).fetchall()


def trace_flags(
    cursor: psycopg.Cursor[Any],
    *,
    lower: dt.datetime,
    upper: dt.datetime,
    reach: dt.timedelta,
    slow: tuple[Sequence[int], Sequence[dt.datetime], Sequence[float]],
    before_thinned: bool,
    after_thinned: bool,
) -> tuple[int, bytes]:
    """``(traces, records)``: one 19-byte record per trace with spans in ``[lower, upper)``
    (16-byte id, then error, slow and kept-nearby as one byte each). ``slow`` holds the p99
    in milliseconds of each (pipeline, minute) as three parallel sequences."""
    pipelines, minutes, p99_ms = slow
    params = {
        "pipelines": list(pipelines),
        "minutes": list(minutes),
        "p99_ms": list(p99_ms),
        "lower": lower,
        "upper": upper,
        "reach_lower": lower - reach,
        "reach_upper": upper + reach,
        "before_thinned": before_thinned,
        "after_thinned": after_thinned,
    }
    row = cursor.execute(_TRACE_FLAGS, params, binary=True).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    count, records = row
    return int(count), bytes(records or b"")


def swap_in_kept(
    cursor: psycopg.Cursor[Any], partition: DayPartition, trace_ids: bytes
) -> tuple[int, int]:
    """Replace the day's spans, and their events, with those of ``trace_ids`` (16-byte ids
    end to end); returns the spans before and after."""
    cursor.execute(f"CREATE TEMP TABLE {_KEEP_TABLE} (trace_id uuid PRIMARY KEY) ON COMMIT DROP")
    with cursor.copy(f"COPY {_KEEP_TABLE} (trace_id) FROM STDIN") as copy:
        for first in range(0, len(trace_ids), 16):
            copy.write_row([trace_ids[first : first + 16].hex()])
    spans = _swap(cursor, SPAN, partition.name)
    _swap(cursor, SPAN_EVENTS, partition.events_name)
    return spans


def _swap(cursor: psycopg.Cursor[Any], table: str, partition: str) -> tuple[int, int]:
    """Swap the kept traces' rows in for the whole partition of ``table``: (before, after)."""
    row = cursor.execute(_COLUMNS, [table]).fetchone()
    assert row is not None
    columns = row[0]
    cursor.execute(f"CREATE TEMP TABLE {_KEPT_TABLE} (LIKE {table}) ON COMMIT DROP")
    before_row = cursor.execute(f"SELECT count(*) FROM {partition}").fetchone()  # noqa: S608
    assert before_row is not None
    cursor.execute(
        f"INSERT INTO {_KEPT_TABLE} ({columns}) SELECT {columns} FROM {partition} "  # noqa: S608
        f"WHERE trace_id IN (SELECT trace_id FROM {_KEEP_TABLE})"
    )
    after = cursor.rowcount
    cursor.execute(f"TRUNCATE {partition}")
    cursor.execute(
        f"INSERT INTO {partition} ({columns}) SELECT {columns} FROM {_KEPT_TABLE}"  # noqa: S608
    )
    cursor.execute(f"DROP TABLE {_KEPT_TABLE}")
    cursor.execute(f"REINDEX TABLE {partition}")
    cursor.execute(f"ANALYZE {partition}")
    return int(before_row[0]), int(after)


def record(
    cursor: psycopg.Cursor[Any],
    day: dt.date,
    now: dt.datetime,
    percent: int,
    spans: tuple[int, int],
    traces: int,
    kept: tuple[int, int, int],
) -> None:
    """The row saying ``day`` is thinned: ``spans`` before and after, ``traces`` before, and
    those ``kept`` as errors, slow and sampled."""
    cursor.execute(_INSERT_THINNED, [day, now, percent, *spans, traces, *kept])
