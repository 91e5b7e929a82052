"""Stage-share rows (``StageShare``) and the trace spans they are computed from, over a psycopg
cursor.

A step reads one pipeline's spans of some complete traces as one binary ``COPY`` stream of
fixed-width rows (:func:`trace_spans`, decoded by :func:`decode_trace_spans`, pure numpy),
then replaces the pipeline's minute rows of the step and re-sums its hours and days.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import psycopg

from latencyboard.pipelines.derivation import MEASURES
from latencyboard.storage import copy_format
from latencyboard.storage.tables import SPAN, STAGE, STAGE_SHARE, STAGE_SHARE_WATERMARK
from latencyboard.storage.timestamps import PG_EPOCH_US

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_SPAN_COLUMNS: Final = (
    "trace_id, span_id, parent_span_id IS NOT NULL, coalesce(parent_span_id, 0), stage_id::int8, "
    "start_time, duration_ns, is_root"
)
_HEADER_SIZE: Final = len(copy_format.HEADER)
_ROW: Final = np.dtype(
    [
        ("fields", ">i2"),
        ("trace_len", ">i4"),
        ("trace_high", ">u8"),
        ("trace_low", ">u8"),
        ("span_len", ">i4"),
        ("span_id", ">i8"),
        ("has_parent_len", ">i4"),
        ("has_parent", "u1"),
        ("parent_len", ">i4"),
        ("parent_span_id", ">i8"),
        ("stage_len", ">i4"),
        ("stage_id", ">i8"),
        ("start_len", ">i4"),
        ("start_us", ">i8"),
        ("duration_len", ">i4"),
        ("duration_ns", ">i8"),
        ("root_len", ">i4"),
        ("is_root", "u1"),
    ]
)
_FIELD_COUNT: Final = 8
_LENGTHS: Final = {
    "trace_len": 16,
    "span_len": 8,
    "has_parent_len": 1,
    "parent_len": 8,
    "stage_len": 8,
    "start_len": 8,
    "duration_len": 8,
    "root_len": 1,
}

# The start of the request after the first ``offset`` ones (the partial index of roots).
_NTH_ROOT: Final = f"""
SELECT start_time FROM {SPAN}
WHERE pipeline_id = %(pipeline)s AND is_root AND start_time >= %(start)s AND start_time < %(end)s
ORDER BY start_time
OFFSET %(offset)s LIMIT 1
"""  # noqa: S608 - a constant table name, no input
# The trace ids are collected first (pipeline_time index), then their spans are found by
# the primary key (team_id, trace_id, …) rather than by scanning the pipeline's hours.
# Measures (time to first token …) overlap the stages of a request: no part of its budget.
_TRACE_SPANS: Final = f"""
SELECT {_SPAN_COLUMNS} FROM {SPAN}
WHERE team_id = %(team)s AND pipeline_id = %(pipeline)s
  AND start_time >= %(reach_start)s AND start_time < %(reach_end)s
  AND stage_id <> ALL(ARRAY(
      SELECT id FROM {STAGE} WHERE pipeline_id = %(pipeline)s AND name = ANY(%(measures)s)
  ))
  AND trace_id = ANY(ARRAY(
      SELECT trace_id FROM {SPAN}
      WHERE pipeline_id = %(pipeline)s AND is_root
        AND start_time >= %(start)s AND start_time < %(end)s
  ))
"""  # noqa: S608 - constant columns and table name, no input
_DELETE_RANGE: Final = f"""
DELETE FROM {STAGE_SHARE}
WHERE pipeline_id = %(pipeline)s AND resolution = %(resolution)s
  AND bucket_start >= %(start)s AND bucket_start < %(end)s
"""  # noqa: S608 - a constant table name, no input
# One statement with array parameters: a backlog of days is hundreds of thousands of rows,
# which one ORM object each would spend most of a catch-up building. Each row's per-bucket
# arrays are the slice [lo, hi] (1-based) of one flat array per column.
_INSERT_ROWS: Final = f"""
INSERT INTO {STAGE_SHARE} (
    team_id, pipeline_id, stage_id, resolution, bucket_start, requests, self_ms_sum,
    root_ms_sum, root_keys, key_requests, key_root_ms, key_self_ms, critical_ms_sum,
    key_critical_ms
)
SELECT %(team)s, %(pipeline)s, u.stage_id, %(resolution)s, to_timestamp(u.bucket), u.requests,
       u.self_ms_sum, u.root_ms_sum, k.keys[u.lo:u.hi], k.requests[u.lo:u.hi],
       k.root[u.lo:u.hi], k.self[u.lo:u.hi], u.critical_ms_sum,
       CASE WHEN u.critical_ms_sum IS NOT NULL THEN k.critical[u.lo:u.hi] END
FROM unnest(
    %(stage)b::int8[], %(bucket)b::int8[], %(requests)b::int8[], %(self)b::float8[],
    %(root)b::float8[], %(lo)b::int4[], %(hi)b::int4[], %(critical)b::float8[]
) AS u(stage_id, bucket, requests, self_ms_sum, root_ms_sum, lo, hi, critical_ms_sum),
(SELECT %(keys)b::int4[] AS keys, %(key_requests)b::int8[] AS requests,
        %(key_root)b::float8[] AS root, %(key_self)b::float8[] AS self,
        %(key_critical)b::float8[] AS critical) AS k
"""  # noqa: S608 - a constant table name, no input
_FINE_ROWS: Final = f"""
SELECT extract(epoch FROM date_bin(%(width)s, bucket_start, 'epoch'))::int8,
       extract(epoch FROM bucket_start)::int8, stage_id, requests, self_ms_sum, root_ms_sum,
       root_keys, key_requests, key_root_ms, key_self_ms, critical_ms_sum, key_critical_ms
FROM {STAGE_SHARE}
WHERE pipeline_id = %(pipeline)s AND resolution = %(fine)s
  AND bucket_start >= %(start)s AND bucket_start < %(end)s
ORDER BY bucket_start, stage_id
"""  # noqa: S608 - a constant table name, no input
# Finer rows stay while the watermark is in their coarser bucket: the next step re-sums it.
_RETENTION: Final = f"""
DELETE FROM {STAGE_SHARE} s USING {STAGE_SHARE_WATERMARK} w
WHERE s.pipeline_id = w.pipeline_id AND s.resolution = %(resolution)s
  AND s.bucket_start < least(%(before)s, date_bin(%(coarser)s, w.done_until, 'epoch'))
"""  # noqa: S608 - constant table names, no input


@dataclass(frozen=True, slots=True)
class TraceSpans:
    """Parallel arrays, one entry per span of one pipeline, in any order."""

    trace: IntArray  # the trace's rank among the traces given: 0 … traces - 1
    span_id: IntArray
    parent_span_id: IntArray  # meaningful where ``has_parent``
    has_parent: BoolArray
    stage_id: IntArray
    start_ns: IntArray  # Unix nanoseconds
    duration_ns: IntArray
    is_root: BoolArray

    def __len__(self) -> int:
        return len(self.span_id)


@dataclass(frozen=True, slots=True)
class StageMinute:
    """One stage's self time over the requests of one bucket (a minute, or an hour or day of
    them), in all and per root-duration bucket: a row of the stage-share table
    (``rollups.stage_share_minutes`` computes the minutes).

    ``requests``, ``root_ms_sum``, ``root_keys``, ``key_requests`` and ``key_root_ms``
    describe the whole bucket and are the same for every stage of it: its requests per
    sketch bucket of their root duration (keys ascending), and their root durations summed
    per bucket. ``key_self_ms`` is this stage's self time over each key's requests. Minute
    sums are exact nanosecond sums, in milliseconds.

    ``critical_ms_sum`` and ``key_critical_ms`` are the same sums of the stage's time on its
    requests' critical paths (``rollups.critical_path``): over the stages of a bucket they add
    up to ``root_ms_sum``. None for rows written before critical paths were (and the hours
    and days that sum any of them).
    """

    bucket: int  # start of the bucket, Unix seconds
    stage_id: int
    requests: int
    self_ms_sum: float
    root_ms_sum: float
    root_keys: tuple[int, ...]
    key_requests: tuple[int, ...]
    key_root_ms: tuple[float, ...]
    key_self_ms: tuple[float, ...]
    critical_ms_sum: float | None
    key_critical_ms: tuple[float, ...] | None


def decode_trace_spans(data: bytes) -> TraceSpans:
    """Decode the binary ``COPY`` stream of :func:`trace_spans` into columns.

    Raises ValueError for anything but that layout (another column list, a NULL, a truncated
    stream): every row has the same width, so the rows are read as one numpy record array.
    Trace ids are ranked in byte order, the order PostgreSQL sorts uuids in.
    """
    if len(data) < _HEADER_SIZE + len(copy_format.TRAILER) or not data.startswith(
        copy_format.SIGNATURE
    ):
        raise ValueError("not a binary COPY stream")
    if not data.endswith(copy_format.TRAILER):
        raise ValueError("binary COPY stream without its trailer")
    body = len(data) - _HEADER_SIZE - len(copy_format.TRAILER)
    if body % _ROW.itemsize:
        raise ValueError(f"binary COPY body of {body} bytes is not whole {_ROW.itemsize}-byte rows")
    rows = np.frombuffer(data, dtype=_ROW, count=body // _ROW.itemsize, offset=_HEADER_SIZE)
    if np.any(rows["fields"] != _FIELD_COUNT) or any(
        np.any(rows[name] != length) for name, length in _LENGTHS.items()
    ):
        raise ValueError("binary COPY rows do not have the trace span columns' layout")
    high, low = rows["trace_high"].astype(np.uint64), rows["trace_low"].astype(np.uint64)
    by_trace = np.argsort(low)
    by_trace = by_trace[np.argsort(high[by_trace], kind="stable")]
    high, low = high[by_trace], low[by_trace]
    new_trace = np.ones(len(rows), dtype=np.bool_)
    new_trace[1:] = (high[1:] != high[:-1]) | (low[1:] != low[:-1])
    trace = np.empty(len(rows), dtype=np.int64)
    trace[by_trace] = np.cumsum(new_trace) - 1
    return TraceSpans(
        trace=trace,
        span_id=rows["span_id"].astype(np.int64),
        parent_span_id=rows["parent_span_id"].astype(np.int64),
        has_parent=rows["has_parent"].astype(np.bool_),
        stage_id=rows["stage_id"].astype(np.int64),
        start_ns=(rows["start_us"].astype(np.int64) + PG_EPOCH_US) * 1000,
        duration_ns=rows["duration_ns"].astype(np.int64),
        is_root=rows["is_root"].astype(np.bool_),
    )


def nth_root(
    cursor: psycopg.Cursor[Any],
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
    offset: int = 0,
) -> dt.datetime | None:
    """When the pipeline's root span after the first ``offset`` ones in ``[start, end)``
    started; None if there are not that many."""
    params = {"pipeline": pipeline_id, "start": start, "end": end, "offset": offset}
    found = cursor.execute(_NTH_ROOT, params).fetchone()
    return None if found is None else found[0]


def trace_spans(
    cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    *,
    start: dt.datetime,
    end: dt.datetime,
    reach: dt.timedelta,
) -> TraceSpans:
    """The pipeline's spans of every trace with a root of the pipeline in ``[start, end)``,
    looked for within ``reach`` of the range."""
    params = {
        "team": team_id,
        "pipeline": pipeline_id,
        "start": start,
        "end": end,
        "reach_start": start - reach,
        "reach_end": end + reach,
        "measures": sorted(MEASURES),
    }
    with cursor.copy(f"COPY ({_TRACE_SPANS}) TO STDOUT (FORMAT BINARY)", params) as copy:
        data = b"".join(copy)
    return decode_trace_spans(data)


def delete_range(
    cursor: psycopg.Cursor[Any],
    pipeline_id: int,
    resolution: str,
    start: dt.datetime,
    end: dt.datetime,
) -> int:
    """Delete the pipeline's ``resolution`` rows of ``[start, end)``; returns how many."""
    cursor.execute(
        _DELETE_RANGE,
        {"pipeline": pipeline_id, "resolution": resolution, "start": start, "end": end},
    )
    return cursor.rowcount


def insert_rows(
    cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    resolution: str,
    rows: Sequence[StageMinute],
) -> None:
    """Insert ``rows`` as the pipeline's ``resolution`` rows (the cursor binds server side)."""
    hi = np.cumsum([len(row.root_keys) for row in rows]).tolist()
    cursor.execute(
        _INSERT_ROWS,
        {
            "team": team_id,
            "pipeline": pipeline_id,
            "resolution": resolution,
            "stage": [row.stage_id for row in rows],
            "bucket": [row.bucket for row in rows],
            "requests": [row.requests for row in rows],
            "self": [row.self_ms_sum for row in rows],
            "root": [row.root_ms_sum for row in rows],
            "lo": [end - len(row.root_keys) + 1 for end, row in zip(hi, rows, strict=True)],
            "hi": hi,
            "keys": [key for row in rows for key in row.root_keys],
            "key_requests": [n for row in rows for n in row.key_requests],
            "key_root": [ms for row in rows for ms in row.key_root_ms],
            "key_self": [ms for row in rows for ms in row.key_self_ms],
            "critical": [row.critical_ms_sum for row in rows],
            "key_critical": [
                ms for row in rows for ms in (row.key_critical_ms or (0.0,) * len(row.root_keys))
            ],
        },
    )


def sum_finer(
    cursor: psycopg.Cursor[Any],
    insert_cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    *,
    fine: str,
    coarse: str,
    width: dt.timedelta,
    start: dt.datetime,
    end: dt.datetime,
) -> None:
    """Replace the pipeline's ``coarse`` rows of ``[start, end)`` (whole ``width`` buckets)
    by the sums of their ``fine`` rows (``insert_cursor`` binds server side)."""
    params = {"pipeline": pipeline_id, "fine": fine, "width": width, "start": start, "end": end}
    fine_rows = cursor.execute(_FINE_ROWS, params).fetchall()
    delete_range(cursor, pipeline_id, coarse, start, end)
    rows = sum_rows(fine_rows)
    if rows:
        insert_rows(insert_cursor, team_id, pipeline_id, coarse, rows)


def sum_rows(fine_rows: Sequence[tuple[Any, ...]]) -> list[StageMinute]:
    """Coarse rows from fine ones given as ``(coarse bucket, fine bucket, stage, requests,
    self, root, keys, key requests, key root, key self, critical, key critical)`` in (fine
    bucket, stage) order.

    Each fine bucket's totals, repeated on its stages' rows, are counted once; the coarse
    bucket's keys are those of all its fine buckets, and a stage absent from some of them
    has 0 self time there. Sums are taken in fine-bucket order, so the same rows always
    give the same floats. A coarse bucket has critical-path sums only if all its fine rows do.
    """
    buckets: dict[int, dict[int, tuple[Any, ...]]] = {}
    stages: dict[int, dict[int, list[tuple[Any, ...]]]] = {}
    for row in fine_rows:
        coarse, fine_bucket, stage = row[0], row[1], row[2]
        buckets.setdefault(coarse, {}).setdefault(fine_bucket, row)
        stages.setdefault(coarse, {}).setdefault(stage, []).append(row)
    result = []
    for coarse, fines in buckets.items():
        keys = np.concatenate([np.asarray(r[6], dtype=np.int64) for r in fines.values()])
        merged_keys, where = np.unique(keys, return_inverse=True)
        key_requests = np.zeros(len(merged_keys), dtype=np.int64)
        key_root = np.zeros(len(merged_keys))
        np.add.at(key_requests, where, np.concatenate([r[7] for r in fines.values()]))
        np.add.at(key_root, where, np.concatenate([r[8] for r in fines.values()]))
        requests = sum(r[3] for r in fines.values())
        root = sum(r[5] for r in fines.values())
        critical = all(r[10] is not None for rows in stages[coarse].values() for r in rows)
        for stage, rows in sorted(stages[coarse].items()):
            key_self = np.zeros(len(merged_keys))
            key_critical = np.zeros(len(merged_keys))
            for r in rows:
                at = np.searchsorted(merged_keys, r[6])
                key_self[at] += r[9]
                if critical:
                    key_critical[at] += r[11]
            result.append(
                StageMinute(
                    bucket=coarse,
                    stage_id=stage,
                    requests=requests,
                    self_ms_sum=sum(r[4] for r in rows),
                    root_ms_sum=root,
                    root_keys=tuple(merged_keys.tolist()),
                    key_requests=tuple(key_requests.tolist()),
                    key_root_ms=tuple(key_root.tolist()),
                    key_self_ms=tuple(key_self.tolist()),
                    critical_ms_sum=sum(r[10] for r in rows) if critical else None,
                    key_critical_ms=tuple(key_critical.tolist()) if critical else None,
                )
            )
    return result


def delete_expired(
    cursor: psycopg.Cursor[Any], resolution: str, before: dt.datetime, coarser: dt.timedelta
) -> None:
    """Delete the ``resolution`` rows before ``before`` whose ``coarser`` bucket each
    pipeline's watermark has left."""
    cursor.execute(_RETENTION, {"resolution": resolution, "before": before, "coarser": coarser})
