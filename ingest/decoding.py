"""Decode OTLP trace export requests into validated, flat spans: the shared core and the
protobuf front end.

This module is pure (stdlib and protobuf only, no Django, no I/O) so that the
HTTP view, the gRPC servicer and the tests share one implementation.

Two front ends feed one shared core (:class:`Batch`):

* protobuf (OTLP/HTTP ``application/x-protobuf`` and OTLP/gRPC), here: the body is
  parsed by the C (upb) protobuf runtime and walked by :func:`decode_request`;
* JSON (OTLP/HTTP ``application/json``): :mod:`ingest.otlp_json`.

Validation is per span: a bad span is counted and reported through
:class:`DecodedExport` (OTLP partial success) while its valid siblings are
kept. Only a body that cannot be read at all raises :class:`DecodeError`.
"""

import base64
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError as _ProtobufDecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = [
    "DEFAULT_LIMITS",
    "DecodeError",
    "DecodedExport",
    "DecodedSpan",
    "Limits",
    "decode_protobuf",
    "decode_request",
]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds applied while decoding; every field must be non-negative."""

    max_attributes: int = 128  # per span, after merging; extra dropped and counted
    max_value_length: int = 1024  # string values (and each string in arrays) truncated to this
    max_future_ns: int = 3600 * 10**9  # spans ending later than now + this are rejected
    max_age_ns: int = 30 * 86400 * 10**9  # spans starting before now - this are rejected

    def __post_init__(self) -> None:
        for name in ("max_attributes", "max_value_length", "max_future_ns", "max_age_ns"):
            if getattr(self, name) < 0:
                raise ValueError(f"Limits.{name} must be >= 0")


DEFAULT_LIMITS = Limits()


class DecodedSpan(NamedTuple):
    """One span that passed validation, flattened with its resource's identity.

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
    attributes: dict[str, object]  # JSON-serialisable, resource then span, capped
    dropped_attributes: int  # dropped by the cap plus the SDKs' dropped_attributes_count


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

# A resource reduced once per ResourceSpans rather than once per span:
# (service_name, environment, capped attributes, attributes dropped so far).
Resource = tuple[str, str, dict[str, object], int]

# Converts one raw attribute value (an AnyValue message or its JSON object) given
# the maximum string length.
Converter = Callable[[Any, int], object]


# --- shared core -------------------------------------------------------------------------------
#
# Batch, reduce_resource, float_value, bytes_value and the Resource and Converter types are
# public for the JSON front end (ingest.otlp_json) only, hence not in __all__.


def _column_text(text: str, max_len: int) -> str:
    """A string bound for a text column: truncated, NUL (which PostgreSQL text cannot hold)
    replaced by U+FFFD. Attribute values keep their NULs; the row encoder escapes them."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text if len(text) <= max_len else text[:max_len]


def float_value(number: float) -> object:
    # NaN and the infinities are not JSON (PostgreSQL jsonb rejects them); use the
    # strings the proto3 JSON mapping uses for them.
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def bytes_value(raw: bytes, max_len: int) -> str:
    # Truncate the bytes, not the base64 text, so the result stays valid base64.
    return base64.b64encode(raw[: max_len // 4 * 3]).decode("ascii")


def reduce_resource(attributes: dict[str, object], sdk_dropped: int, limits: Limits) -> Resource:
    """Pull service and environment out of converted resource attributes, cap the rest."""
    service = attributes.pop(_SERVICE_KEY, None)
    environment = ""
    for key in _ENVIRONMENT_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            environment = _column_text(value, 255)
            break
    dropped = sdk_dropped
    if len(attributes) > limits.max_attributes:
        dropped += len(attributes) - limits.max_attributes
        attributes = dict(islice(attributes.items(), limits.max_attributes))
    service_name = (
        _column_text(service, 255) if isinstance(service, str) and service else _UNKNOWN_SERVICE
    )
    return service_name, environment, attributes, dropped


class Batch:
    """Validates spans and accumulates the kept ones and the rejection reasons."""

    __slots__ = ("max_attributes", "max_end", "max_len", "min_start", "rejects", "spans")

    def __init__(self, now_ns: int, limits: Limits) -> None:
        self.max_attributes = limits.max_attributes
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
        sdk_dropped: int,
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
        attributes, dropped, stage = self.attributes(resource, raw_attributes, convert)
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
        self, resource: Resource, raw: dict[str, Any], convert: Converter
    ) -> tuple[dict[str, object], int, str | None]:
        """Merge span attributes over the resource's: (attributes, dropped, stage).

        Values are converted only when kept, so attributes beyond the cap cost a
        key lookup: a span with 10,000 attributes must not cost 10,000 conversions.
        """
        attributes = resource[2].copy()
        dropped = resource[3]
        max_len = self.max_len
        free = self.max_attributes - len(attributes)
        if len(raw) <= free:
            # The common case: everything fits, no per-key bookkeeping needed.
            for key, value in raw.items():
                attributes[key] = convert(value, max_len)
            stage = attributes[_STAGE_KEY] if _STAGE_KEY in raw else None
        else:
            for key, value in raw.items():
                if key in attributes:
                    attributes[key] = convert(value, max_len)
                elif free > 0:
                    free -= 1
                    attributes[key] = convert(value, max_len)
                else:
                    dropped += 1
            # The stage is a column of its own, so the cap must not hide it.
            stage = convert(raw[_STAGE_KEY], max_len) if _STAGE_KEY in raw else None
        return (
            attributes,
            dropped,
            _column_text(stage, max_len) if isinstance(stage, str) and stage else None,
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


def _pb_value(value: AnyValue, max_len: int) -> object:
    """Convert an OTLP ``AnyValue`` message to a JSON-serialisable Python value."""
    # Most values are strings, and a non-empty string_value can only mean the string
    # member of the oneof is set: that spares the WhichOneof call for them.
    text = value.string_value
    if text:
        return text if len(text) <= max_len else text[:max_len]
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return text
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return float_value(value.double_value)
    if kind == "array_value":
        return [_pb_value(item, max_len) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value, max_len) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return bytes_value(value.bytes_value, max_len)
    return None  # an empty AnyValue is OTLP's null


def decode_protobuf(body: bytes, *, now_ns: int, limits: Limits = DEFAULT_LIMITS) -> DecodedExport:
    """Decode a binary protobuf ``ExportTraceServiceRequest`` (an OTLP/HTTP body).

    Raises :class:`DecodeError` when the body is not a valid message (truncated,
    wrong wire types, invalid UTF-8 in a string field).
    """
    try:
        request = ExportTraceServiceRequest.FromString(body)
    except _ProtobufDecodeError as exc:
        raise DecodeError(f"invalid protobuf ExportTraceServiceRequest: {exc}") from None
    return decode_request(request, now_ns=now_ns, limits=limits)


def decode_request(
    msg: ExportTraceServiceRequest, *, now_ns: int, limits: Limits = DEFAULT_LIMITS
) -> DecodedExport:
    """Validate and flatten an already-parsed request (the gRPC servicer's entry point).

    ``now_ns`` is the receive time in Unix nanoseconds: spans ending after
    ``now_ns + limits.max_future_ns`` or starting before ``now_ns - limits.max_age_ns``
    are rejected, like spans with malformed ids or times.

    This loop is the ingest server's hottest code, so it does inline what
    :meth:`Batch.add` does for the JSON front end: every field and attribute read from a
    upb message allocates a Python object, and each avoided call or intermediate dict is
    measurable per span.
    """
    batch = Batch(now_ns, limits)
    keep = batch.spans.append
    invalid = batch.invalid
    max_len = limits.max_value_length
    for resource_spans in msg.resource_spans:
        pb_resource = resource_spans.resource
        resource = reduce_resource(
            {kv.key: _pb_value(kv.value, max_len) for kv in pb_resource.attributes},
            pb_resource.dropped_attributes_count,
            limits,
        )
        service, environment, resource_attributes, resource_dropped = resource
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
                reason = invalid(trace_id, span_id, parent, start, end)
                if reason is not None:
                    batch.reject(reason)
                    continue
                pb_attributes = span.attributes
                if plain_resource and len(pb_attributes) <= free:
                    # The common case: everything fits under the cap. Last one wins on
                    # duplicate keys, as in the JSON front end.
                    attributes = resource_attributes.copy()
                    for kv in pb_attributes:
                        value = kv.value
                        text = value.string_value
                        if text:
                            attributes[kv.key] = text if len(text) <= max_len else text[:max_len]
                        else:
                            attributes[kv.key] = _pb_value(value, max_len)
                    stage = attributes.get(_STAGE_KEY)
                    stage = (
                        _column_text(stage, max_len) if stage and isinstance(stage, str) else None
                    )
                    dropped = resource_dropped
                else:
                    attributes, dropped, stage = batch.attributes(
                        resource, {kv.key: kv.value for kv in pb_attributes}, _pb_value
                    )
                if span.HasField("status"):
                    status = span.status
                    code, message = status.code, _column_text(status.message, max_len)
                else:
                    code, message = 0, ""
                name = span.name
                kind = span.kind
                keep(
                    DecodedSpan(
                        trace_id,
                        span_id,
                        None if not parent or parent == _ZERO_SPAN_ID else parent,
                        _column_text(name, max_len),
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
                    )
                )
    return batch.result()
