"""Decode OTLP trace export requests into validated, flat spans: the shared core and the
protobuf front end.

This module is pure (stdlib and protobuf only, no Django, no I/O) so that the
HTTP view, the gRPC servicer and the tests share one implementation.

Two front ends feed one shared core (:class:`Batch`):

* protobuf (OTLP/HTTP ``application/x-protobuf`` and OTLP/gRPC), here: the body is
  parsed by the C (upb) protobuf runtime into :mod:`ingest.wire`'s messages and walked by
  :func:`decode_protobuf`;
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

from google.protobuf.message import DecodeError as _ProtobufDecodeError
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ingest import wire
from ingest.events import RawEvent, SpanEvent, cap_events, event_limits, from_protobuf
from ingest.limits import DEFAULT_LIMITS, Converter, Limits, Sizer, cap_attributes
from ingest.values import COMPOUND, pb_member, pb_size, pb_value

__all__ = [
    "DEFAULT_LIMITS",
    "DecodeError",
    "DecodedExport",
    "DecodedSpan",
    "Limits",
    "decode_protobuf",
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


# --- protobuf ----------------------------------------------------------------------------------

# What a distinct attribute or span name converts to is learnt once per process and looked up
# by its wire bytes after that; only short ones are kept (the repeating kind), and the table
# starts over when full, so its memory stays bounded.
_CACHED_BYTES = 256
_CACHED_ENTRIES = 16_384
# An attribute the common path leaves to the capping path (an array or a key-value list).
_COMPOUND_COST = 1 << 62
_SpanAttribute = tuple[str, object, int]  # key, converted value, byte-budget cost


class _Learnt:
    """Conversions under one :class:`Limits`: attribute bytes to (key, value, cost) and span
    name bytes to the name's column text."""

    __slots__ = ("attributes", "limits", "names")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.attributes: dict[bytes, _SpanAttribute] = {}
        self.names: dict[bytes, str] = {}

    def attribute(self, raw: bytes) -> _SpanAttribute:
        """Convert one attribute's ``KeyValue`` bytes (raises ``DecodeError``)."""
        pair = wire.key_value(raw)
        key, value = pair.key, pair.value
        text = value.string_value
        if text:
            text = text[: self.limits.max_value_length]
            found: _SpanAttribute = (key, text, len(key) + len(text))
        else:
            kind = value.WhichOneof("value")
            if kind in COMPOUND:
                found = (key, None, _COMPOUND_COST)
            else:
                found = (key, pb_member(value, kind, self.limits, 0), len(key) + 8)
        if len(raw) <= _CACHED_BYTES:
            if len(self.attributes) >= _CACHED_ENTRIES:
                self.attributes.clear()
            self.attributes[raw] = found
        return found

    def name(self, raw: bytes) -> str:
        name = _column_text(raw.decode("utf-8", "replace"), self.limits.max_value_length)
        if len(raw) <= _CACHED_BYTES:
            if len(self.names) >= _CACHED_ENTRIES:
                self.names.clear()
            self.names[raw] = name
        return name


_LEARNT: dict[Limits, _Learnt] = {}


def _learnt(limits: Limits) -> _Learnt:
    found = _LEARNT.get(limits)
    if found is None:
        found = _LEARNT[limits] = _Learnt(limits)
    return found


def _key_values(raw: Sequence[bytes]) -> dict[str, Any]:
    """Attributes as a mapping of key to ``AnyValue``, for the capping path."""
    return {pair.key: pair.value for pair in map(wire.key_value, raw)}


def decode_protobuf(body: bytes, *, now_ns: int, limits: Limits = DEFAULT_LIMITS) -> DecodedExport:
    """Decode and validate a binary protobuf ``ExportTraceServiceRequest`` (the body of an
    OTLP/HTTP export, the message of an OTLP/gRPC one).

    ``now_ns`` is the receive time in Unix nanoseconds: spans ending after
    ``now_ns + limits.max_future_ns`` or starting before ``now_ns - limits.max_age_ns``
    are rejected, like spans with malformed ids, times or attributes. Invalid UTF-8 in a
    string becomes U+FFFD. Raises :class:`DecodeError` when the body is not a valid message
    (truncated, wrong wire types, a malformed resource).

    This loop is the ingest server's hottest code, so it does inline what
    :meth:`Batch.add` does for the JSON front end: every field read from a upb message
    allocates a Python object, and each avoided call or intermediate dict is measurable per
    span. Attributes arrive as their wire bytes (:mod:`ingest.wire`) and each distinct one
    is converted once.
    """
    try:
        request = wire.ExportRequest.FromString(body)
    except _ProtobufDecodeError as exc:
        raise DecodeError(f"invalid protobuf ExportTraceServiceRequest: {exc}") from None
    batch = Batch(now_ns, limits)
    keep = batch.spans.append
    learnt = _learnt(limits)
    known = learnt.attributes.get
    learn = learnt.attribute
    known_name = learnt.names.get
    max_len = limits.max_value_length
    max_bytes = limits.max_attribute_bytes
    min_start, max_end = batch.min_start, batch.max_end
    for resource_spans in request.resource_spans:
        pb_resource = resource_spans.resource
        try:
            raw_resource = _key_values(pb_resource.attributes)
        except _ProtobufDecodeError as exc:
            raise DecodeError(f"invalid protobuf resource attribute: {exc}") from None
        resource = reduce_resource(
            raw_resource, pb_resource.dropped_attributes_count, limits, pb_value, pb_size
        )
        service, environment, resource_attributes, resource_dropped, resource_size = resource
        free = limits.max_attributes - len(resource_attributes)
        # A resource-level inference.stage must not be taken for the span's own.
        plain_resource = _STAGE_KEY not in resource_attributes
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                start = span.start_time_unix_nano
                end = span.end_time_unix_nano
                if not (
                    len(trace_id) == 16
                    and len(span_id) == 8
                    and (not parent or len(parent) == 8)
                    and min_start <= start <= end <= max_end
                    and start
                    and trace_id != _ZERO_TRACE_ID
                    and span_id != _ZERO_SPAN_ID
                ):
                    batch.reject(batch.invalid(trace_id, span_id, parent, start, end) or "")
                    continue
                # Read once: each read of a bytes field copies it (a huge one only once).
                pb_attributes = tuple(span.attributes)
                try:
                    size = max_bytes + 1  # over the budget unless the common case applies
                    if plain_resource and len(pb_attributes) <= free:
                        # The common case: scalar attributes within both caps. Last one wins
                        # on duplicate keys, as in the JSON front end.
                        attributes = {}
                        size = resource_size
                        for raw in pb_attributes:
                            found = known(raw) or learn(raw)
                            attributes[found[0]] = found[1]
                            size += found[2]
                    if size <= max_bytes:
                        stage = attributes.get(_STAGE_KEY)
                        stage = (
                            _column_text(stage, max_len)
                            if stage and isinstance(stage, str)
                            else None
                        )
                        dropped = resource_dropped
                    else:
                        attributes, dropped, stage = batch.attributes(
                            resource, _key_values(pb_attributes), pb_value, pb_size
                        )
                    pb_events = span.events
                    if pb_events or span.dropped_events_count:
                        events, dropped_events = from_protobuf(
                            pb_events, span.dropped_events_count, batch.event_limits
                        )
                    else:
                        events, dropped_events = (), 0
                except _ProtobufDecodeError:
                    batch.reject("malformed attribute")
                    continue
                if span.HasField("status"):
                    status = span.status
                    code = status.code
                    message = _column_text(status.message.decode("utf-8", "replace"), max_len)
                else:
                    code, message = 0, ""
                raw_name = span.name
                name = known_name(raw_name) or learnt.name(raw_name)
                kind = span.kind
                keep(
                    DecodedSpan(
                        trace_id,
                        span_id,
                        None if not parent or parent == _ZERO_SPAN_ID else parent,
                        name,
                        kind if 0 <= kind <= _MAX_KIND else 0,
                        start,
                        end,
                        code if 0 <= code <= _MAX_STATUS else 0,
                        message,
                        service,
                        environment,
                        stage,
                        attributes,
                        dropped + span.dropped_attributes_count,
                        resource_attributes,
                        events,
                        dropped_events,
                    )
                )
    return batch.result()
