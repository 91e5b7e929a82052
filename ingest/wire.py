"""OTLP trace export messages as ingest reads them off the wire (pure: protobuf only).

The same field numbers and wire types as ``opentelemetry.proto``'s messages, so any valid
``ExportTraceServiceRequest`` parses, declared the way the ingest hot path wants them:

* every ``string`` is ``bytes``: one span with invalid UTF-8 (which proto3 forbids, and
  which would make the upb runtime refuse the whole message) costs that span's text a
  replacement character, not the batch its 511 neighbours came in;
* a span's and an event's ``attributes`` are the raw bytes of each ``KeyValue``: the same
  attribute (``model.version=v8``) arrives on most spans of an export, so the decoder
  converts each distinct one once and looks the rest up by their bytes
  (:mod:`ingest.decoding`), instead of building three Python objects per attribute;
* fields ingest never reads (trace state, flags, links, the instrumentation scope, schema
  URLs) are left undeclared: the runtime skips them as unknown fields.

Resource attributes, which arrive once per resource, are parsed with the real
``KeyValue`` (see :func:`key_value`).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = ["ExportRequest", "key_value"]

_PACKAGE = "latencyboard.ingest.wire"
_F = descriptor_pb2.FieldDescriptorProto
# (name, number, type, label, message type name or "")
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "ExportRequest": [("resource_spans", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "ResourceSpans")],
    "ResourceSpans": [
        ("resource", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Resource"),
        ("scope_spans", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "ScopeSpans"),
    ],
    "Resource": [
        ("attributes", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ("dropped_attributes_count", 2, _F.TYPE_UINT32, _F.LABEL_OPTIONAL, ""),
    ],
    "ScopeSpans": [("spans", 2, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "Span")],
    "Span": [
        ("trace_id", 1, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("span_id", 2, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("parent_span_id", 4, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("name", 5, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        # An enum on the wire is a varint; as int32 an unknown kind stays a number.
        ("kind", 6, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
        ("start_time_unix_nano", 7, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
        ("end_time_unix_nano", 8, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
        ("attributes", 9, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ("dropped_attributes_count", 10, _F.TYPE_UINT32, _F.LABEL_OPTIONAL, ""),
        ("events", 11, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "Event"),
        ("dropped_events_count", 12, _F.TYPE_UINT32, _F.LABEL_OPTIONAL, ""),
        ("status", 15, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "Status"),
    ],
    "Event": [
        ("time_unix_nano", 1, _F.TYPE_FIXED64, _F.LABEL_OPTIONAL, ""),
        ("name", 2, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("attributes", 3, _F.TYPE_BYTES, _F.LABEL_REPEATED, ""),
        ("dropped_attributes_count", 4, _F.TYPE_UINT32, _F.LABEL_OPTIONAL, ""),
    ],
    "Status": [
        ("message", 2, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("code", 3, _F.TYPE_INT32, _F.LABEL_OPTIONAL, ""),
    ],
    # A KeyValue whose strings, at every depth, are bytes: read only when the real one
    # refuses a value's UTF-8.
    "KeyValue": [
        ("key", 1, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("value", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "AnyValue"),
    ],
    "AnyValue": [
        ("string_value", 1, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
        ("bool_value", 2, _F.TYPE_BOOL, _F.LABEL_OPTIONAL, ""),
        ("int_value", 3, _F.TYPE_INT64, _F.LABEL_OPTIONAL, ""),
        ("double_value", 4, _F.TYPE_DOUBLE, _F.LABEL_OPTIONAL, ""),
        ("array_value", 5, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "ArrayValue"),
        ("kvlist_value", 6, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, "KeyValueList"),
        ("bytes_value", 7, _F.TYPE_BYTES, _F.LABEL_OPTIONAL, ""),
    ],
    "ArrayValue": [("values", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "AnyValue")],
    "KeyValueList": [("values", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, "KeyValue")],
}


def _build() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="latencyboard/ingest/wire.proto", package=_PACKAGE, syntax="proto3"
    )
    for message_name, fields in _MESSAGES.items():
        message = file.message_type.add(name=message_name)
        for name, number, kind, label, type_name in fields:
            field = message.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
        if message_name == "AnyValue":
            message.oneof_decl.add(name="value")
            for field in message.field:
                field.oneof_index = 0
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _build()
ExportRequest: Any = _CLASSES["ExportRequest"]
_LenientKeyValue: Any = _CLASSES["KeyValue"]


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _repaired(value: Any, into: AnyValue) -> None:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        into.string_value = _text(value.string_value)
    elif kind == "array_value":
        into.array_value.SetInParent()
        for item in value.array_value.values:
            _repaired(item, into.array_value.values.add())
    elif kind == "kvlist_value":
        into.kvlist_value.SetInParent()
        for pair in value.kvlist_value.values:
            _repaired(pair.value, into.kvlist_value.values.add(key=_text(pair.key)).value)
    elif kind is not None:
        setattr(into, kind, getattr(value, kind))


def key_value(raw: bytes) -> KeyValue:
    """The ``KeyValue`` of one attribute's wire bytes; invalid UTF-8 in its key or any of its
    strings becomes U+FFFD, the replacement character, as the JSON front end does.

    Raises :class:`google.protobuf.message.DecodeError` for bytes that are no ``KeyValue``.
    """
    try:
        return KeyValue.FromString(raw)
    except DecodeError:
        lenient = _LenientKeyValue.FromString(raw)
    repaired = KeyValue(key=_text(lenient.key))
    _repaired(lenient.value, repaired.value)
    return repaired
