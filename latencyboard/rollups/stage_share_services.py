"""Writes of stage shares: per-minute self time by stage, over all requests and the tail.

Unlike the rollup fold, which adds each ingest batch as it lands, shares need whole requests:
the spans of one trace arrive in several export batches, from several processes. So a minute
is computed once, ``STAGE_SHARE_GRACE_SECONDS`` after it ends, from the raw spans of every
trace whose root started in it; spans stored after that are in the rollups but not in the
shares. Each pipeline has a watermark (``StageShareWatermark``): the minute rows before it
are written, and each step replaces the rows from the watermark up to a new one and moves
it, in one transaction, so a crash never skips or doubles a minute. Moving a watermark back
by hand (within the minute retention) recomputes from there.

Hours and days are recomputed as sums of their minutes and hours in the same transaction,
root-duration bucket by bucket, so a window read from hours finds its slowest 1% as one
read from minutes does.
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
from latencyboard.live.events import STAGE_SHARES
from latencyboard.live.services import announce
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import stage_share_minutes
from latencyboard.rollups.models import Resolution, StageShareWatermark
from latencyboard.storage import stage_share_rows
from latencyboard.windows import DAY, HOUR, MINUTE, ceil_to, floor_to

logger = logging.getLogger(__name__)

TRACE_REACH: Final = dt.timedelta(hours=1)
"""How far before and after its root's minute a span of the request is looked for: an
inference request lasts far less, and the bound keeps the read to one or two partitions."""


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
    announce(STAGE_SHARES, changed)
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
        first_root = stage_share_rows.nth_root(cursor, pipeline_id, done_until, ready)
        if first_root is None:
            end, span_count, rows = ready, 0, []
        else:
            start = floor_to(first_root, MINUTE)
            end = min(start + minutes * MINUTE, ready)
            # A step's spans are in memory at once: a backlog is taken a bounded bite at a time.
            past_budget = stage_share_rows.nth_root(
                cursor, pipeline_id, done_until, ready, offset=requests
            )
            if past_budget is not None:
                end = min(end, max(floor_to(past_budget, MINUTE), start + MINUTE))
            spans = stage_share_rows.trace_spans(
                cursor, team_id, pipeline_id, start=start, end=end, reach=TRACE_REACH
            )
            # The traces may hold other roots of the pipeline, of minutes outside the step.
            rows = [
                row
                for row in stage_share_minutes.stage_minutes(spans)
                if start.timestamp() <= row.bucket < end.timestamp()
            ]
            span_count = len(spans)
        if _replace_minutes(cursor, team_id, pipeline_id, done_until, end, rows):
            for level in (_HOURS, _DAYS):
                _sum_finer(cursor, level, team_id, pipeline_id, done_until, end)
        moved = StageShareWatermark.objects.filter(
            pipeline_id=pipeline_id, done_until=done_until
        ).update(done_until=end)
        assert moved == 1, "this transaction holds the watermark row's lock"
    requests_of = {row.bucket: row.requests for row in rows}
    return _Step(len(requests_of), sum(requests_of.values()), span_count, more=end < ready)


def _replace_minutes(
    cursor: psycopg.Cursor[Any],
    team_id: int,
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
    rows: list[stage_share_minutes.StageMinute],
) -> bool:
    """Make ``rows`` the pipeline's minute rows of ``[start, end)``; whether any changed."""
    deleted = stage_share_rows.delete_range(cursor, pipeline_id, Resolution.MINUTE, start, end)
    if rows:
        # Array parameters: bound server side.
        stage_share_rows.insert_rows(
            psycopg_cursor(), team_id, pipeline_id, Resolution.MINUTE, rows
        )
    return bool(deleted or rows)


def _sum_finer(
    cursor: psycopg.Cursor[Any],
    level: _Level,
    team_id: int,
    pipeline_id: int,
    start: dt.datetime,
    end: dt.datetime,
) -> None:
    """Recompute the pipeline's ``level.coarse`` rows of the buckets overlapping
    ``[start, end)`` as sums of their finer rows."""
    stage_share_rows.sum_finer(
        cursor,
        psycopg_cursor(),
        team_id,
        pipeline_id,
        fine=level.fine,
        coarse=level.coarse,
        width=level.width,
        start=floor_to(start, level.width),
        end=ceil_to(end, level.width),
    )


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
            stage_share_rows.delete_expired(cursor, resolution, before, coarser)
