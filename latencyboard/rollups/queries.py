"""Reads of rollups: per-stage latency percentiles of a pipeline, scoped to the user's teams."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import EmptyResultSet
from django.db.models import QuerySet

from latencyboard import windows
from latencyboard.pipelines.mapping import END_TO_END
from latencyboard.pipelines.models import Pipeline
from latencyboard.sketches import batch as sketch_batch
from latencyboard.sketches import buckets as sketch_buckets
from latencyboard.storage import rollup_reads

DEFAULT_QUANTILES: Final = (0.5, 0.9, 0.95, 0.99, 0.999)


def present(values: np.ndarray) -> list[float | None]:
    """Floats with None for NaN (a quantile of no requests)."""
    return [None if np.isnan(value) else float(value) for value in values]


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
    """Latency of stages over step buckets, or over the whole window: parallel arrays.

    ``n`` has one entry per (series, bucket) or per series; ``quantiles_ms`` has one more
    axis, one entry per ``PercentileSeries.quantiles``. ``n`` and ``error_rate`` are exact
    (from the rollups' counters), ``mean_ms`` is the exact sum of the latencies rounded once
    over ``n``; ``quantiles_ms`` are sketch estimates. Everything but ``n`` is NaN where
    ``n`` is 0: no spans is not a latency of zero.
    """

    n: npt.NDArray[np.int64]
    error_rate: npt.NDArray[np.float64]
    mean_ms: npt.NDArray[np.float64]
    quantiles_ms: npt.NDArray[np.float64]


@dataclass(frozen=True)
class PercentileSeries:
    """Answer to :func:`percentile_series`.

    ``start``/``end`` are the window widened to whole steps and ``step_seconds`` the step
    actually used (wider than asked when only coarser rows cover the window); bucket ``i``
    starts at ``start + i * step_seconds``. ``segments`` say which rollup rows were merged
    for which part of the window, ``resolution`` is the first (coarsest) of them. ``points``
    has one row per stage of ``stages`` and one column per bucket, ``summary`` one entry per
    stage for the whole window. Every quantile is estimated by ``method`` (a merge of
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
    stages: tuple[SeriesStage, ...]
    points: LatencyFigures
    summary: LatencyFigures

    @property
    def bucket_count(self) -> int:
        """Step buckets in the window: the columns of ``points``."""
        return int((self.end - self.start).total_seconds()) // self.step_seconds


def percentile_series(
    user: User | AnonymousUser,
    pipeline_id: int,
    stages: Sequence[int | str | None] | None,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
) -> PercentileSeries:
    """Latency percentiles of a pipeline's stages for each step bucket of ``[start, end)``.

    ``stages`` lists stage ids or names, None standing for end-to-end; ``stages=None`` means
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
    return _percentile_series(
        _pipeline_of(pipeline_id, Pipeline.objects.visible_to(user)),
        stages,
        start,
        end,
        step,
        quantiles,
    )


def live_minutes(pipeline_id: int, start: dt.datetime, end: dt.datetime) -> PercentileSeries:
    """Per-minute percentiles of every stage of a pipeline over ``[start, end)``, as
    :func:`percentile_series` reads them, for the pipeline's live pages (which the channel
    layer's groups scope to its team). Raises ``Pipeline.DoesNotExist`` for a deleted one."""
    return _percentile_series(
        _pipeline_of(pipeline_id, None),
        None,
        start,
        end,
        dt.timedelta(minutes=1),
        DEFAULT_QUANTILES,
    )


def _percentile_series(
    pipeline: _PipelineRows,
    stages: Sequence[int | str | None] | None,
    start: dt.datetime,
    end: dt.datetime,
    step: dt.timedelta,
    quantiles: Sequence[float],
) -> PercentileSeries:
    series_stages, whole_pipeline = _series_stages(pipeline.stages, stages)
    levels = tuple(sorted(set(quantiles)))
    if not all(0.0 <= level <= 1.0 for level in levels):
        raise ValueError(f"quantiles must lie in [0, 1], got {quantiles!r}")
    step_seconds = int(step.total_seconds())
    plan = windows.plan_window(start, end, step_seconds, pipeline.stored)
    # Budgeted on the step asked for, so whether a query is accepted never depends on data.
    points = windows.point_count(start, end, step_seconds, len(series_stages))
    if points > windows.MAX_POINTS:
        raise InvalidPercentileQuery(
            "step",
            f"{points} points (buckets times stages) asked for, at most {windows.MAX_POINTS}: "
            "use a coarser step, a shorter window or fewer stages.",
        )

    rows = _rollup_rows(pipeline.id, plan, None if whole_pipeline else series_stages)
    series_count, bucket_count = len(series_stages), plan.bucket_count
    # The series of each row: stage ids in order, end to end's -1 first. A row of a stage
    # created since the stages were read (all rows of the pipeline are read when all its
    # stages are asked for) goes to one more series, left out of the answer.
    known = np.array([-1 if stage.id is None else stage.id for stage in series_stages])
    order = np.argsort(known)
    position = np.minimum(np.searchsorted(known, rows.stage_ids, sorter=order), order.size - 1)
    asked = known[order][position] == rows.stage_ids
    series_of = np.where(asked, order[position], series_count)
    # Group g is bucket g % bucket_count of series g // bucket_count.
    group_count = series_count * bucket_count
    bucket = (rows.epochs - int(plan.start.timestamp())) // plan.step_seconds
    group = series_of * bucket_count + np.where(asked, bucket, 0)
    # Counts and sums as the rows' sketches hold them: the rollup worker writes the rows'
    # count and sum_ms columns from them, and the sums come out exact (added up once).
    per_bucket = rows.sketches.group_summaries(group, group_count + 1, levels)
    per_series = rows.sketches.group_summaries(series_of, series_count + 1, levels)
    errors = np.zeros(group_count + 1, dtype=np.int64)
    np.add.at(errors, group, rows.error_counts)
    by_series = (series_count, bucket_count)
    return PercentileSeries(
        pipeline_id=pipeline.id,
        pipeline_name=pipeline.name,
        resolution=plan.resolution,
        segments=plan.segments,
        start=plan.start,
        end=plan.end,
        step_seconds=plan.step_seconds,
        quantiles=levels,
        method="sketch",
        relative_error=sketch_buckets.RELATIVE_ERROR,
        stages=series_stages,
        points=_figures(
            per_bucket.count[:-1].reshape(by_series),
            errors[:-1].reshape(by_series),
            per_bucket.sum[:-1].reshape(by_series),
            per_bucket.quantiles[:-1].reshape((*by_series, len(levels))),
        ),
        summary=_figures(
            per_series.count[:-1],
            errors[:-1].reshape(by_series).sum(axis=1),
            per_series.sum[:-1],
            per_series.quantiles[:-1],
        ),
    )


def _pipeline_of(pipeline_id: int, visible: QuerySet[Pipeline] | None) -> _PipelineRows:
    """The pipeline, its stages and its stored rows, in one statement, if ``visible`` (None:
    any pipeline) holds it; raises ``Pipeline.DoesNotExist`` as the ORM would otherwise."""
    scope = None
    if visible is not None:
        try:
            scope = visible.values("pk").query.sql_with_params()
        except EmptyResultSet:  # no teams at all
            raise Pipeline.DoesNotExist from None
    found = rollup_reads.pipeline_rollups(pipeline_id, scope, windows.RESOLUTIONS)
    if found is None:
        raise Pipeline.DoesNotExist("Pipeline matching query does not exist.")
    return _PipelineRows(
        found.id,
        str(Pipeline(pk=found.id, service_name=found.service_name, environment=found.environment)),
        found.stages,
        _stored(found.bounds),
    )


class _PipelineRows(NamedTuple):
    """What a query needs of a pipeline besides its rollup rows."""

    id: int
    name: str
    stages: list[tuple[int, str]]  # id and name of each stage, by id
    stored: dict[windows.Resolution, windows.StoredRows | None]


def _series_stages(
    named: Sequence[tuple[int, str]], stages: Sequence[int | str | None] | None
) -> tuple[tuple[SeriesStage, ...], bool]:
    """The asked-for stages of a pipeline whose stages are ``named`` in order without
    repeats, named (all of them when None), and whether they are end to end and every stage
    of the pipeline. A stage is asked for by id or by name (an id first: a stage named
    ``12`` is asked for by its id when no stage has id 12); END_TO_END names end to end."""
    if stages is None:
        every = (SeriesStage(None, END_TO_END), *(SeriesStage(pk, name) for pk, name in named))
        return every, True
    names = dict(named)
    ids_by_name = {name: pk for pk, name in named}
    resolved: list[int | None] = []
    unknown: list[str] = []
    for stage in stages:
        if stage is None or stage == END_TO_END:
            resolved.append(None)
        elif isinstance(stage, int) and stage in names:
            resolved.append(stage)
        elif str(stage) in ids_by_name:
            resolved.append(ids_by_name[str(stage)])
        else:
            unknown.append(str(stage))
    if unknown:
        raise InvalidPercentileQuery(
            "stages", f"No stage {', '.join(unknown)} (by id or name) in this pipeline."
        )
    wanted = list(dict.fromkeys(resolved))
    return tuple(
        SeriesStage(stage, END_TO_END if stage is None else names[stage]) for stage in wanted
    ), len(wanted) == len(named) + 1


def stored_rows(
    table: str, pipeline_id: int
) -> dict[windows.Resolution, windows.StoredRows | None]:
    """Oldest and newest row of each resolution of ``table`` (``tables.ROLLUP`` or
    ``tables.STAGE_SHARE``): six index probes in one query.

    Shared by every reader of per-resolution tables, so windows fall back to coarser rows
    the same way wherever finer rows have expired.
    """
    return _stored(rollup_reads.row_bounds(table, pipeline_id, windows.RESOLUTIONS))


def stored_rows_of(
    table: str, pipeline_ids: Sequence[int]
) -> dict[int, dict[windows.Resolution, windows.StoredRows | None]]:
    """:func:`stored_rows` of several pipelines (by id) in one query."""
    found = rollup_reads.row_bounds_of(table, pipeline_ids, windows.RESOLUTIONS)
    return {pipeline_id: _stored(bounds) for pipeline_id, bounds in found.items()}


def _stored(bounds: rollup_reads.RowBounds) -> dict[windows.Resolution, windows.StoredRows | None]:
    kept = {resolution: bounds[resolution] for resolution in windows.RESOLUTIONS}
    return {
        resolution: None if found is None else windows.StoredRows(*found)
        for resolution, found in kept.items()
    }


def _rollup_rows(
    pipeline_id: int, plan: windows.WindowPlan, series_stages: Sequence[SeriesStage] | None
) -> _WindowRows:
    """The rows to merge for the plan's segments: those of ``series_stages``, or every row
    of the pipeline for None."""
    ids = None if series_stages is None else [s.id for s in series_stages if s.id is not None]
    rows = rollup_reads.window_rows(
        pipeline_id,
        [rollup_reads.Segment(part.resolution, part.start, part.end) for part in plan.segments],
        ids,
        end_to_end=series_stages is not None and len(ids or ()) < len(series_stages),
    )
    return _WindowRows(
        rows.stage_ids,
        rows.epochs,
        rows.error_counts,
        sketch_batch.SketchBatch.from_buffer(rows.sketches, rows.sketch_sizes),
    )


class _WindowRows(NamedTuple):
    """The rollup rows of a window as parallel arrays, one entry per row, and their sketches."""

    stage_ids: npt.NDArray[np.int64]  # -1 for end to end
    epochs: npt.NDArray[np.int64]  # bucket start, Unix seconds
    error_counts: npt.NDArray[np.int64]
    sketches: sketch_batch.SketchBatch


def _figures(
    counts: npt.NDArray[np.int64],
    errors: npt.NDArray[np.int64],
    sums: npt.NDArray[np.float64],
    quantiles_ms: npt.NDArray[np.float64],
) -> LatencyFigures:
    """The figures of these sums, NaN where there is nothing to describe."""
    empty = counts == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        error_rates = np.where(empty, math.nan, errors / counts)
        means = np.where(empty, math.nan, sums / counts)
    values = np.where(empty[..., None], math.nan, quantiles_ms)
    return LatencyFigures(counts, error_rates, means, values)
