"""The spans a rollup fold reads, and the ingest batches it claims and marks rolled up.

Spans come as one binary value, their fixed-width :data:`SPAN_RECORD` concatenated
server-side (five times faster to fetch than a binary ``COPY``, which costs a protocol
message per row), decoded into columns by :func:`decode` (pure: numpy). The spans of the
batches a fold claims also bring what their cohorts are read from (:class:`BatchSpans`):
their template, and whether their own attributes name a cohort attribute.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import psycopg

from latencyboard.storage.tables import INGEST_BATCH, PIPELINE, SPAN, STAGE
from latencyboard.storage.timestamps import PG_EPOCH_US

SPAN_RECORD: Final = (
    "int8send(pipeline_id) || int8send(stage_id) || timestamptz_send(start_time)"
    " || int8send(duration_ns) || boolsend(is_root) || boolsend(status_code = 2)"
)
"""One span as fixed-width binary, for ``string_agg(SPAN_RECORD, '')``: :func:`decode`
reads the concatenation. Every column is NOT NULL (a NULL would drop the record)."""

_FIELDS: Final = [
    ("pipeline_id", ">i8"),
    ("stage_id", ">i8"),
    ("start_us", ">i8"),
    ("duration_ns", ">i8"),
    ("is_root", "u1"),
    ("is_error", "u1"),
]
_RECORD: Final = np.dtype(_FIELDS)
BATCH_RECORD: Final = (
    SPAN_RECORD + " || int8send(coalesce(template_id, 0))"
    " || boolsend(attributes ?| %(cohort_keys)b::text[])"
)
""":data:`SPAN_RECORD`, then the span's template id (0 for none) and whether its own
attributes hold one of ``cohort_keys``."""
_BATCH_RECORD: Final = np.dtype([*_FIELDS, ("template_id", ">i8"), ("own_cohort_key", "u1")])
_CLAIM: Final = f"""
SELECT id, stored_spans FROM {INGEST_BATCH}
WHERE rolled_up_at IS NULL
ORDER BY id
LIMIT %s
FOR UPDATE SKIP LOCKED
"""  # noqa: S608 - a constant table name, no input
# The count guards the aggregate, which would skip a record silently were it NULL. The
# BETWEEN lets the block-range index on batch_id skip most of each partition.
_BATCH_SPANS: Final = f"""
SELECT count(*), string_agg({BATCH_RECORD}, ''::bytea) FROM {SPAN}
WHERE batch_id = ANY(%(batches)b::int8[]) AND batch_id BETWEEN %(first)s AND %(last)s
"""  # noqa: S608 - constant expressions, no input
# Spans of batches not rolled up yet are left to the folds that will claim them.
_FOLDED_SPANS: Final = f"""
SELECT count(*), string_agg({SPAN_RECORD}, ''::bytea) FROM {SPAN} s
WHERE s.pipeline_id = ANY(%(pipelines)b::int8[])
  AND s.start_time >= %(start)s AND s.start_time < %(end)s
  AND NOT EXISTS (
      SELECT 1 FROM {INGEST_BATCH} b WHERE b.id = s.batch_id AND b.rolled_up_at IS NULL
  )
"""  # noqa: S608 - constant expressions, no input
_FOLDED_STAGE_SPANS: Final = _FOLDED_SPANS + "  AND s.stage_id = %(stage)s\n"
_FOLDED_ROOT_SPANS: Final = _FOLDED_SPANS + "  AND s.is_root\n"
_EXTENT: Final = f"""
SELECT date_trunc('hour', min(start_time), 'UTC'), max(start_time) + interval '1 hour'
FROM {SPAN} WHERE pipeline_id = %s
"""  # noqa: S608 - a constant table name, no input
_MARK_ROLLED_UP: Final = f"UPDATE {INGEST_BATCH} SET rolled_up_at = %s WHERE id = ANY(%b::int8[])"  # noqa: S608
_STAGE_OWNERS: Final = f"""
SELECT s.id, p.id, p.team_id FROM {STAGE} s
JOIN {PIPELINE} p ON p.id = s.pipeline_id
WHERE s.id = ANY(%b::int8[])
"""  # noqa: S608 - constant table names, no input


@dataclass(frozen=True, slots=True)
class SpanRecords:
    """Parallel arrays, one entry per span as stored."""

    pipeline_id: npt.NDArray[np.int64]
    stage_id: npt.NDArray[np.int64]
    start_us: npt.NDArray[np.int64]  # Unix microseconds
    duration_ns: npt.NDArray[np.int64]
    is_root: npt.NDArray[np.bool_]
    is_error: npt.NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.pipeline_id)


@dataclass(frozen=True, slots=True)
class BatchSpans:
    """The spans of claimed batches, and what their cohort values are read from."""

    records: SpanRecords
    template_id: npt.NDArray[np.int64]  # 0: the span has no template
    own_cohort_key: npt.NDArray[np.bool_]  # its own attributes hold a cohort attribute


def _records(data: bytes, layout: np.dtype[Any], flags: Sequence[str]) -> npt.NDArray[Any]:
    if len(data) % layout.itemsize:
        raise ValueError(f"{len(data)} bytes are not whole {layout.itemsize}-byte span records")
    records = np.frombuffer(data, dtype=layout)
    if any(np.any(records[flag] > 1) for flag in flags):
        raise ValueError("span records do not have the expected layout")
    return records


def decode(data: bytes) -> SpanRecords:
    """Decode concatenated :data:`SPAN_RECORD` values into columns.

    Raises ValueError for anything else (a torn record, a boolean that is neither 0 nor 1).
    """
    return _span_records(_records(data, _RECORD, ("is_root", "is_error")))


def decode_batch(data: bytes) -> BatchSpans:
    """Decode concatenated :data:`BATCH_RECORD` values; ValueError as :func:`decode`."""
    records = _records(data, _BATCH_RECORD, ("is_root", "is_error", "own_cohort_key"))
    return BatchSpans(
        _span_records(records),
        records["template_id"].astype(np.int64),
        records["own_cohort_key"].astype(np.bool_),
    )


def _span_records(records: npt.NDArray[Any]) -> SpanRecords:
    return SpanRecords(
        pipeline_id=records["pipeline_id"].astype(np.int64),
        stage_id=records["stage_id"].astype(np.int64),
        start_us=records["start_us"].astype(np.int64) + PG_EPOCH_US,
        duration_ns=records["duration_ns"].astype(np.int64),
        is_root=records["is_root"].astype(np.bool_),
        is_error=records["is_error"].astype(np.bool_),
    )


def _read(cursor: psycopg.Cursor[Any], query: str, params: dict[str, Any]) -> SpanRecords:
    count, data = _fetch(cursor, query, params)
    return _counted(decode(data), count)


def _fetch(cursor: psycopg.Cursor[Any], query: str, params: dict[str, Any]) -> tuple[int, bytes]:
    row = cursor.execute(query, params, binary=True).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    count, data = row
    return count, data or b""


def _counted(spans: SpanRecords, count: int) -> SpanRecords:
    """``spans``, if all ``count`` were read (the aggregate would skip a NULL record)."""
    if len(spans) != count:
        raise ValueError(f"read {len(spans)} of {count} spans")
    return spans


def claim_batches(cursor: psycopg.Cursor[Any], limit: int) -> list[tuple[int, int]]:
    """``(id, stored spans)`` of up to ``limit`` batches not rolled up yet, oldest first,
    locked for this transaction; batches another fold holds are skipped."""
    return cursor.execute(_CLAIM, [limit]).fetchall()


def batch_spans(
    cursor: psycopg.Cursor[Any], batches: Sequence[int], cohort_keys: Sequence[str]
) -> BatchSpans:
    """The spans of ``batches`` (ids in ascending order), flagged where their own
    attributes hold one of ``cohort_keys``."""
    params = {
        "batches": batches,
        "first": batches[0],
        "last": batches[-1],
        "cohort_keys": list(cohort_keys),
    }
    count, data = _fetch(cursor, _BATCH_SPANS, params)
    spans = decode_batch(data)
    _counted(spans.records, count)
    return spans


def folded_spans(
    cursor: psycopg.Cursor[Any], pipelines: Sequence[int], start: dt.datetime, end: dt.datetime
) -> SpanRecords:
    """The spans of ``pipelines`` starting in ``[start, end)`` of batches rolled up."""
    return _read(cursor, _FOLDED_SPANS, {"pipelines": pipelines, "start": start, "end": end})


def folded_stage_spans(
    cursor: psycopg.Cursor[Any],
    pipeline_id: int,
    stage_id: int | None,
    start: dt.datetime,
    end: dt.datetime,
) -> SpanRecords:
    """:func:`folded_spans` of one stage of the pipeline, or its root spans for None."""
    params = {"pipelines": [pipeline_id], "start": start, "end": end, "stage": stage_id}
    query = _FOLDED_ROOT_SPANS if stage_id is None else _FOLDED_STAGE_SPANS
    return _read(cursor, query, params)


def span_extent(
    cursor: psycopg.Cursor[Any], pipeline_id: int
) -> tuple[dt.datetime, dt.datetime] | None:
    """Whole hours from the pipeline's first span to past its last; None without spans."""
    row = cursor.execute(_EXTENT, [pipeline_id]).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    first, end = row
    return None if first is None else (first, end)


def mark_rolled_up(cursor: psycopg.Cursor[Any], batches: Sequence[int], now: dt.datetime) -> None:
    cursor.execute(_MARK_ROLLED_UP, [now, batches])


def stage_owners(
    cursor: psycopg.Cursor[Any], stage_ids: Sequence[int]
) -> list[tuple[int, int, int]]:
    """``(stage, pipeline, team)`` of those of ``stage_ids`` that still exist."""
    return cursor.execute(_STAGE_OWNERS, [list(stage_ids)]).fetchall()
