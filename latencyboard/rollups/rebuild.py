"""Writes of rollups: rebuilding a team's rollups and SLA counters over a range from raw spans.

A rebuild takes the fold lock exclusively, so it sees no fold half done
(see :mod:`latencyboard.rollups.services`).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.rollups import cohort_services, folding
from latencyboard.rollups.compaction import (
    DAY,
    DAYS,
    GRACE,
    HOUR,
    HOURS,
    compact_level,
)
from latencyboard.rollups.services import of_existing_stages
from latencyboard.sla import counters
from latencyboard.storage import fold_lock, fold_spans, rollup_rows, thinning
from latencyboard.storage import sla_minutes as storage_sla_minutes
from latencyboard.teams.models import Team
from latencyboard.windows import SECOND, ceil_to, floor_to, steps

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RebuildResult:
    """What a rebuild recomputed: spans read, rows written per resolution."""

    start: dt.datetime  # the range, widened to whole hours
    end: dt.datetime
    spans: int
    minutes: int
    hours: int
    days: int
    sla_minutes: int


def rebuild_rollups(
    team: Team, start: dt.datetime, end: dt.datetime, *, now: dt.datetime
) -> RebuildResult:
    """Recompute ``team``'s rollups and SLA counters over ``[start, end)`` from raw spans.

    The range is widened to whole hours. Minute rows and SLA minutes of the range are
    replaced, then the range's complete hours and days are recomputed from them. Spans of
    batches not rolled up yet are left to the folds that will claim them. Runs in one
    transaction that folds wait for. Raises ValueError for an empty range, one reaching
    back past ``RETENTION_DAYS``, whose raw spans are gone, or one touching a thinned day.
    """
    start, end = floor_to(start, HOUR), ceil_to(end, HOUR)
    kept_from = now - dt.timedelta(days=settings.RETENTION_DAYS)
    if start >= end:
        raise ValueError("The range must end after it starts.")
    if start < kept_from:
        raise ValueError(
            f"Raw spans before {kept_from.isoformat()} are gone (RETENTION_DAYS): "
            f"cannot rebuild from {start.isoformat()}."
        )
    complete = floor_to(now - GRACE, HOUR)
    days_start, days_end = floor_to(start, DAY), min(ceil_to(end, DAY), floor_to(complete, DAY))
    pipelines = list(team.pipelines.values_list("pk", flat=True))
    with transaction.atomic():
        cursor = psycopg_cursor()
        fold_lock.take_exclusive(cursor)
        thinned = thinning.thinned_days(cursor, start.date(), (end - SECOND).date() + DAY)
        if thinned:
            raise ValueError(
                f"Raw spans of {', '.join(map(str, thinned))} are thinned: their rollups and "
                "SLA counters were folded from every span and cannot be rebuilt."
            )
        teams = {pipeline_id: team.pk for pipeline_id in pipelines}
        cohort_services.materialize(cursor, pipelines, start, end)
        rollup_rows.delete_range(
            cursor, pipelines, start=start, end=end, days_start=days_start, days_end=days_end
        )
        storage_sla_minutes.delete_range(cursor, pipelines, start, end)
        spans = minutes = sla_minutes = 0
        for hour in steps(start, end, HOUR):
            columns, _, _ = of_existing_stages(
                cursor, fold_spans.folded_spans(cursor, pipelines, hour, hour + HOUR)
            )
            folds = folding.fold_minutes(columns)
            rollup_rows.replace(cursor, "minute", folds, teams)
            sla_minutes += counters.add_spans(cursor, columns)
            spans, minutes = spans + len(columns), minutes + len(folds)
        hours = compact_level(
            cursor, HOURS, start=start, end=min(end, complete), kept_from=start, scope=pipelines
        )
        days = compact_level(
            cursor, DAYS, start=days_start, end=days_end, kept_from=days_start, scope=pipelines
        )
        # Cohort hours and days may be as stale as the rollup rows this rebuilt.
        cohort_services.compact_cohorts(cursor, hours=hours.buckets, days=days.buckets)
    result = RebuildResult(start, end, spans, minutes, hours.written, days.written, sla_minutes)
    logger.info(
        "rollup.rebuilt",
        extra={
            "team": team.pk,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "spans": spans,
            "minutes": minutes,
            "hours": hours,
            "days": days,
            "sla_minutes": sla_minutes,
        },
    )
    return result
