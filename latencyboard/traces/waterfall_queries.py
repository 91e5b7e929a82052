"""One trace's waterfall, read for the user's teams.

A trace of teams the user is not in does not exist here: asking for it raises
:class:`TraceNotFound`, exactly as for a trace id that exists nowhere. A trace is read through
the primary key ``(team_id, trace_id, …)``, one index probe per day partition; the nesting, self
times and critical path are the pure ``latencyboard.traces.waterfall``'s.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.pipelines.derivation import DERIVED_ATTRIBUTE, MEASURE_ATTRIBUTE
from latencyboard.pipelines.models import Pipeline
from latencyboard.storage import span_events, span_reads
from latencyboard.teams.queries import teams_of
from latencyboard.traces import waterfall
from latencyboard.windows import unix_ns

MAX_TRACE_SPANS: Final = 10_000


class TraceNotFound(LookupError):
    """No span of this trace is stored for any of the user's teams."""


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
    events: tuple[span_events.StoredEvent, ...] = ()  # oldest first
    dropped_events: int = 0  # the span lacks these: cut by ingest's cap or by its SDK
    derived_from: str = ""  # a derived stage: where ingest read it from; else empty
    measures: tuple[TraceMeasure, ...] = ()  # LLM figures ingest read from this span


@dataclass(frozen=True)
class TraceMeasure:
    """An LLM figure of a span (time to first token…), as ingest stored it: a row under the
    span whose duration is the figure, with its source's definition."""

    name: str
    duration_ns: int
    definition: str


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


def trace_waterfall(user: User | AnonymousUser, trace_id: uuid.UUID) -> TraceWaterfall:
    """Every span of the trace stored for the user's teams, and its waterfall.

    Raises :class:`TraceNotFound` when there is none (whether the trace belongs to another
    team or to nobody).
    """
    team_ids = list(teams_of(user).values_list("pk", flat=True))
    rows = span_reads.trace_spans(team_ids, trace_id, MAX_TRACE_SPANS + 1)
    if not rows:
        raise TraceNotFound(trace_id)
    pipelines = Pipeline.objects.in_bulk({row[4] for row in rows})
    events = span_events.trace_events(
        team_ids, trace_id, [row[0] for row in rows[:MAX_TRACE_SPANS]]
    )
    no_events = span_events.SpanEvents((), 0)
    measures: dict[int, list[TraceMeasure]] = {}
    spans = []
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
        text,
    ) in rows[:MAX_TRACE_SPANS]:
        # Django has psycopg load jsonb as text (JSONField decodes it itself).
        attributes = json.loads(text)
        if MEASURE_ATTRIBUTE in attributes and parent is not None:
            # A figure of its parent that overlaps its stages, not a step of the request.
            definition = str(attributes[MEASURE_ATTRIBUTE])
            measures.setdefault(parent, []).append(TraceMeasure(name, duration_ns, definition))
            continue
        stored = events.get(span_id, no_events)
        spans.append(
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
                attributes=attributes,
                events=stored.events,
                dropped_events=stored.dropped_events,
                derived_from=str(attributes.get(DERIVED_ATTRIBUTE, "")),
            )
        )
    spans = [
        dataclasses.replace(span, measures=tuple(measures[span.span_id]))
        if span.span_id in measures
        else span
        for span in spans
    ]
    timings = [
        waterfall.SpanTiming(
            span.span_id, span.parent_span_id, unix_ns(span.start_time), span.duration_ns
        )
        for span in spans
    ]
    return TraceWaterfall(
        trace_id=trace_id,
        spans=tuple(spans),
        waterfall=waterfall.build(timings),
        truncated=len(rows) > MAX_TRACE_SPANS,
    )
