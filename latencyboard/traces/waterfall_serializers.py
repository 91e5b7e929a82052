"""JSON shape of one trace's waterfall: its spans, their events, derived stages and LLM
measures (ids in hex, as OpenTelemetry shows them)."""

from __future__ import annotations

from typing import Any, Final

from rest_framework import serializers

from latencyboard.moments import iso_utc
from latencyboard.storage.span_events import StoredEvent
from latencyboard.traces import ids
from latencyboard.traces.serializers import RefSerializer
from latencyboard.traces.waterfall_queries import TraceWaterfall
from latencyboard.windows import from_unix_ns

KIND_NAMES: Final = {
    0: "unspecified",
    1: "internal",
    2: "server",
    3: "client",
    4: "producer",
    5: "consumer",
}
STATUS_NAMES: Final = {0: "unset", 1: "ok", 2: "error"}


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
    pipeline = RefSerializer()
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
        "time": iso_utc(from_unix_ns(event.time_unix_nano)),
        "time_unix_nano": str(event.time_unix_nano),
        "offset_ms": (event.time_unix_nano - trace_start_ns) / 1e6,
        "attributes": event.attributes,
        "dropped_attributes_count": event.dropped_attributes,
    }
