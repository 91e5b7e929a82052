"""Trace search, scoped to the user's teams, and what the other reads of traces share.

Pipelines and stages of teams the user is not in do not exist here: asking for them raises
``Pipeline.DoesNotExist`` or ``Stage.DoesNotExist``, exactly as for ids that exist nowhere.
:func:`scope` says so once for the search and for exemplars
(``latencyboard.traces.exemplar_queries``); one trace's waterfall is read in
``latencyboard.traces.waterfall_queries``.

Search and exemplars read raw spans (``latencyboard.storage.span_reads``) through the
``(pipeline_id, start_time)`` index, so their cost grows with the spans stored in the window;
that is why a search window is bounded
(:data:`~latencyboard.windows.MAX_TRACE_SEARCH_WINDOW`).
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

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.storage import span_reads
from latencyboard.traces import ids
from latencyboard.windows import HOUR, MAX_TRACE_SEARCH_WINDOW

DEFAULT_WINDOW: Final = dt.timedelta(hours=1)
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
STATUS_ERROR: Final = span_reads.STATUS_ERROR
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
    stage_id: int | str | None = None  # an id, or a name of the pipeline's
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
    return list(Pipeline.objects.visible_to(user).select_related("team").prefetch_related("stages"))


def search_traces(user: User | AnonymousUser, filters: TraceFilters) -> TraceSearch:
    """The slowest root spans (end-to-end requests) of the user's pipelines matching
    ``filters``, slowest first (ties: earlier start, then lower trace id).

    Raises ``Pipeline.DoesNotExist``/``Stage.DoesNotExist`` for a pipeline or stage not in
    the user's teams, and :class:`InvalidTraceQuery` for a window that is empty or longer
    than :data:`~latencyboard.windows.MAX_TRACE_SEARCH_WINDOW`, duration bounds the wrong way
    round, a limit out of range, or a stage of another pipeline than the one given.
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
    rows = span_reads.search(
        span_reads.SpanSearch(
            pipeline_ids=[pipeline.pk for pipeline in pipelines],
            team_ids=sorted({pipeline.team_id for pipeline in pipelines}),
            start=filters.start,
            end=filters.end,
            late_end=filters.end + MAX_TRACE_SEARCH_WINDOW,
            stage_id=None if stage is None else stage.pk,
            min_ns=None if low is None else math.ceil(low * NS_PER_MS),
            max_ns=None if high is None else math.floor(high * NS_PER_MS),
            status=filters.status,
            attributes=[attribute.documents() for attribute in filters.attributes],
            limit=filters.limit + 1,
        )
    )
    names = {pipeline.pk: str(pipeline) for pipeline in pipelines}
    traces = tuple(summary(row, names) for row in rows[: filters.limit])
    return TraceSearch(
        filters,
        stage_name=None if stage is None else stage.name,
        traces=traces,
        more=len(rows) > filters.limit,
    )


def scope(
    user: User | AnonymousUser, pipeline_id: int | None, stage_id: int | str | None
) -> tuple[list[Pipeline], Stage | None]:
    """The pipelines to read (the one asked for, the stage's, or all of the user's) and the
    stage, by id or (of the pipeline asked for) by name; raises DoesNotExist for either
    outside the user's teams."""
    mine = Pipeline.objects.visible_to(user)
    pipeline = None if pipeline_id is None else mine.get(pk=pipeline_id)
    stages = Stage.objects.visible_to(user).select_related("pipeline")
    if isinstance(stage_id, str):
        if pipeline is None:
            raise InvalidTraceQuery("stage", "Name the pipeline to choose a stage by name.")
        found = stages.filter(pipeline=pipeline, name=stage_id).first()
        if found is None:
            raise InvalidTraceQuery("stage", f"No stage {stage_id} in this pipeline.")
        return [pipeline], found
    stage = None if stage_id is None else stages.get(pk=stage_id)
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
    if end - start > MAX_TRACE_SEARCH_WINDOW:
        hours = MAX_TRACE_SEARCH_WINDOW // HOUR
        raise InvalidTraceQuery(
            "end",
            f"At most {hours} h per search: traces are searched in raw spans, so a window "
            "is kept short. Narrow it, or read percentiles for longer periods.",
        )
