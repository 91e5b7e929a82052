"""Reads of the dashboards: the overview of a user's pipelines and the data of a pipeline page.

Functions taking a ``user`` scope to the user's teams: another team's pipeline raises
``Pipeline.DoesNotExist``, exactly as a missing one does. Functions taking a ``pipeline``
expect one fetched through :func:`pipeline_of`. Percentile series come from
``latencyboard.rollups.queries`` and SLA attainment from ``latencyboard.sla.queries``; what
is here reads rollups for many pipelines at once, stage shares over time and version
segments; ``attribute_queries`` reads raw spans by attribute.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import DateTimeField, F, Func, OuterRef, Subquery, Sum, Value

from latencyboard.dashboards import deployments, ranking
from latencyboard.dashboards.models import VersionSegment
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import windows
from latencyboard.rollups.models import Resolution, Rollup, StageShare
from latencyboard.sketch_batch import group_summaries
from latencyboard.sla import attainment as sla_maths
from latencyboard.sla.models import Objective
from latencyboard.sla.queries import objectives_of, window_budget
from latencyboard.spans.models import Span
from latencyboard.teams.models import IngestToken, Team
from latencyboard.teams.queries import teams_of

LAST_HOUR: Final = dt.timedelta(hours=1)
OVERVIEW_QUANTILES: Final = (0.5, 0.99)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def pipeline_of(user: User | AnonymousUser, pipeline_id: int) -> Pipeline:
    """The pipeline if it is one of the user's teams'; ``Pipeline.DoesNotExist`` otherwise."""
    return (
        Pipeline.objects.filter(team__in=teams_of(user)).select_related("team").get(pk=pipeline_id)
    )


# --- overview ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ObjectiveStatus:
    """An objective and its attainment over its own window (rolling 28 days or this month)."""

    objective: Objective
    window: sla_maths.Window
    summary: sla_maths.Budget


@dataclass(frozen=True, slots=True)
class LatencyBudget:
    """An end-to-end objective read as a latency budget (see :mod:`.ranking`): the latency of
    the last hour at the objective's target quantile against its threshold."""

    objective: Objective
    quantile: float
    latency_ms: float | None
    over: float | None

    @property
    def ratio(self) -> float | None:
        """Latency over threshold: 1.0 is exactly on budget."""
        return None if self.latency_ms is None else self.latency_ms / self.objective.threshold_ms


@dataclass(frozen=True, slots=True)
class PipelineStatus:
    """One overview row: the last hour's end-to-end figures, the SLAs and the impact.

    ``budget`` is the end-to-end objective most over its threshold (None without one);
    ``impact`` is ``ranking.impact`` of it.
    """

    pipeline: Pipeline
    requests: int
    requests_per_minute: float
    error_rate: float | None
    p50_ms: float | None
    p99_ms: float | None
    objectives: tuple[ObjectiveStatus, ...]
    budget: LatencyBudget | None
    impact: float | None


@dataclass(frozen=True, slots=True)
class Overview:
    """The user's teams and pipelines, most impacted first; figures are over
    ``[start, end)``. Without pipelines, ``tokens`` are the teams' active ingest tokens (to
    tell them apart: only their prefixes are stored)."""

    start: dt.datetime
    end: dt.datetime
    teams: tuple[Team, ...]
    pipelines: tuple[PipelineStatus, ...]
    tokens: tuple[IngestToken, ...]


def overview(user: User | AnonymousUser, now: dt.datetime) -> Overview:
    """Every pipeline of the user's teams with its end-to-end latency and traffic over the
    last 60 whole minutes and its objectives' attainment, sorted by :func:`ranking.sort_key`.

    One read of the minute rollups for all pipelines, merged per pipeline in one pass, plus
    the SLA window sums of each objective.
    """
    end = sla_maths.floor_minute(now)
    start = end - LAST_HOUR
    teams = tuple(teams_of(user))
    pipelines = list(Pipeline.objects.filter(team__in=teams).select_related("team"))
    if not pipelines:
        tokens = IngestToken.objects.filter(team__in=teams, revoked_at__isnull=True)
        return Overview(start, end, teams, (), tuple(tokens.select_related("team")))
    position = {pipeline.pk: index for index, pipeline in enumerate(pipelines)}
    objectives = list(objectives_of(user).filter(pipeline__in=pipelines))
    levels = sorted(
        {*OVERVIEW_QUANTILES}
        | {ranking.target_quantile(o.target_percent) for o in objectives if o.stage_id is None}
    )
    rows = list(
        Rollup.objects.filter(
            pipeline__in=pipelines,
            stage__isnull=True,
            resolution=Resolution.MINUTE,
            bucket_start__gte=start,
            bucket_start__lt=end,
        ).values_list("pipeline_id", "error_count", "sketch")
    )
    groups = np.fromiter((position[row[0]] for row in rows), np.int64, len(rows))
    summaries = group_summaries([row[2] for row in rows], groups, len(pipelines), levels)
    errors = np.zeros(len(pipelines), dtype=np.int64)
    np.add.at(errors, groups, np.fromiter((row[1] for row in rows), np.int64, len(rows)))

    statuses = []
    minutes = LAST_HOUR / dt.timedelta(minutes=1)
    for index, pipeline in enumerate(pipelines):
        requests = int(summaries.count[index])
        per_minute = requests / minutes
        quantile = dict(zip(levels, _present(summaries.quantiles[index]), strict=True))
        own = [o for o in objectives if o.pipeline_id == pipeline.pk]
        budgets = [_budget(objective, quantile) for objective in own if objective.stage_id is None]
        budget = max(budgets, key=lambda b: (b.over or 0.0, b.ratio or 0.0), default=None)
        statuses.append(
            PipelineStatus(
                pipeline=pipeline,
                requests=requests,
                requests_per_minute=per_minute,
                error_rate=int(errors[index]) / requests if requests else None,
                p50_ms=quantile[0.5],
                p99_ms=quantile[0.99],
                objectives=tuple(_status(objective, now) for objective in own),
                budget=budget,
                impact=None if budget is None else ranking.impact(per_minute, budget.over),
            )
        )
    statuses.sort(
        key=lambda s: ranking.sort_key(
            s.impact,
            None if s.budget is None else s.budget.ratio,
            s.requests_per_minute,
            str(s.pipeline),
        )
    )
    return Overview(start, end, teams, tuple(statuses), ())


def _budget(objective: Objective, quantile: dict[float, float | None]) -> LatencyBudget:
    level = ranking.target_quantile(objective.target_percent)
    latency = quantile[level]
    return LatencyBudget(
        objective, level, latency, ranking.over_budget(latency, objective.threshold_ms)
    )


def _status(objective: Objective, now: dt.datetime) -> ObjectiveStatus:
    budget = window_budget(objective, now)
    return ObjectiveStatus(objective, budget.window, budget.summary)


def _present(values: np.ndarray) -> list[float | None]:
    """Floats with None for NaN (a quantile of no requests)."""
    return [None if np.isnan(value) else float(value) for value in values]


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


def pipeline_page(user: User | AnonymousUser, pipeline_id: int) -> PipelinePage:
    """The pipeline (scoped as :func:`pipeline_of`), its stages and objectives."""
    pipeline = pipeline_of(user, pipeline_id)
    newest_root = (
        Span.objects.filter(pipeline=pipeline, is_root=True)
        .order_by("-start_time")
        .values_list("stage_id", flat=True)[:1]
    )
    return PipelinePage(
        pipeline=pipeline,
        stages=tuple(pipeline.stages.order_by("pk")),
        root_stage_ids=tuple(newest_root),
        objectives=tuple(
            Objective.objects.filter(pipeline=pipeline).select_related("stage").order_by("pk")
        ),
    )


@dataclass(frozen=True, slots=True)
class StageShareSeries:
    """One stage's share of the requests' self time in each bucket (None: no requests)."""

    stage_id: int
    stage: str
    share_all: tuple[float | None, ...]
    share_tail: tuple[float | None, ...]


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
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime, step: dt.timedelta
) -> ShareSeries:
    """Each stage's share of self time per step bucket, over all requests and over the tail,
    with the definitions of ``rollups.share_queries.stage_breakdown`` applied bucket by bucket.

    Stage-share rows are summed per bucket in the database (one statement, one index range
    per resolution segment of :func:`windows.plan_window`). Raises ValueError for a step or
    window that ``windows`` rejects.
    """
    plan = windows.plan_window(start, end, int(step.total_seconds()), _stored_share_rows(pipeline))
    bucket_step = dt.timedelta(seconds=plan.step_seconds)
    first, *others = (
        StageShare.objects.filter(
            pipeline=pipeline,
            resolution=segment.resolution,
            bucket_start__gte=segment.start,
            bucket_start__lt=segment.end,
        )
        .annotate(
            bucket=Func(
                Value(bucket_step),
                F("bucket_start"),
                Value(_EPOCH),
                function="date_bin",
                output_field=DateTimeField(),
            )
        )
        .values("bucket", "stage_id")
        .annotate(self_all=Sum("self_ms_sum"), self_tail=Sum("tail_self_ms_sum"))
        .values_list("bucket", "stage_id", "self_all", "self_tail")
        for segment in plan.segments
    )
    rows = list(first.union(*others, all=True))
    names = dict(pipeline.stages.values_list("pk", "name"))
    stage_ids = sorted({row[1] for row in rows})
    column = {stage_id: index for index, stage_id in enumerate(stage_ids)}
    sums = np.zeros((2, len(stage_ids), plan.bucket_count))
    for bucket, stage_id, self_all, self_tail in rows:
        index = (bucket - plan.start) // bucket_step
        sums[0, column[stage_id], index] += self_all
        sums[1, column[stage_id], index] += self_tail
    totals = sums.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        shares = np.where(totals > 0, sums / totals, np.nan)
    return ShareSeries(
        start=plan.start,
        end=plan.end,
        step_seconds=plan.step_seconds,
        bucket_starts=tuple(plan.start + i * bucket_step for i in range(plan.bucket_count)),
        stages=tuple(
            StageShareSeries(
                stage_id,
                names[stage_id],
                tuple(_present(shares[0, index])),
                tuple(_present(shares[1, index])),
            )
            for index, stage_id in enumerate(stage_ids)
        ),
    )


def _stored_share_rows(pipeline: Pipeline) -> dict[windows.Resolution, windows.StoredRows | None]:
    """Oldest and newest stage-share row of each resolution: six index probes in one query."""
    probes = {}
    for resolution in windows.RESOLUTIONS:
        rows = StageShare.objects.filter(pipeline=OuterRef("pk"), resolution=resolution)
        for name, order in (("first", "bucket_start"), ("last", "-bucket_start")):
            probes[f"{resolution}_{name}"] = Subquery(
                rows.order_by(order).values("bucket_start")[:1]
            )
    found = Pipeline.objects.filter(pk=pipeline.pk).annotate(**probes).values_list(*probes).get()
    bounds = dict(zip(probes, found, strict=True))
    return {
        resolution: None
        if bounds[f"{resolution}_first"] is None
        else windows.StoredRows(bounds[f"{resolution}_first"], bounds[f"{resolution}_last"])
        for resolution in windows.RESOLUTIONS
    }


def deployment_markers(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime
) -> tuple[deployments.Marker, ...]:
    """The deployments of ``pipeline`` within ``[start, end)``, from its version segments
    (a few per deployment, so all of them are read)."""
    segments = [
        deployments.Segment(*row)
        for row in VersionSegment.objects.filter(pipeline=pipeline).values_list(
            "pk", "attribute", "value", "first_seen", "last_seen", "spans"
        )
    ]
    return tuple(deployments.markers(segments, start, end))
