"""Decode OTLP trace export requests into validated, flat spans: the shared core of
the front ends.

This module is pure (stdlib and protobuf only, no Django, no I/O) so that the
HTTP view, the gRPC servicer and the tests share one implementation.

Two front ends feed one shared core (:class:`Batch`):

* protobuf (OTLP/HTTP ``application/x-protobuf`` and OTLP/gRPC): :mod:`ingest.protobuf`;
* JSON (OTLP/HTTP ``application/json``): :mod:`ingest.otlp_json`.

Validation is per span: a bad span is counted and reported through
:class:`DecodedExport` (OTLP partial success) while its valid siblings are
kept. Only a body that cannot be read at all raises :class:`DecodeError`.
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ingest.events import RawEvent, SpanEvent, cap_events, event_limits
from ingest.limits import DEFAULT_LIMITS, Converter, Limits, Sizer, cap_attributes

__all__ = [
    "DEFAULT_LIMITS",
    "DecodeError",
    "DecodedExport",
    "DecodedSpan",
    "Limits",
]


_NO_RESOURCE: Mapping[str, object] = MappingProxyType({})


class DecodedSpan(NamedTuple):
    """One span that passed validation, flattened with its resource's identity.

    ``attributes`` are the span's own; its whole attribute set is ``resource`` updated with
    them. The spans of one OTLP resource share one ``resource`` mapping (the writer stores it
    once per distinct resource).

    A NamedTuple rather than a frozen dataclass: it is built once per span on the ingest hot
    path, and constructing a tuple costs a fifth of what a slotted dataclass does.
    """

    trace_id: bytes  # 16 bytes, not all zero
    span_id: bytes  # 8 bytes, not all zero
    parent_span_id: bytes | None  # 8 bytes, or None for a root span
    name: str
    kind: int  # SpanKind value 0..5
    start_ns: int
    end_ns: int  # >= start_ns
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service_name: str  # resource service.name, "unknown_service" when absent
    environment: str  # deployment.environment.name, else deployment.environment, else ""
    stage: str | None  # span attribute "inference.stage" when a non-empty string
    attributes: dict[str, object]  # JSON-serialisable, the span's own, capped with resource's
    dropped_attributes: int  # dropped by the cap plus the SDKs' dropped_attributes_count
    resource: Mapping[str, object] = _NO_RESOURCE  # capped, without service.name
    events: tuple[SpanEvent, ...] = ()  # oldest first, capped (ingest.events)
    dropped_events: int = 0  # dropped by the cap plus the SDKs' dropped_events_count

    @property
    def all_attributes(self) -> dict[str, object]:
        """The span's whole attribute set: its resource's updated with its own."""
        return {**self.resource, **self.attributes}


@dataclass(frozen=True, slots=True)
class DecodedExport:
    """The outcome of one export request: the kept spans and what was rejected."""

    spans: list[DecodedSpan]
    rejected_spans: int
    error_message: str  # "" when nothing was rejected, else a short human summary


class DecodeError(ValueError):
    """The whole request body is unreadable; the caller answers 400 Bad Request."""


_UNKNOWN_SERVICE = "unknown_service"  # the OTel semantic conventions' fallback
_SERVICE_KEY = "service.name"
_ENVIRONMENT_KEYS = ("deployment.environment.name", "deployment.environment")
_STAGE_KEY = "inference.stage"
_MAX_KIND = max(Span.SpanKind.values())
_MAX_STATUS = max(Status.StatusCode.values())
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)

# A resource reduced once per ResourceSpans rather than once per span: (service_name,
# environment, capped attributes, attributes dropped so far, their byte-budget cost).
Resource = tuple[str, str, dict[str, object], int, int]


# --- shared core -------------------------------------------------------------------------------
#
# Batch, reduce_resource and the Resource type are public for the JSON front end
# (ingest.otlp_json) only, hence not in __all__.


def _column_text(text: str, max_len: int) -> str:
    """A string bound for a text column: truncated, NUL (which PostgreSQL text cannot hold)
    replaced by U+FFFD. Attribute values keep their NULs; the row encoder escapes them."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text if len(text) <= max_len else text[:max_len]


def reduce_resource(
    raw: dict[str, Any], sdk_dropped: int, limits: Limits, convert: Converter, measure: Sizer
) -> Resource:
    """Pull service and environment out of raw resource attributes, cap the rest."""
    service = raw.pop(_SERVICE_KEY, None)
    service = None if service is None else convert(service, limits, 0)
    environment = ""
    for key in _ENVIRONMENT_KEYS:
        if key in raw:
            value = convert(raw[key], limits, 0)
            if isinstance(value, str) and value:
                environment = _column_text(value, 255)
                break
    attributes, dropped, size = cap_attributes(raw, {}, 0, limits, convert, measure)
    service_name = (
        _column_text(service, 255) if isinstance(service, str) and service else _UNKNOWN_SERVICE
    )
    return service_name, environment, attributes, dropped + sdk_dropped, size


class Batch:
    """Validates spans and accumulates the kept ones and the rejection reasons."""

    __slots__ = ("event_limits", "limits", "max_end", "max_len", "min_start", "rejects", "spans")

    def __init__(self, now_ns: int, limits: Limits) -> None:
        self.limits = limits
        self.event_limits = event_limits(limits)
        self.max_len = limits.max_value_length
        self.min_start = now_ns - limits.max_age_ns
        self.max_end = now_ns + limits.max_future_ns
        self.spans: list[DecodedSpan] = []
        self.rejects: Counter[str] = Counter()

    def add(
        self,
        resource: Resource,
        trace_id: bytes,
        span_id: bytes,
        parent: bytes,
        name: str,
        kind: int,
        start: int,
        end: int,
        status_code: int,
        status_message: str,
        raw_attributes: dict[str, Any],
        convert: Converter,
        measure: Sizer,
        sdk_dropped: int,
        raw_events: Sequence[RawEvent] = (),
        sdk_dropped_events: int = 0,
    ) -> None:
        """Keep the span, or count why it is rejected.

        Unknown SpanKind / StatusCode numbers become 0 (unspecified / unset); the
        name and status message are truncated like attribute strings.
        """
        reason = self.invalid(trace_id, span_id, parent, start, end)
        if reason is not None:
            self.reject(reason)
            return
        max_len = self.max_len
        attributes, dropped, stage = self.attributes(resource, raw_attributes, convert, measure)
        events, dropped_events = (
            cap_events(raw_events, sdk_dropped_events, self.event_limits, convert, measure)
            if raw_events or sdk_dropped_events
            else ((), 0)
        )
        self.spans.append(
            DecodedSpan(
                trace_id,
                span_id,
                # An empty or all-zero (W3C "invalid") parent id means a root span.
                None if not parent or parent == _ZERO_SPAN_ID else parent,
                _column_text(name, max_len),
                kind if 0 <= kind <= _MAX_KIND else 0,
                start,
                end,
                status_code if 0 <= status_code <= _MAX_STATUS else 0,
                _column_text(status_message, max_len),
                resource[0],
                resource[1],
                stage,
                attributes,
                dropped + sdk_dropped,
                resource[2],
                events,
                dropped_events,
            )
        )

    def reject(self, reason: str) -> None:
        """Count a span the front end rejected before it could be added."""
        self.rejects[reason] += 1

    def invalid(
        self, trace_id: bytes, span_id: bytes, parent: bytes, start: int, end: int
    ) -> str | None:
        if len(trace_id) != 16:
            return "invalid trace_id length"
        if trace_id == _ZERO_TRACE_ID:
            return "zero trace_id"
        if len(span_id) != 8:
            return "invalid span_id length"
        if span_id == _ZERO_SPAN_ID:
            return "zero span_id"
        if parent and len(parent) != 8:
            return "invalid parent_span_id length"
        if start == 0:
            return "missing start time"
        if end < start:
            return "end before start"
        if end > self.max_end:
            return "end too far in the future"
        if start < self.min_start:
            return "start older than retention"
        return None

    def attributes(
        self, resource: Resource, raw: Mapping[str, Any], convert: Converter, measure: Sizer
    ) -> tuple[dict[str, object], int, str | None]:
        """The span's own attributes, capped together with the resource's: (attributes,
        dropped, stage)."""
        attributes, dropped, _ = cap_attributes(
            raw, resource[2], resource[4], self.limits, convert, measure
        )
        # The stage is a column of its own, so the caps must not hide it.
        stage = convert(raw[_STAGE_KEY], self.limits, 0) if _STAGE_KEY in raw else None
        return (
            attributes,
            dropped + resource[3],
            _column_text(stage, self.max_len) if isinstance(stage, str) and stage else None,
        )

    def result(self) -> DecodedExport:
        """Freeze the batch into the export outcome, with the partial-success summary."""
        total = sum(self.rejects.values())
        if not total:
            return DecodedExport(self.spans, 0, "")
        reasons = ", ".join(f"{count} {reason}" for reason, count in self.rejects.most_common())
        noun = "span" if total == 1 else "spans"
        return DecodedExport(self.spans, total, f"{total} {noun} rejected: {reasons}")
