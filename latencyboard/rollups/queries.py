"""Reads of rollups: per-stage latency percentiles of a pipeline, scoped to the user's teams."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, NamedTuple

import numpy as np
import numpy.typing as npt
import psycopg
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import QuerySet

from latencyboard.db import psycopg_cursor
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import windows
from latencyboard.rollups.models import Rollup, StageShare
from latencyboard.sketches import batch as sketch_batch
from latencyboard.sketches import buckets as sketch_buckets
from latencyboard.teams.models import Team
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
    return _percentile_series(
        _pipeline_of(teams_of(user), pipeline_id), stages, start, end, step, quantiles
    )


def live_minutes(pipeline_id: int, start: dt.datetime, end: dt.datetime) -> PercentileSeries:
    """Per-minute percentiles of every stage of a pipeline over ``[start, end)``, as
    :func:`percentile_series` reads them, for the pipeline's live pages (which the channel
    layer's groups scope to its team). Raises ``Pipeline.DoesNotExist`` for a deleted one."""
    return _percentile_series(
        _pipeline_of(Team.objects.all(), pipeline_id),
        None,
        start,
        end,
        dt.timedelta(minutes=1),
        DEFAULT_QUANTILES,
    )


def _percentile_series(
    pipeline: _PipelineRows,
    stages: Sequence[int | None] | None,
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


class _PipelineRows(NamedTuple):
    """What a query needs of a pipeline besides its rollup rows."""

    id: int
    name: str
    stages: list[tuple[int, str]]  # id and name of each stage, by id
    stored: dict[windows.Resolution, windows.StoredRows | None]


_PIPELINE_SQL: Final = """
SELECT p.id, p.service_name, p.environment,
       (SELECT json_agg(json_build_array(s.id, s.name) ORDER BY s.id)
        FROM {stages} s WHERE s.pipeline_id = p.id),
       {probes}
FROM {pipelines} p
WHERE p.id = %s AND p.team_id IN ({teams})
"""


def _pipeline_of(scope: QuerySet[Team], pipeline_id: int) -> _PipelineRows:
    """The pipeline, its stages and its stored rows (:func:`stored_rows`), in one statement
    (each round trip to PostgreSQL costs more than its query here), scoped to the teams of
    ``scope`` (:func:`teams_of` for a user) by their own SQL. Raises ``Pipeline.DoesNotExist``
    as the ORM would.
    """
    try:
        teams, teams_params = scope.values("pk").query.sql_with_params()
    except EmptyResultSet:  # no teams at all
        raise Pipeline.DoesNotExist from None
    probes, probes_params = _stored_row_probes(Rollup, "p.id")
    with connection.cursor() as cursor:
        cursor.execute(
            _PIPELINE_SQL.format(
                stages=connection.ops.quote_name(Stage._meta.db_table),
                probes=probes,
                pipelines=connection.ops.quote_name(Pipeline._meta.db_table),
                teams=teams,
            ),
            [*probes_params, pipeline_id, *teams_params],
        )
        row = cursor.fetchone()
    if row is None:
        raise Pipeline.DoesNotExist("Pipeline matching query does not exist.")
    pk, service_name, environment, named, *found = row
    return _PipelineRows(
        pk,
        str(Pipeline(pk=pk, service_name=service_name, environment=environment)),
        [(stage_id, name) for stage_id, name in named or ()],
        _stored(found),
    )


def _series_stages(
    named: Sequence[tuple[int, str]], stages: Sequence[int | None] | None
) -> tuple[tuple[SeriesStage, ...], bool]:
    """The asked-for stages of a pipeline whose stages are ``named`` in order without
    repeats, named (all of them when None), and whether they are end to end and every stage
    of the pipeline."""
    if stages is None:
        every = (SeriesStage(None, END_TO_END), *(SeriesStage(pk, name) for pk, name in named))
        return every, True
    wanted = list(dict.fromkeys(stages))
    ids = [stage for stage in wanted if stage is not None]
    names = dict(named)
    unknown = [stage for stage in ids if stage not in names]
    if unknown:
        raise InvalidPercentileQuery(
            "stages",
            f"No stage with id {', '.join(map(str, unknown))} in this pipeline.",
        )
    return tuple(
        SeriesStage(stage, END_TO_END if stage is None else names[stage]) for stage in wanted
    ), len(wanted) == len(named) + 1


_STORED_ROW_PROBE: Final = """(
    SELECT bucket_start FROM {table} WHERE pipeline_id = {pipeline} AND resolution = %s
    ORDER BY bucket_start {order} LIMIT 1
)"""
_STORED_ROWS_SQL: Final = "SELECT {probes} FROM (SELECT %s::bigint AS id) AS p"


def stored_rows(
    model: type[Rollup] | type[StageShare], pipeline: Pipeline
) -> dict[windows.Resolution, windows.StoredRows | None]:
    """Oldest and newest ``model`` row of each resolution: six index probes in one query.

    Shared by every reader of per-resolution tables, so windows fall back to coarser rows
    the same way wherever finer rows have expired.
    """
    probes, params = _stored_row_probes(model, "p.id")
    with connection.cursor() as cursor:
        cursor.execute(_STORED_ROWS_SQL.format(probes=probes), [*params, pipeline.pk])
        return _stored(cursor.fetchone())


def _stored_row_probes(
    model: type[Rollup] | type[StageShare], pipeline_id: str
) -> tuple[str, list[str]]:
    """The six probes of :func:`stored_rows` as SQL columns, for the pipeline whose id is
    the SQL expression ``pipeline_id``, and their parameters."""
    # Written out: the ORM takes longer to compile six correlated subqueries than PostgreSQL
    # takes to answer them.
    table = connection.ops.quote_name(model._meta.db_table)
    probes = ", ".join(
        _STORED_ROW_PROBE.format(table=table, pipeline=pipeline_id, order=order)
        for _ in windows.RESOLUTIONS
        for order in ("ASC", "DESC")
    )
    return probes, [resolution for resolution in windows.RESOLUTIONS for _ in range(2)]


def _stored(
    found: Sequence[dt.datetime | None],
) -> dict[windows.Resolution, windows.StoredRows | None]:
    """:func:`stored_rows`' answer from its six probes, oldest then newest per resolution."""
    return {
        resolution: None if first is None or last is None else windows.StoredRows(first, last)
        for resolution, first, last in zip(
            windows.RESOLUTIONS, found[0::2], found[1::2], strict=True
        )
    }


class _WindowRows(NamedTuple):
    """The rollup rows of a window as parallel arrays, one entry per row, and their sketches."""

    stage_ids: npt.NDArray[np.int64]  # -1 for end to end
    epochs: npt.NDArray[np.int64]  # bucket start, Unix seconds
    error_counts: npt.NDArray[np.int64]
    sketches: sketch_batch.SketchBatch


# The rows come back as two values (as the rollup worker reads spans, see
# ``folding.SPAN_RECORD``): their other fields as one fixed-width binary record each, end to
# end, and their sketches end to end, rather than a Python object per row and column. Both
# aggregates of one SELECT see the rows in the same order. The count and sum_ms columns are
# left out: they are the sketches' own count and sum.
_ROW_RECORD: Final = (
    "int8send(coalesce(stage_id, -1)) || timestamptz_send(bucket_start)"
    " || int8send(error_count) || int4send(octet_length(sketch))"
)
_RECORD: Final = np.dtype(
    [
        ("stage_id", ">i8"),  # -1 for end to end
        ("start_us", ">i8"),  # microseconds since 2000-01-01 UTC
        ("error_count", ">i8"),
        ("sketch_bytes", ">i4"),
    ]
)
_PG_EPOCH_S: Final = 946_684_800  # binary timestamptz counts from 2000-01-01 UTC
_ROWS_SQL: Final = f"""
SELECT string_agg({_ROW_RECORD}, ''), string_agg(sketch, '') FROM ({{segments}}) AS rows
"""  # noqa: S608 - constant text
# One range scan of rollup_pipeline_window per segment. UNION ALL rather than OR:
# PostgreSQL factors the pipeline out of ORed ranges and then scans every row of the
# pipeline through its foreign key index.
_SEGMENT_SQL: Final = """
SELECT "rollups_rollup"."stage_id", "rollups_rollup"."bucket_start",
       "rollups_rollup"."error_count", "rollups_rollup"."sketch"
FROM "rollups_rollup"
WHERE "rollups_rollup"."pipeline_id" = %s AND "rollups_rollup"."resolution" = %s
  AND "rollups_rollup"."bucket_start" >= %s AND "rollups_rollup"."bucket_start" < %s
"""
_OF_STAGES_SQL: Final = """  AND ("rollups_rollup"."stage_id" = ANY(%s::bigint[]) {or_end_to_end})
"""


def _rollup_rows(
    pipeline_id: int, plan: windows.WindowPlan, series_stages: Sequence[SeriesStage] | None
) -> _WindowRows:
    """The rows to merge for the plan's segments, in one statement: those of
    ``series_stages``, or every row of the pipeline for None."""
    segment, of_stages = _SEGMENT_SQL, []
    if series_stages is not None:
        ids = [stage.id for stage in series_stages if stage.id is not None]
        or_end_to_end = "" if len(ids) == len(series_stages) else "OR stage_id IS NULL"
        segment += _OF_STAGES_SQL.format(or_end_to_end=or_end_to_end)
        of_stages = [ids]
    params: list[Any] = []
    for part in plan.segments:
        params += [pipeline_id, part.resolution, part.start, part.end, *of_stages]
    sql = _ROWS_SQL.format(segments=" UNION ALL ".join([segment] * len(plan.segments)))
    records, sketches = _fetch_binary_row(sql, params)
    rows = np.frombuffer(records or b"", _RECORD)  # string_agg of no rows is NULL
    return _WindowRows(
        rows["stage_id"].astype(np.int64),
        rows["start_us"] // 1_000_000 + _PG_EPOCH_S,
        rows["error_count"].astype(np.int64),
        sketch_batch.SketchBatch.from_buffer(sketches or b"", rows["sketch_bytes"]),
    )


def _fetch_binary_row(sql: str, params: Sequence[Any]) -> tuple[Any, ...]:
    """The one row of ``sql``, fetched in PostgreSQL's binary format (bytea as raw bytes).

    Django's cursors bind parameters client side, which psycopg allows only with text
    results, and a bytea in text is hex: twice the bytes, to encode and decode. So the
    parameters are bound client side as Django would (psycopg's own quoting), and the
    resulting statement runs on a binary psycopg cursor wrapped like any Django cursor
    (database errors, query logging with the full statement).
    """
    raw = psycopg_cursor()
    statement = psycopg.ClientCursor(connection.connection).mogrify(sql, params)
    raw.format = psycopg.pq.Format.BINARY  # what connection.cursor(binary=True) does
    wrap = connection.make_debug_cursor if connection.queries_logged else connection.make_cursor
    with wrap(raw) as cursor:  # type: ignore[arg-type]  # the stubs want a wrapper here
        cursor.execute(statement)
        row: tuple[Any, ...] = cursor.fetchone()
    return row


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
