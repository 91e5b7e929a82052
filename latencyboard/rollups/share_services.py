"""Writes of stage shares: per-minute self time by stage, over all requests and the tail.

Unlike the rollup fold, which adds each ingest batch as it lands, shares need whole requests:
the spans of one trace arrive in several export batches, from several processes. So a minute
is computed once, ``STAGE_SHARE_GRACE_SECONDS`` after it ends, from the raw spans of every
trace whose root started in it; spans stored after that are in the rollups but not in the
shares. Each pipeline has a watermark (``StageShareWatermark``): the minute rows before it
are written, and each step replaces the rows from the watermark up to a new one and moves
it, in one transaction, so a crash never skips or doubles a minute. Moving a watermark back
by hand (within the minute retention) recomputes from there.

Hours and days are recomputed as sums of their minutes and hours in the same transaction.
Retention follows the rollups' ``ROLLUP_*_DAYS``, so shares can be read at the resolutions
percentiles are; minutes (hours) are kept until the watermark has left their hour (day),
which the next step re-sums.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from django.conf import settings
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.live.services import announce
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import shares
from latencyboard.rollups.models import Resolution, StageShareWatermark
from latencyboard.rollups.windows import ceil_to, floor_to

logger = logging.getLogger(__name__)

MINUTE: Final = dt.timedelta(minutes=1)
HOUR: Final = dt.timedelta(hours=1)
DAY: Final = dt.timedelta(days=1)
TRACE_REACH: Final = dt.timedelta(hours=1)
"""How far before and after its root's minute a span of the request is looked for: an
inference request lasts far less, and the bound keeps the read to one or two partitions."""

# The start of the request after the first ``offset`` ones (the partial index of roots).
_NTH_ROOT = """
SELECT start_time FROM spans_span
WHERE pipeline_id = %(pipeline)s AND is_root AND start_time >= %(start)s AND start_time < %(end)s
ORDER BY start_time
OFFSET %(offset)s LIMIT 1
"""
# The trace ids are collected first (pipeline_time index), then their spans are found by
# the primary key (team_id, trace_id, …) rather than by scanning the pipeline's hours.
_TRACE_SPANS = f"""
SELECT {shares.SPAN_COLUMNS} FROM spans_span
WHERE team_id = %(team)s AND pipeline_id = %(pipeline)s
  AND start_time >= %(reach_start)s AND start_time < %(reach_end)s
  AND trace_id = ANY(ARRAY(
      SELECT trace_id FROM spans_span
      WHERE pipeline_id = %(pipeline)s AND is_root
        AND start_time >= %(start)s AND start_time < %(end)s
  ))
"""  # noqa: S608 - the column list is a constant, not input
_DELETE_RANGE = """
DELETE FROM rollups_stageshare
WHERE pipeline_id = %(pipeline)s AND resolution = %(resolution)s
  AND bucket_start >= %(start)s AND bucket_start < %(end)s
"""
# One statement with array parameters: a backlog of days is hundreds of thousands of rows,
# which one ORM object each would spend most of a catch-up building.
_INSERT_MINUTES = """
INSERT INTO rollups_stageshare (
    team_id, pipeline_id, stage_id, resolution, bucket_start, requests, self_ms_sum,
    tail_requests, tail_self_ms_sum, root_ms_sum, tail_root_ms_sum
)
SELECT %(team)s, %(pipeline)s, u.stage_id, %(resolution)s, to_timestamp(u.bucket), u.requests,
       u.self_ms_sum, u.tail_requests, u.tail_self_ms_sum, u.root_ms_sum, u.tail_root_ms_sum
FROM unnest(
    %(stage)b::int8[], %(bucket)b::int8[], %(requests)b::int8[], %(self)b::float8[],
    %(tail_requests)b::int8[], %(tail_self)b::float8[], %(root)b::float8[],
    %(tail_root)b::float8[]
) AS u(stage_id, bucket, requests, self_ms_sum, tail_requests, tail_self_ms_sum, root_ms_sum,
       tail_root_ms_sum)
"""
# Each finer bucket repeats its request totals on every stage row: they are summed once per
# finer bucket. Ordered sums give the same floats whenever the same rows are summed.
_SUM_FINER = """
INSERT INTO rollups_stageshare (
    team_id, pipeline_id, stage_id, resolution, bucket_start, requests, self_ms_sum,
    tail_requests, tail_self_ms_sum, root_ms_sum, tail_root_ms_sum
)
WITH fine AS (
    SELECT *, date_bin(%(width)s, bucket_start, 'epoch') AS bucket
    FROM rollups_stageshare
    WHERE pipeline_id = %(pipeline)s AND resolution = %(fine)s
      AND bucket_start >= %(start)s AND bucket_start < %(end)s
),
totals AS (
    SELECT bucket, sum(requests) AS requests, sum(tail_requests) AS tail_requests,
           sum(root_ms_sum ORDER BY bucket_start) AS root_ms_sum,
           sum(tail_root_ms_sum ORDER BY bucket_start) AS tail_root_ms_sum
    FROM (SELECT DISTINCT ON (bucket_start) * FROM fine ORDER BY bucket_start) AS one_per_bucket
    GROUP BY bucket
)
SELECT f.team_id, f.pipeline_id, f.stage_id, %(coarse)s, f.bucket, t.requests,
       sum(f.self_ms_sum ORDER BY f.bucket_start), t.tail_requests,
       sum(f.tail_self_ms_sum ORDER BY f.bucket_start), t.root_ms_sum, t.tail_root_ms_sum
FROM fine f JOIN totals t USING (bucket)
GROUP BY f.team_id, f.pipeline_id, f.stage_id, f.bucket, t.requests, t.tail_requests,
         t.root_ms_sum, t.tail_root_ms_sum
"""
# Finer rows stay while the watermark is in their coarser bucket: the next step re-sums it.
_RETENTION = """
DELETE FROM rollups_stageshare s USING rollups_stagesharewatermark w
WHERE s.pipeline_id = w.pipeline_id AND s.resolution = %(resolution)s
  AND s.bucket_start < least(%(before)s, date_bin(%(coarser)s, w.done_until, 'epoch'))
"""


@dataclass(frozen=True, slots=True)
class ShareResult:
    minutes: int  # pipeline minutes with requests written
    requests: int
    spans: int  # spans read
    behind: int  # pipelines with minutes ready but not reached in the time given


@dataclass(frozen=True, slots=True)
class _Step:
    minutes: int
    requests: int
    spans: int
    more: bool  # more minutes are ready for this pipeline


_IDLE: Final = _Step(0, 0, 0, more=False)

REQUESTS_PER_STEP: Final = 20_000
"""Requests one step reads at most, unless its first minute alone has more. A step holds all
their spans at once (some 500 bytes a span at the peak, ~70 MB for 20,000 requests of seven
spans): this, not ``minutes_per_step``, bounds a worker's memory through a backlog."""


@dataclass(frozen=True, slots=True)
class _Level:
    fine: Resolution
    coarse: Resolution
    width: dt.timedelta


_HOURS: Final = _Level(Resolution.MINUTE, Resolution.HOUR, HOUR)
_DAYS: Final = _Level(Resolution.HOUR, Resolution.DAY, DAY)


def compute_stage_shares(
    now: dt.datetime,
    *,
    seconds: float,
    minutes_per_step: int = 15,
    requests_per_step: int = REQUESTS_PER_STEP,
) -> ShareResult:
    """Write the stage shares of every pipeline minute that ended ``STAGE_SHARE_GRACE_SECONDS``
    before ``now`` and is not written yet, then apply retention.

    Pipelines take turns, one step (one transaction, at most ``minutes_per_step`` minutes
    from the first one with a request, and no more whole minutes than hold
    ``requests_per_step`` requests: at least one) each, until all are caught up or ``seconds`` have
    passed; a pipeline another worker is stepping is skipped. A new pipeline starts from
    the oldest raw spans kept (``RETENTION_DAYS``), its minutes without requests skipped.
    The live pages of each pipeline with new minutes then hear a ``stage_shares`` event.
    """
    started = time.monotonic()
    ready = floor_to(now - dt.timedelta(seconds=settings.STAGE_SHARE_GRACE_SECONDS), MINUTE)
    oldest = floor_to(now - dt.timedelta(days=settings.RETENTION_DAYS), MINUTE)
    pending = deque(Pipeline.objects.order_by("pk").values_list("pk", "team_id"))
    minutes = requests = spans = 0
    changed: set[int] = set()
    while pending and time.monotonic() - started < seconds:
        pipeline_id, team_id = pending.popleft()
        step = _step(
            pipeline_id,
            team_id,
            ready=ready,
            oldest=oldest,
            minutes=minutes_per_step,
            requests=requests_per_step,
        )
        minutes += step.minutes
        requests += step.requests
        spans += step.spans
        if step.minutes:
            changed.add(pipeline_id)
        if step.more:
            pending.append((pipeline_id, team_id))
    announce("stage_shares", changed)
    _apply_retention(now)
    result = ShareResult(minutes, requests, spans, behind=len(pending))
    logger.info(
        "stage_shares.done",
        extra={
            "minutes": result.minutes,
            "requests": result.requests,
            "spans": result.spans,
            "behind": result.behind,
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return result


def _step(
    pipeline_id: int,
    team_id: int,
    *,
    ready: dt.datetime,
    oldest: dt.datetime,
    minutes: int,
    requests: int,
) -> _Step:
    """Replace one pipeline's rows from its watermark up to a new one, and move it there.

    The new watermark is ``minutes`` past the minute of the first request after the old one
    (``ready`` when there is none, or when it comes sooner), or sooner: the minute of the
    request after the first ``requests`` ones, but at least one minute past the first.
    """
    with transaction.atomic():
        StageShareWatermark.objects.bulk_create(
            [StageShareWatermark(pipeline_id=pipeline_id, done_until=oldest)],
            ignore_conflicts=True,
        )
        done_until = (
            StageShareWatermark.objects.select_for_update(skip_locked=True)
            .filter(pipeline_id=pipeline_id)
            .values_list("done_until", flat=True)
            .first()
        )
        if done_until is None or done_until >= ready:
            return _IDLE
        cursor = psycopg_cursor(server_side_binding=False)
        window = {"pipeline": pipeline_id, "start": done_until, "end": ready}
        first_root = cursor.execute(_NTH_ROOT, {**window, "offset": 0}).fetchone()
        if first_root is None:
            end, span_count, rows = ready, 0, []
        else:
            start = floor_to(first_root[0], MINUTE)
            end = min(start + minutes * MINUTE, ready)
            # A step's spans are in memory at once: a backlog is taken a bounded bite at a time.
            past_budget = cursor.execute(_NTH_ROOT, {**window, "offset": requests}).fetchone()
            if past_budget is not None:
                end = min(end, max(floor_to(past_budget[0], MINUTE), start + MINUTE))
            spans = _read_trace_spans(cursor, team_id, pipeline_id, start, end)
            # The traces may hold other roots of the pipeline, of minutes outside the step.
            rows = [
                row
                for row in shares.stage_minutes(spans)
                if start.timestamp() <= row.bucket < end.timestamp()
            ]
            span_count = len(spans)
        if _replace_minutes(cursor, team_id, pipeline_id, done_until, end, rows):
            for level in (_HOURS, _DAYS):
                _sum_finer(cursor, level, pipeline_id, done_until, end)
        moved = StageShareWatermark.objects.filter(
            pipeline_id=pipeline_id, done_until=done_until
        ).update(done_until=end)
        assert moved == 1, "this transaction holds the watermark row's lock"
    requests_of = {row.bucket: row.requests for row in rows}
    return _Step(len(requests_of), sum(requests_of.values()), span_count, more=end < ready)


def _read_trace_spans(
    cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
) -> shares.TraceSpans:
    """The pipeline's spans of every trace with a root of the pipeline in ``[start, end)``."""
    params = {
        "team": team_id,
        "pipeline": pipeline_id,
        "start": start,
        "end": end,
        "reach_start": start - TRACE_REACH,
        "reach_end": end + TRACE_REACH,
    }
    with cursor.copy(f"COPY ({_TRACE_SPANS}) TO STDOUT (FORMAT BINARY)", params) as copy:
        data = b"".join(copy)
    return shares.decode_trace_spans(data)


def _replace_minutes(
    cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
    rows: list[shares.StageMinute],
) -> bool:
    """Make ``rows`` the pipeline's minute rows of ``[start, end)``; whether any changed."""
    cursor.execute(
        _DELETE_RANGE,
        {"pipeline": pipeline_id, "resolution": Resolution.MINUTE, "start": start, "end": end},
    )
    deleted = cursor.rowcount
    if rows:
        psycopg_cursor().execute(
            _INSERT_MINUTES,
            {
                "team": team_id,
                "pipeline": pipeline_id,
                "resolution": Resolution.MINUTE,
                "stage": [row.stage_id for row in rows],
                "bucket": [row.bucket for row in rows],
                "requests": [row.requests for row in rows],
                "self": [row.self_ms_sum for row in rows],
                "tail_requests": [row.tail_requests for row in rows],
                "tail_self": [row.tail_self_ms_sum for row in rows],
                "root": [row.root_ms_sum for row in rows],
                "tail_root": [row.tail_root_ms_sum for row in rows],
            },
        )
    return bool(deleted or rows)


def _sum_finer(
    cursor: psycopg.Cursor[Any],
    level: _Level,
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
) -> None:
    """Recompute the pipeline's ``level.coarse`` rows of the buckets overlapping
    ``[start, end)`` as sums of their finer rows."""
    params = {
        "pipeline": pipeline_id,
        "fine": level.fine,
        "coarse": level.coarse,
        "width": level.width,
        "start": floor_to(start, level.width),
        "end": ceil_to(end, level.width),
    }
    cursor.execute(_DELETE_RANGE, {**params, "resolution": level.coarse})
    cursor.execute(_SUM_FINER, params)


def _apply_retention(now: dt.datetime) -> None:
    """Delete the rows older than the rollups' ``ROLLUP_*_DAYS`` (whole hours and days)."""
    kept = (
        (
            Resolution.MINUTE,
            floor_to(now - dt.timedelta(days=settings.ROLLUP_MINUTE_DAYS), HOUR),
            HOUR,
        ),
        (Resolution.HOUR, floor_to(now - dt.timedelta(days=settings.ROLLUP_HOUR_DAYS), DAY), DAY),
        (Resolution.DAY, floor_to(now - dt.timedelta(days=settings.ROLLUP_DAY_DAYS), DAY), DAY),
    )
    with transaction.atomic():
        cursor = psycopg_cursor(server_side_binding=False)
        for resolution, before, coarser in kept:
            cursor.execute(
                _RETENTION, {"resolution": resolution, "before": before, "coarser": coarser}
            )
