"""Tests for ingest.responses: OTLP/HTTP response bodies in both encodings."""

import json

import pytest
from google.rpc.code_pb2 import INVALID_ARGUMENT, RESOURCE_EXHAUSTED
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ingest.responses import (
    CONTENT_TYPES,
    JSON_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
    Format,
    export_response,
    status_response,
)


def test_content_types_follow_otlp_http() -> None:
    assert PROTOBUF_CONTENT_TYPE == "application/x-protobuf"
    assert JSON_CONTENT_TYPE == "application/json"
    assert CONTENT_TYPES == {"protobuf": "application/x-protobuf", "json": "application/json"}


def test_full_success_protobuf_is_the_empty_message() -> None:
    # When nothing was rejected
    body = export_response("protobuf", 0, "")

    # Then the response has no partial_success
    assert body == b""
    assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")


def test_full_success_json_is_the_empty_object() -> None:
    assert json.loads(export_response("json", 0, "")) == {}


def test_partial_success_protobuf() -> None:
    # When three spans were rejected
    body = export_response("protobuf", 3, "3 spans rejected: 3 zero span_id")

    # Then partial_success carries the count and the message
    response = ExportTraceServiceResponse.FromString(body)
    assert response.HasField("partial_success")
    assert response.partial_success.rejected_spans == 3
    assert response.partial_success.error_message == "3 spans rejected: 3 zero span_id"


def test_partial_success_json_uses_camel_case_and_int64_strings() -> None:
    # When three spans were rejected, answered in JSON
    body = export_response("json", 3, "3 spans rejected: 3 zero span_id")

    # Then keys are lowerCamelCase and the int64 count is a decimal string
    assert json.loads(body) == {
        "partialSuccess": {
            "rejectedSpans": "3",
            "errorMessage": "3 spans rejected: 3 zero span_id",
        }
    }


@pytest.mark.parametrize("fmt", ["protobuf", "json"])
def test_warning_without_rejections_sets_partial_success(fmt: Format) -> None:
    # When nothing was rejected but there is something to say
    body = export_response(fmt, 0, "attributes were truncated")

    # Then partial_success holds only the message
    if fmt == "json":
        assert json.loads(body) == {"partialSuccess": {"errorMessage": "attributes were truncated"}}
    else:
        response = ExportTraceServiceResponse.FromString(body)
        assert response.HasField("partial_success")
        assert response.partial_success.rejected_spans == 0
        assert response.partial_success.error_message == "attributes were truncated"


def test_status_protobuf() -> None:
    # When a request is refused as malformed
    body = status_response("protobuf", INVALID_ARGUMENT, "invalid protobuf body")

    # Then the body is a google.rpc.Status
    status = Status.FromString(body)
    assert (status.code, status.message, list(status.details)) == (
        INVALID_ARGUMENT,
        "invalid protobuf body",
        [],
    )


def test_status_json() -> None:
    body = status_response("json", RESOURCE_EXHAUSTED, "ingest queue full, retry later")

    assert json.loads(body) == {"code": 8, "message": "ingest queue full, retry later"}


def test_json_keeps_non_ascii_text() -> None:
    body = status_response("json", INVALID_ARGUMENT, "span « naïve » rejected")

    assert json.loads(body.decode("utf-8"))["message"] == "span « naïve » rejected"


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown OTLP format 'xml'"):
        export_response("xml", 0, "")  # type: ignore[arg-type]


def test_negative_rejected_count_is_refused() -> None:
    with pytest.raises(ValueError, match="rejected_spans must be >= 0"):
        export_response("json", -1, "")
