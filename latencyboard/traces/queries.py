"""Reads of traces, scoped to the user's teams: search, exemplars of a quantile, one waterfall.

Pipelines, stages and traces of teams the user is not in do not exist here: asking for them
raises ``Pipeline.DoesNotExist``, ``Stage.DoesNotExist`` or :class:`TraceNotFound`, exactly as
for ids that exist nowhere.

Search and exemplars read raw spans through the ``(pipeline_id, start_time)`` index, so their
cost grows with the spans stored in the window; that is why a search window is bounded
(:data:`MAX_WINDOW`). A trace is read through the primary key ``(team_id, trace_id, …)``, one
index probe per day partition.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.queries import teams_of
from latencyboard.traces import ids, waterfall

MAX_WINDOW: Final = dt.timedelta(hours=24)
DEFAULT_WINDOW: Final = dt.timedelta(hours=1)
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
EXEMPLAR_COUNT: Final = 5
MINUTE: Final = dt.timedelta(minutes=1)
MAX_TRACE_SPANS: Final = 10_000
STATUS_ERROR: Final = 2
_NS_PER_MS: Final = 1_000_000
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class InvalidTraceQuery(ValueError):
    """The filters cannot be answered as given; ``field`` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


class TraceNotFound(LookupError):
    """No span of this trace is stored for any of the user's teams."""


@dataclass(frozen=True)
class AttributeFilter:
    """``key:value`` on a root span's attributes.

    The value is matched as a string, and also as a number or boolean when it reads as one:
    ``http.response.status_code:500`` finds the integer 500 an SDK stores.
    """

    key: str
    value: str

    def documents(self) -> list[str]:
        """JSON documents any of which the attributes must contain (``@>``)."""
        candidates: list[Any] = [self.value]
        try:
            typed = json.loads(self.value)
        except ValueError:
            typed = None
        if isinstance(typed, bool | int | float):
            candidates.append(typed)
        return [json.dumps({self.key: candidate}) for candidate in candidates]


@dataclass(frozen=True)
class TraceFilters:
    """What a trace search asks for; ``start``/``end`` bound the root span's start.

    Without ``stage_id``, ``min_ms``/``max_ms`` bound the root span's duration. With it, the
    trace must have a span of that stage, and the bounds apply to that span. ``status`` and
    ``attributes`` are always about the root span: the request's outcome and labels.
    """

    start: dt.datetime
    end: dt.datetime
    pipeline_id: int | None = None
    stage_id: int | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    status: Literal["error", "ok"] | None = None
    attributes: tuple[AttributeFilter, ...] = ()
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class TraceSummary:
    """One trace found, by the span it was found by: its root span in a search, the span
    nearest the quantile among exemplars. ``stage_duration_ns`` is the longest span of the
    searched stage in the trace (within the duration bounds), when a stage was searched."""

    trace_id: uuid.UUID
    span_id: int
    pipeline_id: int
    pipeline_name: str
    name: str
    start_time: dt.datetime
    duration_ns: int
    is_error: bool
    status_message: str
    stage_duration_ns: int | None = None

    @property
    def trace_hex(self) -> str:
        return ids.trace_hex(self.trace_id)

    @property
    def span_hex(self) -> str:
        return ids.span_hex(self.span_id)

    @property
    def duration_ms(self) -> float:
        return self.duration_ns / _NS_PER_MS

    @property
    def stage_duration_ms(self) -> float | None:
        return None if self.stage_duration_ns is None else self.stage_duration_ns / _NS_PER_MS


@dataclass(frozen=True)
class TraceSearch:
    """Answer to :func:`search_traces`: the slowest matching traces first; ``more`` says
    whether further traces matched beyond ``filters.limit``."""

    filters: TraceFilters
    stage_name: str | None
    traces: tuple[TraceSummary, ...]
    more: bool


@dataclass(frozen=True)
class Exemplars:
    """Answer to :func:`trace_exemplars`.

    ``quantile_ns`` is the exact quantile of the ``n`` durations of the minute: the order
    statistic of rank ``floor(quantile * (n - 1))`` (numpy's ``method="lower"``, the
    definition the percentile charts' sketches estimate); None when ``n`` is 0. ``traces``
    are the traces whose span is nearest to it, nearest first, one row per trace. The
    durations are those of the spans starting in ``[minute, minute + width)``: one minute,
    or a chart's wider bucket.
    """

    pipeline_id: int
    pipeline_name: str
    stage_id: int | None
    stage_name: str | None
    minute: dt.datetime
    quantile: float
    n: int
    quantile_ns: int | None
    traces: tuple[TraceSummary, ...]
    width: dt.timedelta = MINUTE

    @property
    def minute_end(self) -> dt.datetime:
        return self.minute + self.width

    @property
    def quantile_ms(self) -> float | None:
        return None if self.quantile_ns is None else self.quantile_ns / _NS_PER_MS


@dataclass(frozen=True)
class TraceSpan:
    """One stored span of a trace."""

    span_id: int
    parent_span_id: int | None
    name: str
    stage_name: str
    pipeline_id: int
    pipeline_name: str
    kind: int
    status_code: int
    status_message: str
    start_time: dt.datetime
    duration_ns: int
    is_root: bool
    attributes: dict[str, Any]


@dataclass(frozen=True)
class TraceWaterfall:
    """Answer to :func:`trace_waterfall`: the spans in start order and their waterfall
    (whose rows index ``spans``). ``truncated``: the trace has more than
    :data:`MAX_TRACE_SPANS` spans and only the earliest-starting ones are here."""

    trace_id: uuid.UUID
    spans: tuple[TraceSpan, ...]
    waterfall: waterfall.Waterfall
    truncated: bool

    @property
    def start_time(self) -> dt.datetime:
        return self.spans[0].start_time


def pipelines_of(user: User | AnonymousUser) -> list[Pipeline]:
    """The user's pipelines with their stages, for the search form."""
    return list(
        Pipeline.objects.filter(team__in=teams_of(user))
        .select_related("team")
        .prefetch_related("stages")
    )


def search_traces(user: User | AnonymousUser, filters: TraceFilters) -> TraceSearch:
    """The slowest root spans (end-to-end requests) of the user's pipelines matching
    ``filters``, slowest first (ties: earlier start, then lower trace id).

    Raises ``Pipeline.DoesNotExist``/``Stage.DoesNotExist`` for a pipeline or stage not in
    the user's teams, and :class:`InvalidTraceQuery` for a window that is empty or longer
    than :data:`MAX_WINDOW`, duration bounds the wrong way round, a limit out of range, or a
    stage of another pipeline than the one given.
    """
    _check_window(filters.start, filters.end)
    if not 1 <= filters.limit <= MAX_LIMIT:
        raise InvalidTraceQuery("limit", f"Between 1 and {MAX_LIMIT} traces.")
    low, high = filters.min_ms, filters.max_ms
    if low is not None and high is not None and low > high:
        raise InvalidTraceQuery("max_ms", "max_ms is below min_ms.")
    pipelines, stage = _scope(user, filters.pipeline_id, filters.stage_id)
    if not pipelines:
        return TraceSearch(filters, None, (), more=False)
    params: dict[str, Any] = {
        "pipelines": [pipeline.pk for pipeline in pipelines],
        "teams": sorted({pipeline.team_id for pipeline in pipelines}),
        "start": filters.start,
        "end": filters.end,
        "stage": None if stage is None else stage.pk,
        "limit": filters.limit + 1,
    }
    sql = _search_sql(filters, params)
    names = {pipeline.pk: str(pipeline) for pipeline in pipelines}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    traces = tuple(_summary(row, names) for row in rows[: filters.limit])
    return TraceSearch(
        filters,
        stage_name=None if stage is None else stage.name,
        traces=traces,
        more=len(rows) > filters.limit,
    )


def trace_exemplars(
    user: User | AnonymousUser,
    pipeline_id: int,
    stage_id: int | None,
    minute: dt.datetime,
    quantile: float,
    count: int = EXEMPLAR_COUNT,
    width: dt.timedelta = MINUTE,
) -> Exemplars:
    """The ``count`` traces of the minute starting at ``minute`` (floored to the minute), or of
    the ``width`` from it, whose span of ``stage_id`` (None: the root span, end to end) is
    nearest in duration to that period's exact ``quantile``; ties go to the lower trace id.

    Raises ``Pipeline.DoesNotExist``/``Stage.DoesNotExist`` outside the user's teams,
    :class:`InvalidTraceQuery` for a stage of another pipeline, ValueError for a quantile
    outside [0, 1] or a width that is not whole minutes up to :data:`MAX_WINDOW`.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    if not MINUTE <= width <= MAX_WINDOW or width % MINUTE:
        raise ValueError(f"width must be whole minutes up to {MAX_WINDOW}, got {width!r}")
    pipelines, stage = _scope(user, pipeline_id, stage_id)
    (pipeline,) = pipelines
    minute = minute.astimezone(dt.UTC).replace(second=0, microsecond=0)
    which = "is_root" if stage is None else "stage_id = %(stage)s"
    sql = f"""
        WITH minute AS MATERIALIZED (
            SELECT trace_id, span_id, name, start_time, duration_ns, status_code, status_message
            FROM spans_span
            WHERE pipeline_id = %(pipeline)s AND team_id = %(team)s
              AND start_time >= %(start)s AND start_time < %(end)s AND {which}
        ),
        target AS (
            SELECT duration_ns FROM minute ORDER BY duration_ns
            OFFSET (SELECT greatest(floor(%(q)s::float8 * (count(*) - 1)), 0)::bigint FROM minute)
            LIMIT 1
        ),
        nearest AS (
            SELECT DISTINCT ON (m.trace_id) m.*, abs(m.duration_ns - t.duration_ns) AS distance
            FROM minute m CROSS JOIN target t
            ORDER BY m.trace_id, distance, m.span_id
        )
        SELECT n.trace_id, n.span_id, %(pipeline)s, n.name, n.start_time, n.duration_ns,
               n.status_code, n.status_message, NULL, t.duration_ns,
               (SELECT count(*) FROM minute)
        FROM nearest n CROSS JOIN target t
        ORDER BY n.distance, n.trace_id
        LIMIT %(count)s
    """  # noqa: S608 - a constant condition, values are parameters
    params: dict[str, Any] = {
        "pipeline": pipeline.pk,
        "team": pipeline.team_id,
        "start": minute,
        "end": minute + width,
        "stage": None if stage is None else stage.pk,
        "q": quantile,
        "count": count,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    names = {pipeline.pk: str(pipeline)}
    return Exemplars(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        stage_id=None if stage is None else stage.pk,
        stage_name=None if stage is None else stage.name,
        minute=minute,
        quantile=quantile,
        n=int(rows[0][10]) if rows else 0,
        quantile_ns=int(rows[0][9]) if rows else None,
        traces=tuple(_summary(row[:9], names) for row in rows),
        width=width,
    )


def trace_waterfall(user: User | AnonymousUser, trace_id: uuid.UUID) -> TraceWaterfall:
    """Every span of the trace stored for the user's teams, and its waterfall.

    Raises :class:`TraceNotFound` when there is none (whether the trace belongs to another
    team or to nobody).
    """
    team_ids = list(teams_of(user).values_list("pk", flat=True))
    sql = """
        SELECT s.span_id, s.parent_span_id, s.name, st.name, s.pipeline_id, s.kind,
               s.status_code, s.status_message, s.start_time, s.duration_ns, s.is_root,
               s.attributes
        FROM spans_span s JOIN pipelines_stage st ON st.id = s.stage_id
        WHERE s.team_id = ANY(%(teams)s) AND s.trace_id = %(trace)s
        ORDER BY s.start_time, s.span_id
        LIMIT %(limit)s
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, {"teams": team_ids, "trace": trace_id, "limit": MAX_TRACE_SPANS + 1})
        rows = cursor.fetchall()
    if not rows:
        raise TraceNotFound(trace_id)
    pipelines = Pipeline.objects.in_bulk({row[4] for row in rows})
    spans = tuple(
        TraceSpan(
            span_id=span_id,
            parent_span_id=parent,
            name=name,
            stage_name=stage_name,
            pipeline_id=pipeline_id,
            pipeline_name=str(pipelines[pipeline_id]),
            kind=kind,
            status_code=status_code,
            status_message=status_message,
            start_time=start_time,
            duration_ns=duration_ns,
            is_root=is_root,
            # Django has psycopg load jsonb as text (JSONField decodes it itself).
            attributes=json.loads(attributes),
        )
        for (
            span_id,
            parent,
            name,
            stage_name,
            pipeline_id,
            kind,
            status_code,
            status_message,
            start_time,
            duration_ns,
            is_root,
            attributes,
        ) in rows[:MAX_TRACE_SPANS]
    )
    timings = [
        waterfall.SpanTiming(
            span.span_id, span.parent_span_id, _unix_ns(span.start_time), span.duration_ns
        )
        for span in spans
    ]
    return TraceWaterfall(
        trace_id=trace_id,
        spans=spans,
        waterfall=waterfall.build(timings),
        truncated=len(rows) > MAX_TRACE_SPANS,
    )


def _check_window(start: dt.datetime, end: dt.datetime) -> None:
    if end <= start:
        raise InvalidTraceQuery("end", "The window ends before it starts.")
    if end - start > MAX_WINDOW:
        hours = MAX_WINDOW // dt.timedelta(hours=1)
        raise InvalidTraceQuery(
            "end",
            f"At most {hours} h per search: traces are searched in raw spans, so a window "
            "is kept short. Narrow it, or read percentiles for longer periods.",
        )


def _scope(
    user: User | AnonymousUser, pipeline_id: int | None, stage_id: int | None
) -> tuple[list[Pipeline], Stage | None]:
    """The pipelines to read (the one asked for, the stage's, or all of the user's) and the
    stage; raises DoesNotExist for either outside the user's teams."""
    mine = Pipeline.objects.filter(team__in=teams_of(user))
    pipeline = None if pipeline_id is None else mine.get(pk=pipeline_id)
    stage = (
        None
        if stage_id is None
        else Stage.objects.select_related("pipeline").get(pk=stage_id, pipeline__in=mine)
    )
    if stage is not None:
        if pipeline is not None and stage.pipeline_id != pipeline.pk:
            raise InvalidTraceQuery("stage", f"Stage {stage_id} is not a stage of this pipeline.")
        pipeline = stage.pipeline
    return ([pipeline] if pipeline is not None else list(mine)), stage


def _search_sql(filters: TraceFilters, params: dict[str, Any]) -> str:
    """The search statement; every value in it is a parameter, added to ``params``.

    Without a stage: one range scan of the root spans' partial index over the window. With
    a stage, the roots of the window are joined by trace id to the stage's spans, read from
    the ``(pipeline_id, start_time)`` index alone (it carries stage, trace id and duration):
    from the window's start to the last matching root's end (capped at :data:`MAX_WINDOW`
    after the window, so that the planner prunes the day partitions beyond), so that spans
    of requests still running at the window's end count too.
    """
    window = (
        "r.pipeline_id = ANY(%(pipelines)s) AND r.team_id = ANY(%(teams)s) "
        "AND r.start_time >= %(start)s AND r.start_time < %(end)s"
    )
    root = ["r.is_root"]
    if filters.status is not None:
        root.append(f"r.status_code {'=' if filters.status == 'error' else '<>'} {STATUS_ERROR}")
    for number, attribute in enumerate(filters.attributes):
        alternatives = []
        for k, document in enumerate(attribute.documents()):
            params[f"attr{number}_{k}"] = document
            alternatives.append(f"r.attributes @> %(attr{number}_{k})s::jsonb")
        root.append(f"({' OR '.join(alternatives)})")
    durations = _duration_bounds(filters, params)
    columns = (
        "r.trace_id, r.span_id, r.pipeline_id, r.name, r.start_time, r.duration_ns, "
        "r.status_code, r.status_message"
    )
    order = "ORDER BY r.duration_ns DESC, r.start_time, r.trace_id, r.span_id LIMIT %(limit)s"
    if filters.stage_id is None:
        where = " AND ".join([window, *root, *(f"r.{bound}" for bound in durations)])
        return f"SELECT {columns}, NULL FROM spans_span r WHERE {where} {order}"  # noqa: S608 - constant fragments, values are parameters
    params["late_end"] = filters.end + MAX_WINDOW
    # No team condition on the stage's spans, so that the index answers alone: a stage is
    # one pipeline's, which _scope found in the user's teams, and so are its spans.
    of_stage = " AND ".join(
        [
            "s.pipeline_id = ANY(%(pipelines)s) AND s.stage_id = %(stage)s",
            *(f"s.{bound}" for bound in durations),
        ]
    )
    # The roots keep no text columns, so that a day of them stays small; the names and
    # statuses of the few traces returned are read back by primary key.
    return f"""
        WITH roots AS MATERIALIZED (
            SELECT r.team_id, r.trace_id, r.span_id, r.start_time, r.duration_ns
            FROM spans_span r
            WHERE {window} AND {" AND ".join(root)}
        ),
        stage_spans AS (
            SELECT s.trace_id, s.duration_ns
            FROM spans_span s
            WHERE {of_stage} AND s.start_time >= %(start)s AND s.start_time < %(end)s
            UNION ALL
            SELECT s.trace_id, s.duration_ns
            FROM spans_span s
            WHERE {of_stage} AND s.start_time >= %(end)s AND s.start_time < %(late_end)s
              AND s.start_time <= (
                  SELECT max(start_time + duration_ns / 1000 * interval '1 microsecond')
                  FROM roots
              )
        ),
        matched AS (
            SELECT trace_id, max(duration_ns) AS duration_ns FROM stage_spans GROUP BY trace_id
        ),
        slowest AS (
            SELECT r.*, m.duration_ns AS stage_ns
            FROM roots r JOIN matched m USING (trace_id)
            {order}
        )
        SELECT {columns}, t.stage_ns
        FROM slowest t
        JOIN spans_span r USING (team_id, trace_id, span_id, start_time)
        WHERE {window}
        ORDER BY t.duration_ns DESC, t.start_time, t.trace_id, t.span_id
    """  # noqa: S608 - constant fragments, values are parameters


def _duration_bounds(filters: TraceFilters, params: dict[str, Any]) -> list[str]:
    """Conditions on ``duration_ns`` (to prefix with a table alias) for the ms bounds."""
    bounds = []
    if filters.min_ms is not None:
        params["min_ns"] = math.ceil(filters.min_ms * _NS_PER_MS)
        bounds.append("duration_ns >= %(min_ns)s")
    if filters.max_ms is not None:
        params["max_ns"] = math.floor(filters.max_ms * _NS_PER_MS)
        bounds.append("duration_ns <= %(max_ns)s")
    return bounds


def _summary(row: Sequence[Any], names: dict[int, str]) -> TraceSummary:
    trace_id, span_id, pipeline_id, name, start, duration, status, message, stage_ns = row
    return TraceSummary(
        trace_id=trace_id,
        span_id=span_id,
        pipeline_id=pipeline_id,
        pipeline_name=names[pipeline_id],
        name=name,
        start_time=start,
        duration_ns=duration,
        is_error=status == STATUS_ERROR,
        status_message=message,
        stage_duration_ns=stage_ns,
    )


def _unix_ns(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // dt.timedelta(microseconds=1) * 1000
