"""Trace search, scoped to the user's teams, and what the other reads of traces share.

Pipelines and stages of teams the user is not in do not exist here: asking for them raises
``Pipeline.DoesNotExist`` or ``Stage.DoesNotExist``, exactly as for ids that exist nowhere.
:func:`scope` says so once for the search and for exemplars
(``latencyboard.traces.exemplar_queries``); one trace's waterfall is read in
``latencyboard.traces.waterfall_queries``.

Search and exemplars read raw spans through the ``(pipeline_id, start_time)`` index, so their
cost grows with the spans stored in the window; that is why a search window is bounded
(:data:`MAX_WINDOW`).
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
from latencyboard.traces import ids

MAX_WINDOW: Final = dt.timedelta(hours=24)
DEFAULT_WINDOW: Final = dt.timedelta(hours=1)
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
MINUTE: Final = dt.timedelta(minutes=1)
STATUS_ERROR: Final = 2
NS_PER_MS: Final = 1_000_000


class InvalidTraceQuery(ValueError):
    """The filters cannot be answered as given; ``field`` names the parameter at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


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
        return self.duration_ns / NS_PER_MS

    @property
    def stage_duration_ms(self) -> float | None:
        return None if self.stage_duration_ns is None else self.stage_duration_ns / NS_PER_MS


@dataclass(frozen=True)
class TraceSearch:
    """Answer to :func:`search_traces`: the slowest matching traces first; ``more`` says
    whether further traces matched beyond ``filters.limit``."""

    filters: TraceFilters
    stage_name: str | None
    traces: tuple[TraceSummary, ...]
    more: bool


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
    pipelines, stage = scope(user, filters.pipeline_id, filters.stage_id)
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
    traces = tuple(summary(row, names) for row in rows[: filters.limit])
    return TraceSearch(
        filters,
        stage_name=None if stage is None else stage.name,
        traces=traces,
        more=len(rows) > filters.limit,
    )


def scope(
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


def summary(row: Sequence[Any], names: dict[int, str]) -> TraceSummary:
    """A found trace from a row of ``(trace_id, span_id, pipeline_id, name, start_time,
    duration_ns, status_code, status_message, stage_duration_ns)``; ``names`` by pipeline id."""
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
    # one pipeline's, which scope found in the user's teams, and so are its spans.
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
        params["min_ns"] = math.ceil(filters.min_ms * NS_PER_MS)
        bounds.append("duration_ns >= %(min_ns)s")
    if filters.max_ms is not None:
        params["max_ns"] = math.floor(filters.max_ms * NS_PER_MS)
        bounds.append("duration_ns <= %(max_ns)s")
    return bounds
