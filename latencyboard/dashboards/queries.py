"""Reads of the dashboards: the data of a pipeline page (the overview is ``overview_queries``).

Functions taking a ``user`` scope to the user's teams: another team's pipeline raises
``Pipeline.DoesNotExist``, exactly as a missing one does. Functions taking a ``pipeline``
expect one fetched through :func:`pipeline_of`. Percentile series come from
``latencyboard.rollups.queries`` and SLA attainment from ``latencyboard.sla.queries``; what
is here reads stage shares over time and deployment markers (from the cohort rollups);
``attribute_queries`` reads latency by attribute value.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q

from latencyboard import windows
from latencyboard.alerts.models import Incident
from latencyboard.dashboards import deployments
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import cohort_sightings, stage_share_queries
from latencyboard.rollups.queries import present
from latencyboard.sla.models import Objective
from latencyboard.spans.queries import root_stages
from latencyboard.windows import floor_minute


def pipeline_of(user: User | AnonymousUser, pipeline_id: int) -> Pipeline:
    """The pipeline if it is one of the user's teams'; ``Pipeline.DoesNotExist`` otherwise."""
    return Pipeline.objects.visible_to(user).select_related("team").get(pk=pipeline_id)


# --- pipeline page -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PipelinePage:
    """What the pipeline page is built around; its charts fetch their data separately.

    ``root_stage_ids`` are the stages the pipeline's root spans map to: their latency is the
    end-to-end latency, and their self time in a breakdown is the request's own time outside
    every other stage.
    """

    pipeline: Pipeline
    stages: tuple[Stage, ...]
    root_stage_ids: tuple[int, ...]
    objectives: tuple[Objective, ...]
    incidents: tuple[Incident, ...]  # newest first, open or resolved since INCIDENT_LOOKBACK


INCIDENT_LOOKBACK: Final = dt.timedelta(days=90)
"""The page's longest window: its incidents are marked on the time charts of any window."""
MAX_INCIDENTS: Final = 200


def pipeline_page(user: User | AnonymousUser, pipeline_id: int, now: dt.datetime) -> PipelinePage:
    """The pipeline (scoped as :func:`pipeline_of`), its stages, objectives and incidents
    (the newest :data:`MAX_INCIDENTS` of the last :data:`INCIDENT_LOOKBACK`)."""
    pipeline = pipeline_of(user, pipeline_id)
    since = now - INCIDENT_LOOKBACK
    return PipelinePage(
        pipeline=pipeline,
        stages=tuple(pipeline.stages.order_by("pk")),
        root_stage_ids=root_stages(pipeline.pk),
        objectives=tuple(
            Objective.objects.filter(pipeline=pipeline).select_related("stage").order_by("pk")
        ),
        incidents=tuple(
            Incident.objects.filter(pipeline=pipeline)
            .filter(Q(resolved_at__isnull=True) | Q(resolved_at__gte=since))
            .order_by("-opened_at")[:MAX_INCIDENTS]
        ),
    )


@dataclass(frozen=True, slots=True)
class StageShareSeries:
    """One stage's share of the requests' self time in each bucket (None: no requests), and
    of their critical paths' time (None also where a row has no critical-path sums)."""

    stage_id: int
    stage: str
    share_all: tuple[float | None, ...]
    share_tail: tuple[float | None, ...]
    share_critical_all: tuple[float | None, ...]
    share_critical_tail: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class ShareSeries:
    """How the stage breakdown moved: shares per step bucket of ``[start, end)`` (the window
    widened to whole steps, the step widened to the rows read, as for percentiles)."""

    start: dt.datetime
    end: dt.datetime
    step_seconds: int
    bucket_starts: tuple[dt.datetime, ...]
    stages: tuple[StageShareSeries, ...]


def share_series(
    pipeline: Pipeline,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    stored: stage_share_queries.StoredRows | None = None,
) -> ShareSeries:
    """Each stage's share of self time per step bucket, over all requests and over the tail,
    with the definitions of ``rollups.stage_share_queries.stage_breakdown`` applied bucket
    by bucket: a bucket's tail is its requests above its own p99, and a bucket whose tail is
    too small to be shown has no tail shares (None).

    Stage-share rows are summed per bucket in the database
    (``stage_share_queries.bucket_shares``); ``stored`` is
    :func:`stage_share_queries.stored_share_rows` when the caller read it already. Raises ValueError
    for a step or window that ``windows`` rejects.
    """
    if stored is None:
        stored = stage_share_queries.stored_share_rows(pipeline)
    plan = windows.plan_window(start, end, int(step.total_seconds()), stored)
    bucket_step = dt.timedelta(seconds=plan.step_seconds)
    found = stage_share_queries.bucket_shares(
        stage_share_queries.segments_of(pipeline, plan), bucket_step, windows.EPOCH
    )
    names = dict(pipeline.stages.values_list("pk", "name"))
    stage_ids = sorted({stage_id for shares in found.values() for stage_id in shares.self_ms})
    column = {stage_id: index for index, stage_id in enumerate(stage_ids)}
    sums = np.full((4, len(stage_ids), plan.bucket_count), np.nan)
    for (_, bucket), shares in found.items():
        index = (bucket - plan.start) // bucket_step
        critical = shares.critical_complete
        cohorts: tuple[Mapping[int, float | None], ...] = (
            shares.self_ms,
            shares.tail_self_ms,
            shares.critical_ms if critical else {},
            shares.tail_critical_ms if critical else {},
        )
        for cohort, sums_of in enumerate(cohorts):
            if not sums_of:
                continue  # a tail too small to be shown, or rows without critical paths: a gap
            sums[cohort, :, index] = 0.0
            for stage_id, own in sums_of.items():
                sums[cohort, column[stage_id], index] = own
    totals = sums.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares_of = np.where(totals > 0, sums / totals, np.nan)
    return ShareSeries(
        start=plan.start,
        end=plan.end,
        step_seconds=plan.step_seconds,
        bucket_starts=tuple(plan.start + i * bucket_step for i in range(plan.bucket_count)),
        stages=tuple(
            StageShareSeries(
                stage_id,
                names[stage_id],
                tuple(present(shares_of[0, index])),
                tuple(present(shares_of[1, index])),
                tuple(present(shares_of[2, index])),
                tuple(present(shares_of[3, index])),
            )
            for index, stage_id in enumerate(stage_ids)
        ),
    )


@dataclass(frozen=True, slots=True)
class Breakdown:
    """The stage breakdown of a window and how it moved over it, planned on the same rows."""

    summary: stage_share_queries.StageBreakdown
    series: ShareSeries


def breakdown(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime, step: dt.timedelta
) -> Breakdown:
    """:func:`stage_share_queries.stage_breakdown` and :func:`share_series` of one window, which
    read which stage-share rows the pipeline keeps once for both."""
    stored = stage_share_queries.stored_share_rows(pipeline)
    return Breakdown(
        stage_share_queries.stage_breakdown(pipeline, start, end, stored),
        share_series(pipeline, start, end, step, stored),
    )


def deployment_markers(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime
) -> tuple[deployments.Marker, ...]:
    """The deployments of ``pipeline`` within ``[start, end)``, from the buckets of its
    cohort rollups in which each version was seen (from :data:`MARKER_LOOKBACK` before
    ``start``, to know the version each one replaced)."""
    rows = cohort_sightings.version_buckets(
        pipeline, deployments.VERSION_ATTRIBUTES, floor_minute(start - MARKER_LOOKBACK), end
    )
    sightings = deployments.sightings_of_buckets(rows)
    segments = deployments.extend_segments({}, sightings)
    return tuple(deployments.markers(segments, start, end))


MARKER_LOOKBACK: Final = dt.timedelta(days=1)
"""How far before a window versions are read, to tell a new version from one seen before."""
