"""Decode OTLP trace export requests into validated, flat spans.

This module is pure (stdlib and protobuf only, no Django, no I/O) so that the
HTTP view, the gRPC servicer and the tests share one implementation.

Two front ends feed one shared core (:class:`_Batch`):

* protobuf (OTLP/HTTP ``application/x-protobuf`` and OTLP/gRPC): the body is
  parsed by the C (upb) protobuf runtime and walked by :func:`decode_request`;
* JSON (OTLP/HTTP ``application/json``): the body is parsed by :mod:`json` and
  walked directly. ``google.protobuf.json_format.ParseDict`` would be simpler,
  but it is pure Python and manages only ~6,500 spans/s, a quarter of what the
  ingest server must sustain; it also reads trace and span ids as base64 while
  OTLP/JSON sends them as hex.

Validation is per span: a bad span is counted and reported through
:class:`DecodedExport` (OTLP partial success) while its valid siblings are
kept. Only a body that cannot be read at all raises :class:`DecodeError`.
"""

import base64
import binascii
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
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
    "decode_json",
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
_KIND_NUMBERS: Mapping[str, int] = dict(Span.SpanKind.items())
_STATUS_NUMBERS: Mapping[str, int] = dict(Status.StatusCode.items())
_MAX_KIND = max(_KIND_NUMBERS.values())
_MAX_STATUS = max(_STATUS_NUMBERS.values())
_ZERO_TRACE_ID = bytes(16)
_ZERO_SPAN_ID = bytes(8)
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

# A resource reduced once per ResourceSpans rather than once per span:
# (service_name, environment, capped attributes, attributes dropped so far).
_Resource = tuple[str, str, dict[str, object], int]

# Converts one raw attribute value (an AnyValue message or its JSON object) given
# the maximum string length.
_Converter = Callable[[Any, int], object]


# --- shared core -------------------------------------------------------------------------------


def _truncate(text: str, max_len: int) -> str:
    return text if len(text) <= max_len else text[:max_len]


def _column_text(text: str, max_len: int) -> str:
    """A string bound for a text column: truncated, NUL (which PostgreSQL text cannot hold)
    replaced by U+FFFD. Attribute values keep their NULs; the row encoder escapes them."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text if len(text) <= max_len else text[:max_len]


def _float_value(number: float) -> object:
    # NaN and the infinities are not JSON (PostgreSQL jsonb rejects them); use the
    # strings the proto3 JSON mapping uses for them.
    if math.isfinite(number):
        return number
    if math.isnan(number):
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


def _bytes_value(raw: bytes, max_len: int) -> str:
    # Truncate the bytes, not the base64 text, so the result stays valid base64.
    return base64.b64encode(raw[: max_len // 4 * 3]).decode("ascii")


def _resource(attributes: dict[str, object], sdk_dropped: int, limits: Limits) -> _Resource:
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


class _Batch:
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
        resource: _Resource,
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
        convert: _Converter,
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
        self, resource: _Resource, raw: dict[str, Any], convert: _Converter
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
        return _float_value(value.double_value)
    if kind == "array_value":
        return [_pb_value(item, max_len) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value, max_len) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return _bytes_value(value.bytes_value, max_len)
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
    :meth:`_Batch.add` does for the JSON front end: every field and attribute read from a
    upb message allocates a Python object, and each avoided call or intermediate dict is
    measurable per span.
    """
    batch = _Batch(now_ns, limits)
    keep = batch.spans.append
    invalid = batch.invalid
    max_len = limits.max_value_length
    for resource_spans in msg.resource_spans:
        pb_resource = resource_spans.resource
        resource = _resource(
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


# --- JSON --------------------------------------------------------------------------------------
#
# The OTLP/JSON mapping is proto3's JSON mapping with three OTLP rules: ids are
# hex, enums are integers, keys are lowerCamelCase. Like proto3 parsers this
# front end also accepts the original snake_case keys and enum names, reads
# 64-bit integers from numbers or decimal strings, treats null as absent, and
# ignores unknown keys (and the known fields it does not use: scope, events, links).


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _object(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is dict:
        return value
    raise DecodeError(f"{field} must be a JSON object")


def _array(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if type(value) is list:
        return value
    raise DecodeError(f"{field} must be a JSON array")


def _string(value: Any, field: str) -> str:
    if value is None:
        return ""
    if type(value) is str:
        return value
    raise DecodeError(f"{field} must be a JSON string")


def _integer(value: Any, field: str, low: int, high: int) -> int:
    if value is None:
        return 0
    number: int
    kind = type(value)
    if kind is int:
        number = value
    elif kind is str:
        try:
            number = int(value)
        except ValueError:
            raise DecodeError(f"{field} must be an integer, got {value!r:.40}") from None
    elif kind is float and value.is_integer():
        number = int(value)
    else:
        raise DecodeError(f"{field} must be an integer, got {value!r:.40}")
    if not low <= number <= high:
        raise DecodeError(f"{field} is out of range: {number!s:.40}")
    return number


def _enum(value: Any, field: str, numbers: Mapping[str, int], highest: int) -> int:
    # Out-of-range numbers and unknown names read as 0, as the protobuf front end
    # does, so one exotic enum value never costs a whole request.
    if value is None:
        return 0
    if type(value) is int:
        return value if 0 <= value <= highest else 0
    if type(value) is str:
        return numbers.get(value, 0)
    raise DecodeError(f"{field} must be an enum number or name, got {value!r:.40}")


def _hex_id(value: Any) -> bytes | None:
    """Decode a hex id; None when it is not hex (the span is rejected, not the body)."""
    if value is None:
        return b""
    if type(value) is not str:
        return None
    try:
        return binascii.unhexlify(value)
    except ValueError:  # binascii.Error, or a non-ASCII str
        return None


def _key_value(kv: Any) -> tuple[str, Any]:
    if type(kv) is not dict:
        raise DecodeError("attributes must hold KeyValue objects")
    return _string(kv.get("key"), "key"), kv.get("value")


def _json_string(raw: Any, max_len: int) -> object:
    return _truncate(_string(raw, "stringValue"), max_len)


def _json_bool(raw: Any, max_len: int) -> object:
    if raw is None or type(raw) is bool:
        return bool(raw)
    raise DecodeError(f"boolValue must be true or false, got {raw!r:.40}")


def _json_int(raw: Any, max_len: int) -> object:
    return _integer(raw, "intValue", _INT64_MIN, _INT64_MAX)


def _json_double(raw: Any, max_len: int) -> object:
    if raw is None:
        return 0.0
    # proto3 JSON spells NaN and the infinities as strings, and allows numeric strings.
    if type(raw) in (int, float, str):
        try:
            return _float_value(float(raw))
        except (ValueError, OverflowError):  # OverflowError: an integer beyond float range
            pass
    raise DecodeError(f"doubleValue must be a number, got {raw!r:.40}")


def _json_array(raw: Any, max_len: int) -> object:
    values = _array(_object(raw, "arrayValue").get("values"), "arrayValue.values")
    return [_json_value(item, max_len) for item in values]


def _json_kvlist(raw: Any, max_len: int) -> object:
    values = _array(_object(raw, "kvlistValue").get("values"), "kvlistValue.values")
    return {key: _json_value(value, max_len) for key, value in map(_key_value, values)}


def _json_bytes(raw: Any, max_len: int) -> object:
    text = _string(raw, "bytesValue")
    # proto3 JSON accepts standard or URL-safe base64, with or without padding.
    text = text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4)
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError:
        raise DecodeError("bytesValue must be base64") from None
    return _bytes_value(data, max_len)


_ABSENT = object()  # no member of the AnyValue oneof seen yet

_JSON_VALUES: Mapping[str, _Converter] = {
    "stringValue": _json_string,
    "string_value": _json_string,
    "boolValue": _json_bool,
    "bool_value": _json_bool,
    "intValue": _json_int,
    "int_value": _json_int,
    "doubleValue": _json_double,
    "double_value": _json_double,
    "arrayValue": _json_array,
    "array_value": _json_array,
    "kvlistValue": _json_kvlist,
    "kvlist_value": _json_kvlist,
    "bytesValue": _json_bytes,
    "bytes_value": _json_bytes,
}


def _json_value(value: Any, max_len: int) -> object:
    """Convert an OTLP/JSON ``AnyValue`` object to a JSON-serialisable Python value."""
    result: object = _ABSENT
    for member, raw in _object(value, "value").items():
        convert = _JSON_VALUES.get(member)
        if convert is None:
            continue  # an unknown key
        if result is not _ABSENT:
            raise DecodeError("an AnyValue sets more than one value")
        result = convert(raw, max_len)
    return None if result is _ABSENT else result  # an empty AnyValue is OTLP's null


def decode_json(body: bytes, *, now_ns: int, limits: Limits = DEFAULT_LIMITS) -> DecodedExport:
    """Decode an OTLP/JSON ``ExportTraceServiceRequest`` (an OTLP/HTTP JSON body).

    Raises :class:`DecodeError` when the body is not JSON or does not have the
    request's structure (wrong types, out-of-range integers). A trace, span or
    parent id that is not hex rejects only its span.
    """
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:  # ValueError covers bad UTF-8 too
        raise DecodeError(f"invalid JSON: {exc}") from None
    if type(document) is not dict:
        raise DecodeError("the request must be a JSON object")
    batch = _Batch(now_ns, limits)
    try:
        for resource_spans in _array(
            _get(document, "resourceSpans", "resource_spans"), "resourceSpans"
        ):
            resource_spans = _object(resource_spans, "resourceSpans[]")
            resource = _json_resource(_object(resource_spans.get("resource"), "resource"), limits)
            for scope_spans in _array(
                _get(resource_spans, "scopeSpans", "scope_spans"), "scopeSpans"
            ):
                for span in _array(_object(scope_spans, "scopeSpans[]").get("spans"), "spans"):
                    _add_json_span(batch, resource, _object(span, "spans[]"))
    except RecursionError:
        # json.loads bounds nesting by its own recursion limit, which on Python 3.13
        # is deeper than the Python limit the recursive AnyValue conversion hits. The
        # protobuf runtime refuses such messages outright (nesting depth 100).
        raise DecodeError("attribute values are nested too deeply") from None
    return batch.result()


def _json_resource(resource: dict[str, Any], limits: Limits) -> _Resource:
    attributes = _array(resource.get("attributes"), "attributes")
    max_len = limits.max_value_length
    return _resource(
        {key: _json_value(value, max_len) for key, value in map(_key_value, attributes)},
        _integer(
            _get(resource, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _UINT32_MAX,
        ),
        limits,
    )


def _add_json_span(batch: _Batch, resource: _Resource, span: dict[str, Any]) -> None:
    trace_id = _hex_id(_get(span, "traceId", "trace_id"))
    span_id = _hex_id(_get(span, "spanId", "span_id"))
    parent = _hex_id(_get(span, "parentSpanId", "parent_span_id"))
    if trace_id is None or span_id is None or parent is None:
        bad = "trace_id" if trace_id is None else "span_id" if span_id is None else "parent_span_id"
        batch.reject(f"invalid hex {bad}")
        return
    status = _object(span.get("status"), "status")
    batch.add(
        resource,
        trace_id,
        span_id,
        parent,
        _string(span.get("name"), "name"),
        _enum(span.get("kind"), "kind", _KIND_NUMBERS, _MAX_KIND),
        _integer(
            _get(span, "startTimeUnixNano", "start_time_unix_nano"),
            "startTimeUnixNano",
            0,
            _UINT64_MAX,
        ),
        _integer(
            _get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", 0, _UINT64_MAX
        ),
        _enum(status.get("code"), "status.code", _STATUS_NUMBERS, _MAX_STATUS),
        _string(status.get("message"), "status.message"),
        # Last one wins on duplicate keys, as in the protobuf front end.
        dict(map(_key_value, _array(span.get("attributes"), "attributes"))),
        _json_value,
        _integer(
            _get(span, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _UINT32_MAX,
        ),
    )
