"""Reads of rollups: per-stage latency percentiles of a pipeline, scoped to the user's teams."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import BigIntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Cast, Extract

from latencyboard import sketch
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import windows
from latencyboard.rollups.models import Rollup, StageShare
from latencyboard.teams.queries import teams_of

DEFAULT_QUANTILES: Final = (0.5, 0.9, 0.95, 0.99, 0.999)
END_TO_END: Final = "end-to-end"
"""Name of the series of a pipeline's root spans (``stage`` is None)."""


class InvalidPercentileQuery(ValueError):
    """The pipeline cannot answer the query as asked; ``field`` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class SeriesStage:
    """The stage a series describes; ``id`` None is the pipeline's end-to-end latency."""

    id: int | None
    name: str


@dataclass(frozen=True)
class LatencyFigures:
    """Latency of one stage over one step bucket, or over the whole window.

    ``n``, ``error_rate`` and ``mean_ms`` are exact (from the rollups' counters);
    ``quantiles_ms`` are sketch estimates, one per ``PercentileSeries.quantiles``. Everything
    but ``n`` is None when ``n`` is 0: no spans is not a latency of zero.
    """

    n: int
    error_rate: float | None
    mean_ms: float | None
    quantiles_ms: tuple[float | None, ...]


@dataclass(frozen=True)
class PercentilePoint:
    """The figures of the step bucket starting at ``start``."""

    start: dt.datetime
    figures: LatencyFigures


@dataclass(frozen=True)
class StageSeries:
    """One stage's points, one per step bucket of the window, and its whole-window summary."""

    stage: SeriesStage
    points: tuple[PercentilePoint, ...]
    summary: LatencyFigures


@dataclass(frozen=True)
class PercentileSeries:
    """Answer to :func:`percentile_series`.

    ``start``/``end`` are the window widened to whole steps and ``step_seconds`` the step
    actually used (wider than asked when only coarser rows cover the window). ``segments``
    say which rollup rows were merged for which part of the window, ``resolution`` is the
    first (coarsest) of them. Every quantile is estimated by ``method`` (a merge of
    DDSketch-style sketches) within ``relative_error`` of the exact order statistic of rank
    ``floor(q * (n - 1))`` (numpy's ``method="lower"``).
    """

    pipeline_id: int
    pipeline_name: str
    resolution: windows.Resolution
    segments: tuple[windows.Segment, ...]
    start: dt.datetime
    end: dt.datetime
    step_seconds: int
    quantiles: tuple[float, ...]
    method: Literal["sketch"]
    relative_error: float
    series: tuple[StageSeries, ...]


def percentile_series(
    user: User | AnonymousUser,
    pipeline_id: int,
    stages: Sequence[int | None] | None,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
) -> PercentileSeries:
    """Latency percentiles of a pipeline's stages for each step bucket of ``[start, end)``.

    ``stages`` lists stage ids, None standing for end-to-end; ``stages=None`` means
    end-to-end and every stage. The window is widened to whole steps of an epoch-anchored
    grid and the rollup rows to read are chosen by :func:`windows.plan_window` (coarse rows
    where retention dropped finer ones, finer rows where coarse ones are not written yet).
    Per bucket the rows' sketches are merged once; the summary merges each stage's rows
    once more.

    Raises ``Pipeline.DoesNotExist`` when the pipeline is not in one of the user's teams
    (exactly as if it did not exist), :class:`InvalidPercentileQuery` for stages of another
    pipeline or more than ``windows.MAX_POINTS`` points, and ValueError for a quantile
    outside [0, 1] or a step or window that ``windows`` rejects.
    """
    pipeline = Pipeline.objects.filter(team__in=teams_of(user)).get(pk=pipeline_id)
    series_stages = _series_stages(pipeline, stages)
    levels = tuple(sorted(set(quantiles)))
    if not all(0.0 <= level <= 1.0 for level in levels):
        raise ValueError(f"quantiles must lie in [0, 1], got {quantiles!r}")
    step_seconds = int(step.total_seconds())
    plan = windows.plan_window(start, end, step_seconds, stored_rows(Rollup, pipeline))
    # Budgeted on the step asked for, so whether a query is accepted never depends on data.
    points = windows.point_count(start, end, step_seconds, len(series_stages))
    if points > windows.MAX_POINTS:
        raise InvalidPercentileQuery(
            "step",
            f"{points} points (buckets times stages) asked for, at most {windows.MAX_POINTS}: "
            "use a coarser step, a shorter window or fewer stages.",
        )

    rows = list(_rollup_rows(pipeline, plan, series_stages))
    series_count, bucket_count = len(series_stages), plan.bucket_count
    # Group g is bucket g % bucket_count of series g // bucket_count.
    group_count = series_count * bucket_count
    counts = np.zeros(group_count, dtype=np.int64)
    errors = np.zeros(group_count, dtype=np.int64)
    sums = np.zeros(group_count, dtype=np.float64)
    bucket_values = np.full((group_count, len(levels)), math.nan)
    summary_values = np.full((series_count, len(levels)), math.nan)
    if rows:
        stage_ids, epochs, row_counts, row_errors, row_sums, blobs = zip(*rows, strict=True)
        position = {stage.id: index for index, stage in enumerate(series_stages)}
        series_of = np.fromiter(map(position.__getitem__, stage_ids), np.int64, len(rows))
        offsets = np.asarray(epochs, dtype=np.int64) - int(plan.start.timestamp())
        group = series_of * bucket_count + offsets // plan.step_seconds
        np.add.at(counts, group, np.asarray(row_counts, dtype=np.int64))
        np.add.at(errors, group, np.asarray(row_errors, dtype=np.int64))
        np.add.at(sums, group, np.asarray(row_sums, dtype=np.float64))
        bucket_values, summary_values = _merged_quantiles(
            blobs, (group, group_count), (series_of, series_count), levels=levels
        )

    bucket_starts_out = [
        plan.start + dt.timedelta(seconds=index * plan.step_seconds)
        for index in range(bucket_count)
    ]
    figures = _figures(counts, errors, sums, bucket_values)
    by_series = (series_count, bucket_count)
    summaries = _figures(
        counts.reshape(by_series).sum(axis=1),
        errors.reshape(by_series).sum(axis=1),
        sums.reshape(by_series).sum(axis=1),
        summary_values,
    )
    return PercentileSeries(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        resolution=plan.resolution,
        segments=plan.segments,
        start=plan.start,
        end=plan.end,
        step_seconds=plan.step_seconds,
        quantiles=levels,
        method="sketch",
        relative_error=sketch.RELATIVE_ERROR,
        series=tuple(
            StageSeries(
                stage=stage,
                points=tuple(
                    PercentilePoint(moment, figures[index * bucket_count + bucket])
                    for bucket, moment in enumerate(bucket_starts_out)
                ),
                summary=summaries[index],
            )
            for index, stage in enumerate(series_stages)
        ),
    )


def _series_stages(
    pipeline: Pipeline, stages: Sequence[int | None] | None
) -> tuple[SeriesStage, ...]:
    """The asked-for stages in order without repeats, named; all of them when None."""
    if stages is None:
        named = pipeline.stages.order_by("pk").values_list("pk", "name")
        return (SeriesStage(None, END_TO_END), *(SeriesStage(pk, name) for pk, name in named))
    wanted = list(dict.fromkeys(stages))
    ids = [stage for stage in wanted if stage is not None]
    names = dict(Stage.objects.filter(pipeline=pipeline, pk__in=ids).values_list("pk", "name"))
    unknown = [stage for stage in ids if stage not in names]
    if unknown:
        raise InvalidPercentileQuery(
            "stages",
            f"No stage with id {', '.join(map(str, unknown))} in this pipeline.",
        )
    return tuple(
        SeriesStage(stage, END_TO_END if stage is None else names[stage]) for stage in wanted
    )


def stored_rows(
    model: type[Rollup] | type[StageShare], pipeline: Pipeline
) -> dict[windows.Resolution, windows.StoredRows | None]:
    """Oldest and newest ``model`` row of each resolution: six index probes in one query.

    Shared by every reader of per-resolution tables, so windows fall back to coarser rows
    the same way wherever finer rows have expired.
    """
    probes = {}
    for resolution in windows.RESOLUTIONS:
        rows = model.objects.filter(pipeline=OuterRef("pk"), resolution=resolution)
        for name, order in (("first", "bucket_start"), ("last", "-bucket_start")):
            probes[f"{resolution}_{name}"] = Subquery(
                rows.order_by(order).values("bucket_start")[:1]
            )
    found = dict(
        zip(
            probes,
            Pipeline.objects.filter(pk=pipeline.pk).annotate(**probes).values_list(*probes).get(),
            strict=True,
        )
    )
    return {
        resolution: None
        if found[f"{resolution}_first"] is None
        else windows.StoredRows(found[f"{resolution}_first"], found[f"{resolution}_last"])
        for resolution in windows.RESOLUTIONS
    }


def _rollup_rows(
    pipeline: Pipeline, plan: windows.WindowPlan, series_stages: Sequence[SeriesStage]
) -> QuerySet[Rollup, tuple[int | None, int, int, int, float, bytes | memoryview]]:
    """Stage, start (Unix seconds), count, errors, sum and sketch of the rows to merge,
    ordered by stage then time: one statement, one range scan of ``rollup_pipeline_window``
    per segment of the plan."""
    ids = [stage.id for stage in series_stages if stage.id is not None]
    of_stages = Q(stage__in=ids)
    if len(ids) < len(series_stages):
        of_stages |= Q(stage__isnull=True)
    # UNION ALL rather than OR: PostgreSQL factors the pipeline out of ORed ranges and then
    # scans every row of the pipeline through its foreign key index.
    first, *others = (
        Rollup.objects.filter(
            of_stages,
            pipeline=pipeline,
            resolution=segment.resolution,
            bucket_start__gte=segment.start,
            bucket_start__lt=segment.end,
        )
        # Integers load several times faster than timestamps, and are what the maths needs.
        .annotate(epoch=Cast(Extract("bucket_start", "epoch"), BigIntegerField()))
        .values_list("stage", "epoch", "count", "error_count", "sum_ms", "sketch")
        for segment in plan.segments
    )
    return first.union(*others, all=True).order_by("stage", "epoch")


def _merged_quantiles(
    blobs: Sequence[bytes | memoryview],
    *groupings: tuple[npt.NDArray[np.int64], int],
    levels: Sequence[float],
) -> list[npt.NDArray[np.float64]]:
    """For each ``(group ids, group count)`` grouping of the rows, the quantiles of each
    group's merged sketches, one row per group; NaN for groups without rows. The blobs are
    decoded once for all groupings, and each grouping is merged in one vectorized pass."""
    batch = sketch.SketchBatch(blobs)
    return [
        batch.group_summaries(groups, group_count, levels).quantiles
        for groups, group_count in groupings
    ]


def _figures(
    counts: npt.NDArray[np.int64],
    errors: npt.NDArray[np.int64],
    sums: npt.NDArray[np.float64],
    quantiles_ms: npt.NDArray[np.float64],
) -> list[LatencyFigures]:
    """One LatencyFigures per element of the arrays (quantiles: one row each), None where
    there is nothing to describe."""
    empty = counts == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        error_rates = _nullable(errors / counts, empty)
        means = _nullable(sums / counts, empty)
    values = _nullable(quantiles_ms, empty[:, None] | np.isnan(quantiles_ms))
    return [
        LatencyFigures(n, error_rate, mean, tuple(row))
        for n, error_rate, mean, row in zip(
            counts.tolist(), error_rates, means, values, strict=True
        )
    ]


def _nullable(array: npt.NDArray[np.float64], null: npt.NDArray[np.bool_]) -> list[Any]:
    """``array.tolist()`` with None where ``null`` is set."""
    values = array.astype(object)
    values[np.broadcast_to(null, array.shape)] = None
    result: list[Any] = values.tolist()
    return result
