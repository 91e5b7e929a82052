"""Parameters and JSON shapes of the traces API (ids in hex, as OpenTelemetry shows them)."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any, Final

from rest_framework import serializers

from latencyboard import bounds
from latencyboard.moments import iso_utc
from latencyboard.pipelines.mapping import END_TO_END, MAX_STAGE_NAME
from latencyboard.traces.exemplar_queries import EXEMPLAR_COUNT, Exemplars
from latencyboard.traces.queries import (
    DEFAULT_LIMIT,
    DEFAULT_WINDOW,
    MAX_LIMIT,
    AttributeFilter,
    TraceSearch,
    TraceSummary,
)
from latencyboard.windows import HOUR, MAX_TRACE_SEARCH_WINDOW, MINUTE

DEFAULT_QUANTILE: Final = 0.99
MAX_EXEMPLARS: Final = 20
_NEAR = re.compile(r"p(\d{1,2}(?:\.\d{1,4})?)")
_STAGE_ID = re.compile(r"\d{1,18}")  # fits a bigint, so a typo cannot overflow the query
_WINDOW_HOURS: Final = MAX_TRACE_SEARCH_WINDOW // HOUR


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
        f"Default with end: the last {DEFAULT_WINDOW // HOUR} h.",
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
    one minute to ``MAX_TRACE_SEARCH_WINDOW``."""
    if not MINUTE <= value <= MAX_TRACE_SEARCH_WINDOW or value % MINUTE:
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
class RefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()


class TraceSummarySerializer(serializers.Serializer):
    """A trace found, by the span it was found by (its root span in a search)."""

    trace_id = serializers.CharField(help_text="32 hex characters.")
    span_id = serializers.CharField(help_text="16 hex characters.")
    pipeline = RefSerializer()
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

    pipeline = RefSerializer()
    stage = RefSerializer(allow_null=True, help_text="Null: end to end (root spans).")
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
