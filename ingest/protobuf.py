"""Decode OTLP/protobuf trace export requests (OTLP/HTTP ``application/x-protobuf`` and
OTLP/gRPC): the protobuf front end of :mod:`ingest.decoding`, pure like it.

The body is parsed by the C (upb) protobuf runtime into :mod:`ingest.wire`'s messages and
walked straight into the shared core, as :mod:`ingest.otlp_json` does for JSON.
"""

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import DecodeError as _ProtobufDecodeError

from ingest import wire
from ingest.decoding import (
    _MAX_KIND,
    _MAX_STATUS,
    _STAGE_KEY,
    _ZERO_SPAN_ID,
    _ZERO_TRACE_ID,
    DEFAULT_LIMITS,
    Batch,
    DecodedExport,
    DecodedSpan,
    DecodeError,
    Limits,
    _column_text,
    reduce_resource,
)
from ingest.events import from_protobuf
from ingest.values import COMPOUND, pb_member, pb_size, pb_value

__all__ = ["decode_protobuf"]

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
