"""Decode OTLP/JSON trace export requests (OTLP/HTTP ``application/json``).

The JSON front end of :mod:`ingest.decoding`, pure like it: the body is parsed by :mod:`json`
and walked directly into the shared core, :class:`~ingest.decoding.Batch`.
``google.protobuf.json_format.ParseDict`` would be simpler, but it is pure Python and manages
only ~6,500 spans/s, a quarter of what the ingest server must sustain; it also reads trace and
span ids as base64 while OTLP/JSON sends them as hex.

The OTLP/JSON mapping is proto3's JSON mapping with three OTLP rules: ids are hex, enums are
integers, keys are lowerCamelCase. Like proto3 parsers this front end also accepts the
original snake_case keys and enum names, reads 64-bit integers from numbers or decimal
strings, treats null as absent, and ignores unknown keys (and the known fields it does not
use: scope, links).
"""

import base64
import binascii
import json
import re
from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from ingest.decoding import (
    Batch,
    DecodedExport,
    DecodeError,
    Resource,
    reduce_resource,
)
from ingest.events import RawEvent
from ingest.limits import DEFAULT_LIMITS, Converter, Limits
from ingest.values import bytes_value, float_value

__all__ = ["decode_json"]

_KIND_NUMBERS: Mapping[str, int] = dict(Span.SpanKind.items())
_STATUS_NUMBERS: Mapping[str, int] = dict(Status.StatusCode.items())
_MAX_KIND = max(_KIND_NUMBERS.values())
_MAX_STATUS = max(_STATUS_NUMBERS.values())
_UINT32_MAX = 2**32 - 1
_UINT64_MAX = 2**64 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
# json.loads reads the escape of a lone UTF-16 surrogate ("\\ud800") into a str that no UTF-8
# can encode, which PostgreSQL would refuse for the whole batch.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _truncate(text: str, max_len: int) -> str:
    return text if len(text) <= max_len else text[:max_len]


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
    """Every string of the request: a lone surrogate becomes U+FFFD, the replacement character,
    as invalid UTF-8 does in decoders that replace rather than fail."""
    if value is None:
        return ""
    if type(value) is str:
        return value if value.isascii() else _LONE_SURROGATE.sub("\ufffd", value)
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


def _json_string(raw: Any, limits: Limits, depth: int) -> object:
    return _truncate(_string(raw, "stringValue"), limits.max_value_length)


def _json_bool(raw: Any, limits: Limits, depth: int) -> object:
    if raw is None or type(raw) is bool:
        return bool(raw)
    raise DecodeError(f"boolValue must be true or false, got {raw!r:.40}")


def _json_int(raw: Any, limits: Limits, depth: int) -> object:
    return _integer(raw, "intValue", _INT64_MIN, _INT64_MAX)


def _json_double(raw: Any, limits: Limits, depth: int) -> object:
    if raw is None:
        return 0.0
    # proto3 JSON spells NaN and the infinities as strings, and allows numeric strings.
    if type(raw) in (int, float, str):
        try:
            return float_value(float(raw))
        except (ValueError, OverflowError):  # OverflowError: an integer beyond float range
            pass
    raise DecodeError(f"doubleValue must be a number, got {raw!r:.40}")


def _json_array(raw: Any, limits: Limits, depth: int) -> object:
    values = _array(_object(raw, "arrayValue").get("values"), "arrayValue.values")
    if depth >= limits.max_depth:
        return None
    return [_json_value(item, limits, depth + 1) for item in values[: limits.max_items]]


def _json_kvlist(raw: Any, limits: Limits, depth: int) -> object:
    values = _array(_object(raw, "kvlistValue").get("values"), "kvlistValue.values")
    if depth >= limits.max_depth:
        return None
    pairs = map(_key_value, values[: limits.max_items])
    return {key: _json_value(value, limits, depth + 1) for key, value in pairs}


def _json_bytes(raw: Any, limits: Limits, depth: int) -> object:
    text = _string(raw, "bytesValue")
    max_len = limits.max_value_length
    # proto3 JSON accepts standard or URL-safe base64, with or without padding.
    text = text.replace("-", "+").replace("_", "/") + "=" * (-len(text) % 4)
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError:
        raise DecodeError("bytesValue must be base64") from None
    return bytes_value(data, max_len)


_ABSENT = object()  # no member of the AnyValue oneof seen yet

_JSON_VALUES: Mapping[str, Converter] = {
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


_SIZED_MEMBERS: Mapping[str, str] = {
    member: member.split("V")[0].split("_")[0] for member in _JSON_VALUES
}


def _json_value(value: Any, limits: Limits, depth: int) -> object:
    """Convert an OTLP/JSON ``AnyValue`` object to a JSON-serialisable, capped Python value."""
    result: object = _ABSENT
    for member, raw in _object(value, "value").items():
        convert = _JSON_VALUES.get(member)
        if convert is None:
            continue  # an unknown key
        if result is not _ABSENT:
            raise DecodeError("an AnyValue sets more than one value")
        result = convert(raw, limits, depth)
    return None if result is _ABSENT else result  # an empty AnyValue is OTLP's null


def _json_size(value: Any, max_len: int, budget: int) -> int:
    """The byte-budget cost of an OTLP/JSON ``AnyValue`` (see :mod:`ingest.limits`), the same
    as the protobuf front end's, counted only until past ``budget``. Malformed parts cost 8;
    converting the value reports them."""
    if type(value) is dict:
        # The common case, a string, without the walk.
        text = value.get("stringValue")
        if type(text) is str and len(value) == 1:
            return min(len(text), max_len)
    total = 0
    stack = [value]
    while stack and total <= budget:
        node = stack.pop()
        if type(node) is not dict or not node.keys() & _SIZED_MEMBERS.keys():
            total += 8  # a scalar, OTLP's null, or a malformed value
            continue
        for member, raw in node.items():
            kind = _SIZED_MEMBERS.get(member)
            if kind is None:
                continue
            values = raw.get("values") if type(raw) is dict else None
            if (kind == "string" and type(raw) is str) or (kind == "bytes" and type(raw) is str):
                total += min(len(raw), max_len)
            elif kind in ("array", "kvlist") and type(values) is list:
                total += len(values)
                if total > budget:
                    break
                if kind == "array":
                    stack.extend(values)
                    continue
                for kv in values:
                    if type(kv) is dict:
                        key = kv.get("key")
                        total += len(key) if type(key) is str else 0
                        stack.append(kv.get("value"))
            else:
                total += 8
    return total


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
    batch = Batch(now_ns, limits)
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


def _json_resource(resource: dict[str, Any], limits: Limits) -> Resource:
    attributes = _array(resource.get("attributes"), "attributes")
    return reduce_resource(
        dict(map(_key_value, attributes)),
        _integer(
            _get(resource, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _UINT32_MAX,
        ),
        limits,
        _json_value,
        _json_size,
    )


def _add_json_span(batch: Batch, resource: Resource, span: dict[str, Any]) -> None:
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
        _json_size,
        _integer(
            _get(span, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _UINT32_MAX,
        ),
        [_json_event(_object(event, "events[]")) for event in _array(span.get("events"), "events")],
        _integer(
            _get(span, "droppedEventsCount", "dropped_events_count"),
            "droppedEventsCount",
            0,
            _UINT32_MAX,
        ),
    )


def _json_event(event: dict[str, Any]) -> RawEvent:
    return RawEvent(
        _integer(_get(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano", 0, _UINT64_MAX),
        _string(event.get("name"), "name"),
        dict(map(_key_value, _array(event.get("attributes"), "attributes"))),
        _integer(
            _get(event, "droppedAttributesCount", "dropped_attributes_count"),
            "droppedAttributesCount",
            0,
            _UINT32_MAX,
        ),
    )
