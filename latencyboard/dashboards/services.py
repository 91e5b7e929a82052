"""Writes of the dashboards: version segments, scanned from new spans past a watermark.

Each pipeline has a :class:`VersionWatermark`: the spans starting before it are in its
segments. A step reads the spans of at most :data:`STEP` past it (one range of the
``(pipeline_id, start_time)`` index, grouped per minute in the database), extends or starts
segments and moves the watermark, in one transaction; a worker stepping a pipeline holds its
watermark row, so two workers never scan the same spans. Spans are read only once they are
:data:`GRACE` old, so that most late exports are in; a span stored later than that is missed,
which moves a segment's edge by a few seconds at most, since versions are seen continuously.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Final

from django.conf import settings
from django.db import transaction

from latencyboard.dashboards import deployments
from latencyboard.dashboards.models import VersionSegment, VersionWatermark
from latencyboard.db import psycopg_cursor
from latencyboard.live.services import announce
from latencyboard.pipelines.models import Pipeline

logger = logging.getLogger(__name__)

GRACE: Final = dt.timedelta(minutes=2)
STEP: Final = dt.timedelta(hours=1)
"""Most span time one transaction reads: about 400 k spans for a pipeline at 15 requests/s."""

_MINUTE: Final = dt.timedelta(minutes=1)
_MAX_VALUE: Final = VersionSegment._meta.get_field("value").max_length

_FIRST_SPAN = """
SELECT start_time FROM spans_span
WHERE pipeline_id = %(pipeline)s AND start_time >= %(start)s AND start_time < %(end)s
ORDER BY start_time
LIMIT 1
"""
_SIGHTINGS = """
SELECT a.attribute, s.attributes ->> a.attribute AS value,
       min(s.start_time), max(s.start_time), count(*)
FROM spans_span s CROSS JOIN unnest(%(attributes)s::text[]) AS a(attribute)
WHERE s.pipeline_id = %(pipeline)s AND s.start_time >= %(start)s AND s.start_time < %(end)s
  AND s.attributes ? a.attribute
GROUP BY 1, 2, date_bin('1 minute', s.start_time, 'epoch')
"""


@dataclass(frozen=True, slots=True)
class ScanResult:
    spans: int  # spans counted into segments, once per version attribute they carry
    segments: int  # segments started or extended
    behind: int  # pipelines with spans ready but not reached in the time given


@dataclass(frozen=True, slots=True)
class _Step:
    spans: int
    segments: int
    more: bool
    started: int = 0  # segments of a version not seen before: new deployment markers


_IDLE: Final = _Step(0, 0, more=False)


def scan_versions(now: dt.datetime, *, seconds: float) -> ScanResult:
    """Extend every pipeline's version segments with the spans that started up to
    :data:`GRACE` before ``now`` and are not scanned yet, then delete segments older than
    the rollups' ``ROLLUP_DAY_DAYS`` (the oldest a chart can show).

    Pipelines take turns, one step each, until all are caught up or ``seconds`` have passed;
    a pipeline another worker is stepping is skipped. A new pipeline starts from the oldest
    raw spans kept (``RETENTION_DAYS``). The live pages of each pipeline with a new version
    then hear a ``deployments`` event.
    """
    started = time.monotonic()
    ready = _floor_minute(now - GRACE)
    oldest = _floor_minute(now - dt.timedelta(days=settings.RETENTION_DAYS))
    pending = deque(Pipeline.objects.order_by("pk").values_list("pk", "team_id"))
    spans = segments = 0
    deployed: set[int] = set()
    while pending and time.monotonic() - started < seconds:
        pipeline_id, team_id = pending.popleft()
        step = _step(pipeline_id, team_id, ready=ready, oldest=oldest)
        spans += step.spans
        segments += step.segments
        if step.started:
            deployed.add(pipeline_id)
        if step.more:
            pending.append((pipeline_id, team_id))
    announce("deployments", deployed)
    VersionSegment.objects.filter(
        last_seen__lt=now - dt.timedelta(days=settings.ROLLUP_DAY_DAYS)
    ).delete()
    result = ScanResult(spans, segments, behind=len(pending))
    logger.info(
        "versions.scanned",
        extra={
            "spans": result.spans,
            "segments": result.segments,
            "behind": result.behind,
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return result


def _step(pipeline_id: int, team_id: int, *, ready: dt.datetime, oldest: dt.datetime) -> _Step:
    """Scan one pipeline's spans from its watermark for at most :data:`STEP` (starting at
    its first span past the watermark), and move the watermark there."""
    with transaction.atomic():
        VersionWatermark.objects.bulk_create(
            [VersionWatermark(pipeline_id=pipeline_id, scanned_until=oldest)],
            ignore_conflicts=True,
        )
        scanned_until = (
            VersionWatermark.objects.select_for_update(skip_locked=True)
            .filter(pipeline_id=pipeline_id)
            .values_list("scanned_until", flat=True)
            .first()
        )
        if scanned_until is None or scanned_until >= ready:
            return _IDLE
        cursor = psycopg_cursor(server_side_binding=False)
        window = {"pipeline": pipeline_id, "start": scanned_until, "end": ready}
        first = cursor.execute(_FIRST_SPAN, window).fetchone()
        end = ready if first is None else min(_floor_minute(first[0]) + STEP, ready)
        sightings = [
            deployments.Sighting(attribute, value[:_MAX_VALUE], first_at, last_at, count)
            for attribute, value, first_at, last_at, count in cursor.execute(
                _SIGHTINGS,
                {**window, "end": end, "attributes": list(deployments.VERSION_ATTRIBUTES)},
            )
        ]
        changed = deployments.extend_segments(_latest_segments(pipeline_id), sightings)
        _save(pipeline_id, team_id, changed)
        moved = VersionWatermark.objects.filter(
            pipeline_id=pipeline_id, scanned_until=scanned_until
        ).update(scanned_until=end)
        assert moved == 1, "this transaction holds the watermark row's lock"
    started = sum(1 for segment in changed if segment.id is None)
    return _Step(sum(s.spans for s in sightings), len(changed), end < ready, started)


def _latest_segments(pipeline_id: int) -> dict[tuple[str, str], deployments.Segment]:
    """The most recent segment of each (attribute, value) of the pipeline."""
    rows = (
        VersionSegment.objects.filter(pipeline_id=pipeline_id)
        .order_by("attribute", "value", "-last_seen")
        .distinct("attribute", "value")
    )
    return {
        (row.attribute, row.value): deployments.Segment(
            row.pk, row.attribute, row.value, row.first_seen, row.last_seen, row.spans
        )
        for row in rows
    }


def _save(pipeline_id: int, team_id: int, segments: list[deployments.Segment]) -> None:
    rows = [
        VersionSegment(
            pk=segment.id,
            team_id=team_id,
            pipeline_id=pipeline_id,
            attribute=segment.attribute,
            value=segment.value,
            first_seen=segment.first_seen,
            last_seen=segment.last_seen,
            spans=segment.spans,
        )
        for segment in segments
    ]
    VersionSegment.objects.bulk_create([row for row in rows if row.pk is None])
    VersionSegment.objects.bulk_update(
        [row for row in rows if row.pk is not None], ["first_seen", "last_seen", "spans"]
    )


def _floor_minute(moment: dt.datetime) -> dt.datetime:
    return moment.astimezone(dt.UTC).replace(second=0, microsecond=0)
