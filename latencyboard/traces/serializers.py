"""Parameters and JSON shapes of the traces API (ids in hex, as OpenTelemetry shows them)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Final

from rest_framework import serializers

from latencyboard import bounds
from latencyboard.moments import iso_utc
from latencyboard.pipelines.mapping import END_TO_END, MAX_STAGE_NAME
from latencyboard.storage.span_events import StoredEvent
from latencyboard.traces import ids
from latencyboard.traces.exemplar_queries import EXEMPLAR_COUNT, Exemplars
from latencyboard.traces.queries import (
    DEFAULT_LIMIT,
    DEFAULT_WINDOW,
    MAX_LIMIT,
    MAX_WINDOW,
    MINUTE,
    AttributeFilter,
    TraceSearch,
    TraceSummary,
)
from latencyboard.traces.waterfall_queries import TraceWaterfall

DEFAULT_QUANTILE: Final = 0.99
MAX_EXEMPLARS: Final = 20
KIND_NAMES: Final = {
    0: "unspecified",
    1: "internal",
    2: "server",
    3: "client",
    4: "producer",
    5: "consumer",
}
STATUS_NAMES: Final = {0: "unset", 1: "ok", 2: "error"}
_NEAR = re.compile(r"p(\d{1,2}(?:\.\d{1,4})?)")
_STAGE_ID = re.compile(r"\d{1,18}")  # fits a bigint, so a typo cannot overflow the query
_WINDOW_HOURS: Final = MAX_WINDOW // dt.timedelta(hours=1)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class TraceSearchQuerySerializer(serializers.Serializer):
    """Query parameters of ``GET /api/traces/``; validated data are ``TraceFilters`` keyword
    arguments. Needs ``now`` in the context for the default window."""

    pipeline = serializers.IntegerField(
        required=False, min_value=1, help_text="Pipeline id. Default: all of your pipelines."
    )
    stage = serializers.CharField(
        required=False,
        help_text="Stage id, or name with pipeline: only traces having a span of this stage; "
        "min_ms/max_ms then "
        f"bound that span's duration. `{END_TO_END}` (the root spans) is the same as "
        "no stage.",
    )
    start = bounds.MomentField(
        required=False,
        help_text="Earliest root span start, ISO 8601 (UTC unless an offset is given). "
        f"Default with end: the last {DEFAULT_WINDOW // dt.timedelta(hours=1)} h.",
    )
    end = bounds.MomentField(
        required=False,
        help_text=f"Root spans starting before this. At most {_WINDOW_HOURS} h after start.",
    )
    window = bounds.DurationTextField(
        required=False,
        help_text="Instead of start and end: the window ending now, like 15m, 1h or 24h "
        "(whole minutes, in the series endpoints' syntax).",
    )
    min_ms = bounds.MillisecondsField(
        required=False, help_text="Shortest duration in ms (inclusive)."
    )
    max_ms = bounds.MillisecondsField(
        required=False, help_text="Longest duration in ms (inclusive)."
    )
    status = serializers.ChoiceField(
        choices=["error", "ok"],
        required=False,
        help_text="The root span's status: error, or anything else (ok, unset).",
    )
    attr = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="key:value the root span's attributes must hold, like model.version:v8; "
        "repeat for several (all must hold). Numbers and true/false also match typed values.",
    )
    limit = serializers.IntegerField(
        default=DEFAULT_LIMIT, min_value=1, max_value=MAX_LIMIT, help_text="Traces to return."
    )

    def validate_stage(self, value: str) -> int | str | None:
        return _stage(value)

    def validate_attr(self, value: list[str]) -> tuple[AttributeFilter, ...]:
        filters = []
        for text in filter(str.strip, value):  # a form's empty field is no filter
            key, colon, wanted = text.partition(":")
            if not colon or not key.strip():
                raise serializers.ValidationError(f"'{text}' is not key:value.")
            filters.append(AttributeFilter(key.strip(), wanted.strip()))
        return tuple(filters)

    def validate_window(self, value: dt.timedelta) -> dt.timedelta:
        return _minutes(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        window = attrs.get("window")
        now: dt.datetime = self.context["now"]
        start, end = bounds.given_window(attrs, window=window is not None) or (
            now - (window or DEFAULT_WINDOW),
            now,
        )
        return {
            "start": start.astimezone(dt.UTC),
            "end": end.astimezone(dt.UTC),
            "pipeline_id": attrs.get("pipeline"),
            "stage_id": attrs.get("stage"),
            "min_ms": attrs.get("min_ms"),
            "max_ms": attrs.get("max_ms"),
            "status": attrs.get("status"),
            "attributes": attrs.get("attr", ()),
            "limit": attrs["limit"],
        }


class ExemplarQuerySerializer(serializers.Serializer):
    """Query parameters of ``GET /api/traces/exemplars/``; validated data are
    ``trace_exemplars`` keyword arguments."""

    pipeline = serializers.IntegerField(min_value=1, help_text="Pipeline id.")
    stage = serializers.CharField(
        default=END_TO_END,
        help_text=f"Stage id or name, or `{END_TO_END}` for the root spans (end to end).",
    )
    minute = bounds.MomentField(
        help_text="The minute, ISO 8601; seconds are dropped (UTC unless an offset is given). "
        "With step: the first minute of the bucket."
    )
    step = bounds.DurationTextField(
        default=MINUTE,
        help_text="The bucket's length from minute, as the percentile charts step: 1m, 15m, "
        f"1h, 900… Whole minutes, at most {_WINDOW_HOURS}h.",
    )
    quantile = serializers.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        help_text=f"The quantile to be near, in [0, 1]. Default {DEFAULT_QUANTILE}.",
    )
    near = serializers.CharField(
        required=False,
        help_text="Instead of quantile, as the charts name it: p50, p99, p99.9…",
    )
    count = serializers.IntegerField(
        default=EXEMPLAR_COUNT, min_value=1, max_value=MAX_EXEMPLARS, help_text="Traces."
    )

    def validate_stage(self, value: str) -> int | str | None:
        return _stage(value)

    def validate_step(self, value: dt.timedelta) -> dt.timedelta:
        return _minutes(value)

    def validate_near(self, value: str) -> float:
        match = _NEAR.fullmatch(value)
        if match is None:
            raise serializers.ValidationError("Use a percentile like p50, p99 or p99.9.")
        return float(match[1]) / 100

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "near" in attrs and "quantile" in attrs:
            raise serializers.ValidationError({"near": ["Give near or quantile, not both."]})
        return {
            "pipeline_id": attrs["pipeline"],
            "stage_id": attrs["stage"],
            "minute": attrs["minute"],
            "quantile": attrs.get("near", attrs.get("quantile", DEFAULT_QUANTILE)),
            "count": attrs["count"],
            "width": attrs["step"],
        }


def _minutes(value: dt.timedelta) -> dt.timedelta:
    """``value`` (read by :class:`bounds.DurationTextField`) when it is whole minutes, from
    one minute to ``MAX_WINDOW``."""
    if not MINUTE <= value <= MAX_WINDOW or value % MINUTE:
        raise serializers.ValidationError(f"Whole minutes from 1m to {_WINDOW_HOURS}h.")
    return value


def _stage(value: str) -> int | str | None:
    """A stage id, a stage name, or None for the end-to-end latency (the root spans)."""
    if value == END_TO_END:
        return None
    if _STAGE_ID.fullmatch(value):
        return int(value)
    if not 0 < len(value) <= MAX_STAGE_NAME:
        raise serializers.ValidationError(
            f"'{value[:MAX_STAGE_NAME]}' is neither a stage id, a stage name nor {END_TO_END}."
        )
    return value


# The response serializers only document the shapes; the *_data functions render them, as
# plain dicts are several times faster than serializer fields for a waterfall of thousands of
# spans. test_rendered_keys_are_the_documented_ones keeps the two in step.
class _RefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class TraceSummarySerializer(serializers.Serializer):
    """A trace found, by the span it was found by (its root span in a search)."""

    trace_id = serializers.CharField(help_text="32 hex characters.")
    span_id = serializers.CharField(help_text="16 hex characters.")
    pipeline = _RefSerializer()
    name = serializers.CharField(help_text="Span name.")
    start_time = serializers.DateTimeField()
    duration_ms = serializers.FloatField()
    status = serializers.ChoiceField(choices=["error", "ok"])
    status_message = serializers.CharField()
    stage_duration_ms = serializers.FloatField(
        allow_null=True,
        help_text="With a stage filter: the trace's longest span of that stage (within the "
        "duration bounds); else null.",
    )


class TraceSearchSerializer(serializers.Serializer):
    """Root spans matching the filters, slowest first."""

    start = serializers.DateTimeField(help_text="The window searched (root span starts).")
    end = serializers.DateTimeField()
    limit = serializers.IntegerField()
    more = serializers.BooleanField(help_text="Whether more traces matched than returned.")
    traces = TraceSummarySerializer(many=True)


class ExemplarsSerializer(serializers.Serializer):
    """Traces of one minute (or one chart bucket) nearest to its exact quantile."""

    pipeline = _RefSerializer()
    stage = _RefSerializer(allow_null=True, help_text="Null: end to end (root spans).")
    minute = serializers.DateTimeField(help_text="Start of the period.")
    end = serializers.DateTimeField(help_text="End of the period (exclusive): minute + step.")
    quantile = serializers.FloatField()
    n = serializers.IntegerField(help_text="Spans of the period the quantile is taken over.")
    quantile_ms = serializers.FloatField(
        allow_null=True,
        help_text="Exact: the order statistic of rank floor(quantile * (n - 1)); null when n is 0.",
    )
    traces = TraceSummarySerializer(
        many=True, help_text="Nearest first; the span is the root or the stage's span."
    )


class SpanEventSerializer(serializers.Serializer):
    """One event of a span (``span.add_event``, ``span.record_exception``, Triton's
    ``QUEUE_START``…), oldest first."""

    name = serializers.CharField(help_text="`exception` for a recorded exception.")
    time = serializers.DateTimeField(help_text="When it happened (to the microsecond).")
    time_unix_nano = serializers.CharField(help_text="The same, exact, as sent: a decimal.")
    offset_ms = serializers.FloatField(help_text="After the trace's start.")
    attributes = serializers.DictField(
        help_text="An exception has exception.type, exception.message, exception.stacktrace."
    )
    dropped_attributes_count = serializers.IntegerField(
        help_text="Attributes it lacks: past ingest's cap or dropped by the sending SDK."
    )


class DerivedSerializer(serializers.Serializer):
    read_from = serializers.CharField(
        help_text="Where it was read from, like `attribute gen_ai.latency.time_in_queue (s)` "
        "or `events QUEUE_START → COMPUTE_START`."
    )


class MeasureSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="time_to_first_token, time_per_output_token.")
    ms = serializers.FloatField()
    definition = serializers.CharField(help_text="What the figure counts, by its source.")


class WaterfallSpanSerializer(serializers.Serializer):
    """One span in waterfall order (depth first, siblings by start time)."""

    span_id = serializers.CharField(help_text="16 hex characters.")
    parent_span_id = serializers.CharField(allow_null=True)
    parent_index = serializers.IntegerField(
        allow_null=True,
        help_text="Position in spans of the span this one is drawn under; null at the top.",
    )
    depth = serializers.IntegerField()
    name = serializers.CharField()
    stage = serializers.CharField()
    pipeline = _RefSerializer()
    kind = serializers.ChoiceField(choices=sorted(KIND_NAMES.values()))
    status = serializers.ChoiceField(choices=sorted(STATUS_NAMES.values()))
    status_message = serializers.CharField()
    start_time = serializers.DateTimeField()
    offset_ms = serializers.FloatField(help_text="Start after the trace's start.")
    duration_ms = serializers.FloatField()
    self_ms = serializers.FloatField(
        help_text="Duration minus the union of its children's intervals, clipped to it."
    )
    is_root = serializers.BooleanField(help_text="A pipeline's root span (end to end).")
    critical = serializers.BooleanField(help_text="On the critical path.")
    critical_ms = serializers.FloatField(
        help_text="Time of the critical path spent in this span itself (not in a child)."
    )
    orphan = serializers.BooleanField(help_text="Its parent was not received.")
    attributes = serializers.DictField()
    events = SpanEventSerializer(many=True)
    derived = DerivedSerializer(
        allow_null=True,
        help_text="A stage ingest derived from its parent's attributes or events (not a span "
        "anyone sent); null for a sent span.",
    )
    measures = MeasureSerializer(
        many=True, help_text="LLM figures read from this span, which overlap its stages."
    )
    dropped_events_count = serializers.IntegerField(
        help_text="Events the span lacks: past ingest's cap (the newest are kept) or dropped "
        "by the sending SDK."
    )


class TraceWaterfallSerializer(serializers.Serializer):
    """Every span of a trace, nested, with self time and the critical path."""

    trace_id = serializers.CharField(help_text="32 hex characters.")
    start_time = serializers.DateTimeField(help_text="The earliest span's start.")
    duration_ms = serializers.FloatField(help_text="Earliest start to latest end.")
    span_count = serializers.IntegerField()
    truncated = serializers.BooleanField(
        help_text="More spans are stored than returned (the earliest-starting are)."
    )
    critical_path = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="Positions in spans of the spans on the critical path, root first. Walking "
        "back from a span's end: the child that finishes last, then the last child that "
        "finishes before that one starts, and so on, into each chosen child; children are "
        "clamped to their parent's interval. The spans' critical_ms sum to the root's duration.",
    )
    spans = WaterfallSpanSerializer(many=True)


def trace_search_data(result: TraceSearch) -> dict[str, Any]:
    """The JSON body for ``result``, in the shape :class:`TraceSearchSerializer` shows."""
    return {
        "start": iso_utc(result.filters.start),
        "end": iso_utc(result.filters.end),
        "limit": result.filters.limit,
        "more": result.more,
        "traces": [trace_summary_data(trace) for trace in result.traces],
    }


def exemplars_data(result: Exemplars) -> dict[str, Any]:
    """The JSON body for ``result``, in the shape :class:`ExemplarsSerializer` shows."""
    return {
        "pipeline": {"id": result.pipeline_id, "name": result.pipeline_name},
        "stage": None
        if result.stage_id is None
        else {"id": result.stage_id, "name": result.stage_name},
        "minute": iso_utc(result.minute),
        "end": iso_utc(result.minute_end),
        "quantile": result.quantile,
        "n": result.n,
        "quantile_ms": result.quantile_ms,
        "traces": [trace_summary_data(trace) for trace in result.traces],
    }


def trace_summary_data(trace: TraceSummary) -> dict[str, Any]:
    return {
        "trace_id": trace.trace_hex,
        "span_id": trace.span_hex,
        "pipeline": {"id": trace.pipeline_id, "name": trace.pipeline_name},
        "name": trace.name,
        "start_time": iso_utc(trace.start_time),
        "duration_ms": trace.duration_ms,
        "status": "error" if trace.is_error else "ok",
        "status_message": trace.status_message,
        "stage_duration_ms": trace.stage_duration_ms,
    }


def trace_waterfall_data(result: TraceWaterfall) -> dict[str, Any]:
    """The JSON body for ``result``, in the shape :class:`TraceWaterfallSerializer` shows."""
    rows = result.waterfall.rows
    start_ns = result.waterfall.start_ns
    position = {row.index: number for number, row in enumerate(rows)}
    spans = []
    for row in rows:
        span = result.spans[row.index]
        spans.append(
            {
                "span_id": ids.span_hex(span.span_id),
                "parent_span_id": None
                if span.parent_span_id is None
                else ids.span_hex(span.parent_span_id),
                "parent_index": None if row.parent is None else position[row.parent],
                "depth": row.depth,
                "name": span.name,
                "stage": span.stage_name,
                "pipeline": {"id": span.pipeline_id, "name": span.pipeline_name},
                "kind": KIND_NAMES.get(span.kind, str(span.kind)),
                "status": STATUS_NAMES.get(span.status_code, str(span.status_code)),
                "status_message": span.status_message,
                "start_time": iso_utc(span.start_time),
                "offset_ms": row.offset_ns / 1e6,
                "duration_ms": row.duration_ns / 1e6,
                "self_ms": row.self_ns / 1e6,
                "is_root": span.is_root,
                "critical": row.critical,
                "critical_ms": row.critical_ns / 1e6,
                "orphan": row.orphan,
                "attributes": span.attributes,
                "events": [_event_data(event, start_ns) for event in span.events],
                "derived": {"read_from": span.derived_from} if span.derived_from else None,
                "measures": [
                    {"name": m.name, "ms": m.duration_ns / 1e6, "definition": m.definition}
                    for m in span.measures
                ],
                "dropped_events_count": span.dropped_events,
            }
        )
    return {
        "trace_id": ids.trace_hex(result.trace_id),
        "start_time": iso_utc(result.start_time),
        "duration_ms": result.waterfall.duration_ns / 1e6,
        "span_count": len(spans),
        "truncated": result.truncated,
        "critical_path": [position[index] for index in result.waterfall.critical_path],
        "spans": spans,
    }


def _event_data(event: StoredEvent, trace_start_ns: int) -> dict[str, Any]:
    return {
        "name": event.name,
        "time": iso_utc(_EPOCH + dt.timedelta(microseconds=event.time_unix_nano // 1000)),
        "time_unix_nano": str(event.time_unix_nano),
        "offset_ms": (event.time_unix_nano - trace_start_ns) / 1e6,
        "attributes": event.attributes,
        "dropped_attributes_count": event.dropped_attributes,
    }
