"""Encode OTLP/HTTP response bodies in the encoding the request used.

OTLP/HTTP requires the response to use the request's Content-Type: a binary
protobuf request gets a binary protobuf response, a JSON request gets the
proto3 JSON mapping (lowerCamelCase keys, int64 as decimal strings). Pure
module: no Django, no I/O.
"""

import json
from collections.abc import Mapping
from typing import Literal

from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

__all__ = [
    "CONTENT_TYPES",
    "JSON_CONTENT_TYPE",
    "PROTOBUF_CONTENT_TYPE",
    "Format",
    "export_response",
    "status_response",
]

Format = Literal["protobuf", "json"]

PROTOBUF_CONTENT_TYPE = "application/x-protobuf"
JSON_CONTENT_TYPE = "application/json"
CONTENT_TYPES: Mapping[Format, str] = {
    "protobuf": PROTOBUF_CONTENT_TYPE,
    "json": JSON_CONTENT_TYPE,
}


def _encode(fmt: Format, message: Message) -> bytes:
    if fmt == "protobuf":
        return message.SerializeToString()
    if fmt == "json":
        # MessageToDict applies the proto3 JSON mapping (camelCase keys, int64 as
        # strings, default values omitted); compact separators keep bodies small.
        document = json_format.MessageToDict(message)
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()
    raise ValueError(f"unknown OTLP format {fmt!r}; expected 'protobuf' or 'json'")


def export_response(fmt: Format, rejected_spans: int, error_message: str) -> bytes:
    """Encode the ``ExportTraceServiceResponse`` for a (partially) accepted request.

    ``partial_success`` is set only when spans were rejected or there is a message
    (a warning with zero rejections is allowed by OTLP); a full success is the
    empty message: ``b""`` in protobuf, ``b"{}"`` in JSON.
    """
    if rejected_spans < 0:
        raise ValueError(f"rejected_spans must be >= 0, got {rejected_spans}")
    response = ExportTraceServiceResponse()
    if rejected_spans or error_message:
        response.partial_success.rejected_spans = rejected_spans
        response.partial_success.error_message = error_message
    return _encode(fmt, response)


def status_response(fmt: Format, code: int, message: str) -> bytes:
    """Encode a ``google.rpc.Status`` error body; ``code`` is a ``google.rpc.Code`` value."""
    return _encode(fmt, Status(code=code, message=message))
