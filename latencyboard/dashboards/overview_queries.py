"""Reads of the overview: every pipeline of a user's teams at a glance, over a chosen window.

Each concept is read once for all pipelines, never once per pipeline: the end-to-end rollups
(window figures and the 24-hour p99 sparkline from the same rows), the SLA counters (one sum
for the window, one for each objective's own period), and the stage shares (bottleneck class).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import DateTimeField, Exists, Func, OuterRef, Q, Value

from latencyboard.dashboards import ranking
from latencyboard.dashboards.bottleneck_queries import PipelineBottleneck, bottlenecks
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.models import Resolution, Rollup
from latencyboard.rollups.queries import present
from latencyboard.sketches.batch import SketchBatch
from latencyboard.sla import attainment as sla_maths
from latencyboard.sla.models import Objective
from latencyboard.sla.queries import budgets, objectives_of
from latencyboard.teams.models import IngestToken, Team
from latencyboard.teams.queries import ingest_tokens_of, teams_of
from latencyboard.windows import EPOCH, HOUR, MINUTE, floor_minute, floor_to

OVERVIEW_QUANTILES: Final = (0.5, 0.99)
SPARKLINE_HOURS: Final = 24


@dataclass(frozen=True, slots=True)
class Window:
    """A window choice of the overview: its figures cover the last ``length`` (in whole
    minutes, or from the start of the hour ``length`` ago when ``length`` is hours or more);
    the bottleneck class's history has buckets of ``history_step``."""

    key: str
    label: str
    length: dt.timedelta
    history_step: dt.timedelta

    def bounds(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime]:
        end = floor_minute(now)
        if self.length < HOUR * 2:
            return end - self.length, end
        return floor_to(end - self.length, HOUR), end


WINDOWS: Final[Mapping[str, Window]] = {
    window.key: window
    for window in (
        Window("1h", "last hour", HOUR, dt.timedelta(minutes=5)),
        Window("24h", "last 24 hours", dt.timedelta(hours=24), HOUR),
        Window("7d", "last 7 days", dt.timedelta(days=7), dt.timedelta(hours=6)),
    )
}
DEFAULT_WINDOW: Final = "1h"


@dataclass(frozen=True, slots=True)
class ObjectiveStatus:
    """An objective's attainment over the overview's window, and over its own period (rolling
    28 days or this month) with the error budget left."""

    objective: Objective
    in_window: sla_maths.Budget
    period: sla_maths.Window
    summary: sla_maths.Budget


@dataclass(frozen=True, slots=True)
class LatencyBudget:
    """An end-to-end objective read as a latency budget (see :mod:`.ranking`): the latency of
    the window at the objective's target quantile against its threshold."""

    objective: Objective
    quantile: float
    latency_ms: float | None
    over: float | None

    @property
    def ratio(self) -> float | None:
        """Latency over threshold: 1.0 is exactly on budget."""
        return None if self.latency_ms is None else self.latency_ms / self.objective.threshold_ms


@dataclass(frozen=True, slots=True)
class Sparkline:
    """End-to-end p99 of each hour from ``start`` (None: no requests); the last hour is the
    one in progress."""

    start: dt.datetime
    p99_ms: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class PipelineStatus:
    """One overview row: the window's end-to-end figures, the SLAs, the impact, the p99 of
    the last 24 hours and the bottleneck class.

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
    sparkline: Sparkline
    bottleneck: PipelineBottleneck


@dataclass(frozen=True, slots=True)
class Overview:
    """The user's teams and pipelines, most impacted first; figures are over
    ``[start, end)`` of ``window``. Without pipelines, ``tokens`` are the teams' active ingest
    tokens (to tell them apart: only their prefixes are stored)."""

    window: Window
    start: dt.datetime
    end: dt.datetime
    teams: tuple[Team, ...]
    pipelines: tuple[PipelineStatus, ...]
    tokens: tuple[IngestToken, ...]


def overview(user: User | AnonymousUser, now: dt.datetime, window: Window) -> Overview:
    """Every pipeline of the user's teams with its end-to-end latency and traffic over
    ``window`` (as of ``now``), its objectives' attainment, its p99 hour by hour over the last
    24 hours and its bottleneck class, sorted by :func:`ranking.sort_key`."""
    start, end = window.bounds(now)
    teams = tuple(teams_of(user))
    pipelines = list(Pipeline.objects.visible_to(user).select_related("team"))
    if not pipelines:
        tokens = ingest_tokens_of(user).filter(revoked_at__isnull=True)
        return Overview(window, start, end, teams, (), tuple(tokens.select_related("team")))
    objectives = list(objectives_of(user).filter(pipeline__in=pipelines))
    levels = sorted(
        {*OVERVIEW_QUANTILES}
        | {ranking.target_quantile(o.target_percent) for o in objectives if o.stage_id is None}
    )
    figures = _Figures.read(pipelines, start, end, levels)
    in_window = budgets(objectives, {o.pk: (start, end) for o in objectives})
    periods = {o.pk: sla_maths.objective_window(o.window, now) for o in objectives}
    in_period = budgets(objectives, {pk: (w.start, w.end) for pk, w in periods.items()})
    classes = bottlenecks(pipelines, start, end, window.history_step)

    statuses = []
    minutes = (end - start) / MINUTE
    for index, pipeline in enumerate(pipelines):
        requests = int(figures.count[index])
        per_minute = requests / minutes
        quantile = dict(zip(levels, present(figures.quantiles[index]), strict=True))
        own = [o for o in objectives if o.pipeline_id == pipeline.pk]
        budget = max(
            (_budget(objective, quantile) for objective in own if objective.stage_id is None),
            key=lambda b: (b.over or 0.0, b.ratio or 0.0),
            default=None,
        )
        statuses.append(
            PipelineStatus(
                pipeline=pipeline,
                requests=requests,
                requests_per_minute=per_minute,
                error_rate=int(figures.errors[index]) / requests if requests else None,
                p50_ms=quantile[0.5],
                p99_ms=quantile[0.99],
                objectives=tuple(
                    ObjectiveStatus(o, in_window[o.pk], periods[o.pk], in_period[o.pk]) for o in own
                ),
                budget=budget,
                impact=None if budget is None else ranking.impact(per_minute, budget.over),
                sparkline=Sparkline(figures.sparkline_start, tuple(figures.sparklines[index])),
                bottleneck=classes[pipeline.pk],
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
    return Overview(window, start, end, teams, tuple(statuses), ())


@dataclass(frozen=True, slots=True)
class _Figures:
    """Per pipeline (in the order given): requests, errors and quantiles of the window, and
    the p99 of each of the last :data:`SPARKLINE_HOURS` hours."""

    count: np.ndarray
    errors: np.ndarray
    quantiles: np.ndarray
    sparkline_start: dt.datetime
    sparklines: list[list[float | None]]

    @classmethod
    def read(
        cls, pipelines: list[Pipeline], start: dt.datetime, end: dt.datetime, levels: list[float]
    ) -> _Figures:
        """One read of the end-to-end rollups for every pipeline: hour rows, and minute rows
        of the hours not compacted into an hour row yet and of the window when it is not
        whole hours. Each hour is counted once, from its hour row when there is one."""
        spark_start = floor_to(end, HOUR) - (SPARKLINE_HOURS - 1) * HOUR
        first = min(start, spark_start)
        hour_row = Rollup.objects.filter(
            pipeline=OuterRef("pipeline"),
            stage__isnull=True,
            resolution=Resolution.HOUR,
            bucket_start=Func(
                Value(HOUR),
                OuterRef("bucket_start"),
                Value(EPOCH),
                function="date_bin",
                output_field=DateTimeField(),
            ),
        )
        whole_hours = start == floor_to(start, HOUR)
        minutes = Q(resolution=Resolution.MINUTE) & (
            ~Exists(hour_row) if whole_hours else ~Exists(hour_row) | Q(bucket_start__gte=start)
        )
        rows = list(
            Rollup.objects.filter(
                Q(resolution=Resolution.HOUR) | minutes,
                pipeline__in=pipelines,
                stage__isnull=True,
                bucket_start__gte=first,
                bucket_start__lt=end,
            ).values_list("pipeline_id", "resolution", "bucket_start", "error_count", "sketch")
        )
        position = {pipeline.pk: index for index, pipeline in enumerate(pipelines)}
        hours = {(row[0], row[2]) for row in rows if row[1] == Resolution.HOUR}
        # A minute row counts in an hour without an hour row; in a window of whole minutes
        # (not whole hours) the window's own figures take only minute rows.
        in_hour_grid = [
            row[1] == Resolution.HOUR or (row[0], floor_to(row[2], HOUR)) not in hours
            for row in rows
        ]
        in_window = [
            row[2] >= start and (grid if whole_hours else row[1] == Resolution.MINUTE)
            for row, grid in zip(rows, in_hour_grid, strict=True)
        ]
        batch = SketchBatch([row[4] for row in rows])
        discard = len(pipelines)
        window_groups = np.array(
            [
                position[row[0]] if keep else discard
                for row, keep in zip(rows, in_window, strict=True)
            ],
            dtype=np.int64,
        )
        summary = batch.group_summaries(window_groups, discard + 1, levels)
        errors = np.zeros(discard + 1, dtype=np.int64)
        np.add.at(errors, window_groups, np.array([row[3] for row in rows], dtype=np.int64))
        spark_discard = len(pipelines) * SPARKLINE_HOURS
        spark_groups = np.array(
            [
                position[row[0]] * SPARKLINE_HOURS + (floor_to(row[2], HOUR) - spark_start) // HOUR
                if grid and row[2] >= spark_start
                else spark_discard
                for row, grid in zip(rows, in_hour_grid, strict=True)
            ],
            dtype=np.int64,
        )
        spark = batch.group_summaries(spark_groups, spark_discard + 1, [0.99])
        p99 = present(spark.quantiles[:spark_discard, 0])
        return cls(
            count=summary.count[:discard],
            errors=errors[:discard],
            quantiles=summary.quantiles[:discard],
            sparkline_start=spark_start,
            sparklines=[
                p99[index * SPARKLINE_HOURS : (index + 1) * SPARKLINE_HOURS]
                for index in range(len(pipelines))
            ],
        )


def _budget(objective: Objective, quantile: dict[float, float | None]) -> LatencyBudget:
    level = ranking.target_quantile(objective.target_percent)
    latency = quantile[level]
    return LatencyBudget(
        objective, level, latency, ranking.over_budget(latency, objective.threshold_ms)
    )
