"""Tests for ingest.decoding and ingest.otlp_json: OTLP protobuf and JSON trace decoding."""

import base64
import json
import math
from pathlib import Path
from typing import Any, cast

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from ingest.decoding import (
    DecodedExport,
    DecodedSpan,
    DecodeError,
    Limits,
)
from ingest.otlp_json import decode_json
from ingest.protobuf import decode_protobuf

DATA = Path(__file__).parent / "data"
NOW = 1_700_000_000 * 10**9
SECOND = 10**9
TRACE_ID = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
SPAN_ID = bytes.fromhex("b7ad6b7169203331")
PARENT_ID = bytes.fromhex("00f067aa0ba902b7")


# --- builders ----------------------------------------------------------------------------------


def any_value(value: Any) -> AnyValue:
    """Build an AnyValue from a Python value, the way an SDK would."""
    if value is None:
        return AnyValue()
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    return AnyValue(string_value=value)


def key_values(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in attributes.items()]


def make_span(**fields: Any) -> Span:
    """A valid span ending one second before NOW; keyword arguments override fields."""
    attributes = fields.pop("attributes", {})
    values: dict[str, Any] = {
        "trace_id": TRACE_ID,
        "span_id": SPAN_ID,
        "parent_span_id": PARENT_ID,
        "name": "rank",
        "kind": Span.SPAN_KIND_SERVER,
        "start_time_unix_nano": NOW - 2 * SECOND,
        "end_time_unix_nano": NOW - SECOND,
    }
    values.update(fields)
    return Span(attributes=key_values(attributes), **values)


def make_request(*spans: Span, resource: dict[str, Any] | None = None) -> ExportTraceServiceRequest:
    attributes = {"service.name": "ranker"} if resource is None else resource
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(attributes)),
                scope_spans=[ScopeSpans(spans=list(spans))],
            )
        ]
    )


def to_otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """Encode a request as OTLP/JSON: the proto3 JSON mapping with hex ids, enum numbers."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    for resource_spans in document.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def json_request(*spans: dict[str, Any], resource: list[Any] | None = None) -> bytes:
    """An OTLP/JSON body holding the given span objects under one resource."""
    attributes = (
        [{"key": "service.name", "value": {"stringValue": "ranker"}}]
        if resource is None
        else resource
    )
    document = {
        "resourceSpans": [
            {"resource": {"attributes": attributes}, "scopeSpans": [{"spans": list(spans)}]}
        ]
    }
    return json.dumps(document).encode()


def json_span(**fields: Any) -> dict[str, Any]:
    """A valid OTLP/JSON span object ending one second before NOW."""
    span: dict[str, Any] = {
        "traceId": TRACE_ID.hex(),
        "spanId": SPAN_ID.hex(),
        "parentSpanId": PARENT_ID.hex(),
        "name": "rank",
        "kind": 2,
        "startTimeUnixNano": str(NOW - 2 * SECOND),
        "endTimeUnixNano": str(NOW - SECOND),
    }
    span.update(fields)
    return span


def only_span(export: DecodedExport) -> DecodedSpan:
    assert export.rejected_spans == 0, export.error_message
    assert len(export.spans) == 1
    return export.spans[0]


# --- the shared OTLP example -------------------------------------------------------------------


def test_shared_example_decodes_to_one_server_span() -> None:
    # Given the OTLP/JSON example from the specification (upper-case hex ids, from 2018)
    body = (DATA / "trace.json").read_bytes()
    received = 1544712661000000000 + 60 * SECOND

    # When it is decoded a minute after it ended
    export = decode_json(body, now_ns=received, limits=Limits(max_age_ns=365 * 86400 * SECOND))

    # Then it is exactly one server span of my.service, one second long
    span = only_span(export)
    assert export.error_message == ""
    assert span.trace_id == bytes.fromhex("5B8EFFF798038103D269B633813FC60C")
    assert span.span_id == bytes.fromhex("EEE19B7EC3C1B174")
    assert span.parent_span_id == bytes.fromhex("EEE19B7EC3C1B173")
    assert span.name == "I'm a server span"
    assert span.kind == Span.SPAN_KIND_SERVER
    assert span.start_ns == 1544712660000000000
    assert span.end_ns - span.start_ns == SECOND
    assert span.status_code == 0
    assert span.status_message == ""
    assert span.service_name == "my.service"
    assert span.environment == ""
    assert span.stage is None
    assert span.attributes == {"my.span.attr": "some value"}
    assert span.dropped_attributes == 0


# --- protobuf ----------------------------------------------------------------------------------


def test_protobuf_round_trip_keeps_every_field() -> None:
    # Given a request built with the real OTLP classes
    span = make_span(
        name="tokenize",
        kind=Span.SPAN_KIND_CLIENT,
        status=Status(code=Status.STATUS_CODE_ERROR, message="CUDA out of memory"),
        attributes={"inference.stage": "tokenize", "batch.size": 32},
        dropped_attributes_count=2,
    )
    request = make_request(
        span,
        resource={
            "service.name": "ranker",
            "deployment.environment.name": "prod",
            "host.name": "gpu-7",
        },
    )

    # When its serialised form is decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW)

    # Then every field comes back
    assert export == DecodedExport(
        spans=[
            DecodedSpan(
                trace_id=TRACE_ID,
                span_id=SPAN_ID,
                parent_span_id=PARENT_ID,
                name="tokenize",
                kind=3,
                start_ns=NOW - 2 * SECOND,
                end_ns=NOW - SECOND,
                status_code=2,
                status_message="CUDA out of memory",
                service_name="ranker",
                environment="prod",
                stage="tokenize",
                attributes={"inference.stage": "tokenize", "batch.size": 32},
                dropped_attributes=2,
                resource={"deployment.environment.name": "prod", "host.name": "gpu-7"},
            )
        ],
        rejected_spans=0,
        error_message="",
    )


def test_spans_of_several_resources_and_scopes_keep_their_own_resource() -> None:
    # Given two resources, the second with two scopes
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values({"service.name": "embedder"})),
                scope_spans=[ScopeSpans(spans=[make_span(name="a")])],
            ),
            ResourceSpans(
                resource=Resource(attributes=key_values({"service.name": "ranker"})),
                scope_spans=[
                    ScopeSpans(spans=[make_span(name="b")]),
                    ScopeSpans(spans=[make_span(name="c")]),
                ],
            ),
        ]
    )

    # When decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW)

    # Then each span carries its own resource's service, in order
    assert [(s.name, s.service_name) for s in export.spans] == [
        ("a", "embedder"),
        ("b", "ranker"),
        ("c", "ranker"),
    ]


def test_truncated_protobuf_is_a_decode_error() -> None:
    # Given a valid body cut short by one byte
    body = make_request(make_span()).SerializeToString()

    # When / then decoding it fails as a whole
    with pytest.raises(DecodeError, match="invalid protobuf"):
        decode_protobuf(body[:-1], now_ns=NOW)


def test_empty_protobuf_body_is_an_empty_export() -> None:
    # An empty body is a valid, empty ExportTraceServiceRequest
    assert decode_protobuf(b"", now_ns=NOW) == DecodedExport([], 0, "")


def test_empty_or_zero_parent_means_root_span() -> None:
    # Given one span without a parent id and one with the all-zero (invalid) id
    request = make_request(
        make_span(parent_span_id=b""), make_span(parent_span_id=bytes(8), name="zero")
    )

    # When decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW)

    # Then both are root spans
    assert [s.parent_span_id for s in export.spans] == [None, None]


def test_unknown_enum_numbers_decode_as_zero() -> None:
    # Given a span whose kind and status code are numbers this version does not know
    span = make_span(kind=9, status=Status(code=cast("Status.StatusCode.ValueType", 7)))

    # When decoded
    decoded = only_span(decode_protobuf(make_request(span).SerializeToString(), now_ns=NOW))

    # Then they read as unspecified / unset instead of rejecting the span
    assert (decoded.kind, decoded.status_code) == (0, 0)


# --- per-span validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"trace_id": TRACE_ID[:15]}, "invalid trace_id length"),
        ({"trace_id": b""}, "invalid trace_id length"),
        ({"trace_id": bytes(16)}, "zero trace_id"),
        ({"span_id": SPAN_ID + b"\x01"}, "invalid span_id length"),
        ({"span_id": bytes(8)}, "zero span_id"),
        ({"parent_span_id": PARENT_ID[:4]}, "invalid parent_span_id length"),
        ({"start_time_unix_nano": 0}, "missing start time"),
        (
            {"start_time_unix_nano": NOW - SECOND, "end_time_unix_nano": NOW - 2 * SECOND},
            "end before start",
        ),
        ({"end_time_unix_nano": NOW + 3601 * SECOND}, "end too far in the future"),
        ({"start_time_unix_nano": NOW - 31 * 86400 * SECOND}, "start older than retention"),
    ],
)
def test_invalid_span_is_rejected_and_valid_sibling_kept(
    fields: dict[str, Any], reason: str
) -> None:
    # Given one invalid span next to a valid one
    request = make_request(make_span(name="bad", **fields), make_span(name="good"))

    # When decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW)

    # Then only the invalid one is rejected, with its reason
    assert [s.name for s in export.spans] == ["good"]
    assert export.rejected_spans == 1
    assert export.error_message == f"1 span rejected: 1 {reason}"


def test_time_bounds_are_inclusive() -> None:
    # Given spans exactly at the future and retention bounds, and a zero-length span
    limits = Limits(max_future_ns=10 * SECOND, max_age_ns=100 * SECOND)
    request = make_request(
        make_span(name="future", end_time_unix_nano=NOW + 10 * SECOND),
        make_span(
            name="old",
            start_time_unix_nano=NOW - 100 * SECOND,
            end_time_unix_nano=NOW - 100 * SECOND,
        ),
    )

    # When decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=limits)

    # Then both are kept
    assert [s.name for s in export.spans] == ["future", "old"]
    assert export.rejected_spans == 0


def test_error_message_counts_reasons_most_frequent_first() -> None:
    # Given two spans with short trace ids, one ending before it starts, and a valid one
    request = make_request(
        make_span(name="backwards", end_time_unix_nano=NOW - 3 * SECOND),
        make_span(name="short1", trace_id=b"\x01" * 8),
        make_span(name="short2", trace_id=b"\x01" * 17),
        make_span(name="ok"),
    )

    # When decoded
    export = decode_protobuf(request.SerializeToString(), now_ns=NOW)

    # Then the summary counts each reason
    assert [s.name for s in export.spans] == ["ok"]
    assert export.rejected_spans == 3
    assert export.error_message == "3 spans rejected: 2 invalid trace_id length, 1 end before start"


# --- attributes --------------------------------------------------------------------------------


def test_every_any_value_kind_becomes_json_serialisable() -> None:
    # Given one attribute of every AnyValue kind, nested ones included
    attributes = {
        "s": "text",
        "empty": "",
        "b": True,
        "i": -(2**63),
        "d": 0.25,
        "raw": b"\x00\xff",
        "list": ["a", 1, [False]],
        "map": {"k": {"deep": 1.5}},
        "null": None,
        "nan": math.nan,
        "inf": math.inf,
        "-inf": -math.inf,
    }
    request = make_request(make_span(attributes=attributes), resource={})

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the values are plain JSON values (non-finite floats spelled as in proto3 JSON)
    assert span.attributes == {
        "s": "text",
        "empty": "",
        "b": True,
        "i": -(2**63),
        "d": 0.25,
        "raw": "AP8=",
        "list": ["a", 1, [False]],
        "map": {"k": {"deep": 1.5}},
        "null": None,
        "nan": "NaN",
        "inf": "Infinity",
        "-inf": "-Infinity",
    }
    assert json.loads(json.dumps(span.attributes, allow_nan=False)) == span.attributes


def test_span_attributes_win_over_resource_attributes() -> None:
    # Given a resource and a span that both set "host.name"
    request = make_request(
        make_span(attributes={"host.name": "from-span", "model": "bert"}),
        resource={"service.name": "ranker", "host.name": "from-resource", "region": "eu"},
    )

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the span's value wins, resource keys first, service.name left out
    assert list(span.all_attributes.items()) == [
        ("host.name", "from-span"),
        ("region", "eu"),
        ("model", "bert"),
    ]


def test_ten_thousand_attributes_are_capped_not_rejected() -> None:
    # Given a span with 10,000 attributes, 5 already dropped by the SDK
    attributes = {f"attr.{i:05d}": i for i in range(10_000)}
    request = make_request(make_span(attributes=attributes, dropped_attributes_count=5))

    # When decoded with the default cap of 128
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the first 128 are kept and the rest counted as dropped
    assert span.attributes == {f"attr.{i:05d}": i for i in range(128)}
    assert span.dropped_attributes == 10_000 - 128 + 5


def test_cap_counts_resource_attributes_first() -> None:
    # Given a cap of 3, two resource attributes (besides service.name) and three span ones
    limits = Limits(max_attributes=3)
    request = make_request(
        make_span(attributes={"region": "us", "a": 1, "b": 2}),
        resource={"service.name": "ranker", "region": "eu", "zone": "eu-1"},
    )

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=limits))

    # Then a clash overwrites without using room, and only "b" is dropped
    assert span.all_attributes == {"region": "us", "zone": "eu-1", "a": 1}
    assert span.dropped_attributes == 1


def test_resource_beyond_the_cap_is_capped_and_counted() -> None:
    # Given a resource with four attributes besides service.name, two already dropped
    request = make_request(make_span(attributes={"x": 1}))
    request.resource_spans[0].resource.attributes.extend(
        key_values({"r1": 1, "r2": 2, "r3": 3, "r4": 4})
    )
    request.resource_spans[0].resource.dropped_attributes_count = 2

    # When decoded with a cap of 2
    span = only_span(
        decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=Limits(max_attributes=2))
    )

    # Then the first two resource attributes fill the cap; r3, r4 and x are dropped
    assert span.all_attributes == {"r1": 1, "r2": 2}
    assert span.dropped_attributes == 2 + 2 + 1


def test_long_strings_are_truncated_everywhere() -> None:
    # Given strings longer than a max_value_length of 4, in every place a string can be
    limits = Limits(max_value_length=4)
    span = make_span(
        name="inference.rank",
        status=Status(code=Status.STATUS_CODE_ERROR, message="timeout"),
        attributes={
            "s": "abcdefgh",
            "list": ["abcdefgh", "ab"],
            "map": {"k": "abcdefgh"},
            "raw": b"0123456789",
        },
    )
    request = make_request(span, resource={"service.name": "embedder-service"})

    # When decoded
    decoded = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=limits))

    # Then each is cut to 4 characters (bytes to 3, so their base64 stays valid and <= 4)
    assert decoded.attributes == {
        "s": "abcd",
        "list": ["abcd", "ab"],
        "map": {"k": "abcd"},
        "raw": "MDEy",
    }
    assert decoded.name == "infe"
    assert decoded.status_message == "time"
    assert decoded.service_name == "embe"


def test_missing_service_name_is_unknown_service() -> None:
    # Given a resource without service.name
    request = make_request(make_span(), resource={"host.name": "gpu-7"})

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the OTel fallback name is used
    assert span.service_name == "unknown_service"
    assert span.all_attributes == {"host.name": "gpu-7"}


@pytest.mark.parametrize(
    ("resource", "environment"),
    [
        ({"deployment.environment.name": "prod"}, "prod"),
        ({"deployment.environment": "staging"}, "staging"),
        ({"deployment.environment": "staging", "deployment.environment.name": "prod"}, "prod"),
        ({"deployment.environment.name": "", "deployment.environment": "staging"}, "staging"),
        ({"deployment.environment.name": 3}, ""),
        ({}, ""),
    ],
)
def test_environment_resolution(resource: dict[str, Any], environment: str) -> None:
    # Given a resource with some of the environment attributes
    request = make_request(make_span(), resource={"service.name": "ranker", **resource})

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the current name is preferred over the deprecated one
    assert span.environment == environment


@pytest.mark.parametrize(
    ("attributes", "stage"),
    [
        ({"inference.stage": "embed"}, "embed"),
        ({"inference.stage": ""}, None),
        ({"inference.stage": 3}, None),
        ({}, None),
    ],
)
def test_stage_is_a_non_empty_string_span_attribute(
    attributes: dict[str, Any], stage: str | None
) -> None:
    # Given a span with or without an inference.stage attribute
    request = make_request(make_span(attributes=attributes))

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then stage is set only for a non-empty string
    assert span.stage == stage


def test_stage_ignores_a_resource_attribute() -> None:
    # Given a resource-level inference.stage and a span without one
    request = make_request(
        make_span(), resource={"service.name": "ranker", "inference.stage": "resource-level"}
    )

    # When decoded
    span = only_span(decode_protobuf(request.SerializeToString(), now_ns=NOW))

    # Then the span has no stage: only its own attribute counts
    assert span.stage is None
    assert span.all_attributes == {"inference.stage": "resource-level"}


def test_stage_survives_the_cap() -> None:
    # Given a span whose inference.stage comes after the cap is reached
    request = make_request(make_span(attributes={"a": 1, "inference.stage": "decode"}))

    # When decoded with room for one attribute
    span = only_span(
        decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=Limits(max_attributes=1))
    )

    # Then the attribute is dropped but the stage column still gets it
    assert span.attributes == {"a": 1}
    assert span.dropped_attributes == 1
    assert span.stage == "decode"


# --- JSON --------------------------------------------------------------------------------------


def test_json_and_protobuf_decode_the_same_request_identically() -> None:
    # Given one request with every attribute kind, encoded both ways
    request = make_request(
        make_span(
            status=Status(code=Status.STATUS_CODE_OK, message="fine"),
            attributes={"s": "x", "i": 2**62, "d": 1.5, "raw": b"\x01", "l": [1, "a"], "m": {}},
            dropped_attributes_count=1,
        ),
        make_span(span_id=b"\x02" * 8, parent_span_id=b"", kind=Span.SPAN_KIND_CONSUMER),
        resource={"service.name": "ranker", "deployment.environment": "dev"},
    )

    # When both encodings are decoded
    from_protobuf = decode_protobuf(request.SerializeToString(), now_ns=NOW)
    from_json = decode_json(to_otlp_json(request), now_ns=NOW)

    # Then the results are equal
    assert from_json == from_protobuf
    assert len(from_json.spans) == 2


def test_invalid_json_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="invalid JSON"):
        decode_json(b'{"resourceSpans": [', now_ns=NOW)


def test_invalid_utf8_json_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="invalid JSON"):
        decode_json(b'{"resourceSpans": "\xff"}', now_ns=NOW)


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"resourceSpans": {}}',
        b'{"resourceSpans": [[]]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": ["span"]}]}]}',
        json_request(json_span(name=5)),
        json_request(json_span(startTimeUnixNano="soon")),
        json_request(json_span(endTimeUnixNano=-1)),
        json_request(json_span(kind=2.5)),
        json_request(json_span(status=[])),
        json_request(json_span(attributes=[{"key": "k", "value": {"intValue": "x"}}])),
        json_request(json_span(attributes=[{"key": "k", "value": {"boolValue": "yes"}}])),
        json_request(json_span(attributes=[{"key": "k", "value": {"doubleValue": "fast"}}])),
        json_request(json_span(attributes=[{"key": "k", "value": {"doubleValue": 10**400}}])),
        json_request(json_span(attributes=[{"key": "k", "value": {"intValue": 2**63}}])),
        json_request(json_span(attributes=[{"key": "k", "value": {"bytesValue": "%%"}}])),
        json_request(
            json_span(attributes=[{"key": "k", "value": {"stringValue": "a", "intValue": 1}}])
        ),
        json_request(json_span(attributes=["k"])),
    ],
)
def test_wrong_json_structure_is_a_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_json(body, now_ns=NOW)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"traceId": "zz" * 16}, "invalid hex trace_id"),
        ({"traceId": TRACE_ID.hex()[:-1]}, "invalid hex trace_id"),
        ({"spanId": 12345}, "invalid hex span_id"),
        ({"parentSpanId": "é" * 16}, "invalid hex parent_span_id"),
        ({"traceId": base64.b64encode(TRACE_ID).decode()}, "invalid hex trace_id"),
        ({"spanId": "00" * 8}, "zero span_id"),
        ({"traceId": TRACE_ID.hex()[:30]}, "invalid trace_id length"),
    ],
)
def test_json_span_with_bad_id_is_rejected_alone(fields: dict[str, Any], reason: str) -> None:
    # Given one span with a bad id next to a valid one
    body = json_request(json_span(name="bad", **fields), json_span(name="good"))

    # When decoded
    export = decode_json(body, now_ns=NOW)

    # Then only the bad one is rejected
    assert [s.name for s in export.spans] == ["good"]
    assert export.error_message == f"1 span rejected: 1 {reason}"


def test_json_ids_are_case_insensitive_hex() -> None:
    body = json_request(json_span(traceId=TRACE_ID.hex().upper(), spanId=SPAN_ID.hex().upper()))

    span = only_span(decode_json(body, now_ns=NOW))

    assert (span.trace_id, span.span_id) == (TRACE_ID, SPAN_ID)


def test_json_64_bit_integers_as_numbers_or_strings() -> None:
    # Given times and an int attribute as JSON numbers in one span and strings in another
    as_numbers = json_span(
        name="numbers",
        startTimeUnixNano=NOW - 2 * SECOND,
        endTimeUnixNano=NOW - SECOND,
        attributes=[{"key": "n", "value": {"intValue": 2**63 - 1}}],
        droppedAttributesCount=1,
    )
    as_strings = json_span(
        name="strings",
        startTimeUnixNano=str(NOW - 2 * SECOND),
        endTimeUnixNano=str(NOW - SECOND),
        attributes=[{"key": "n", "value": {"intValue": str(2**63 - 1)}}],
        droppedAttributesCount="1",
    )

    # When decoded
    export = decode_json(json_request(as_numbers, as_strings), now_ns=NOW)

    # Then both read the same values
    assert [(s.start_ns, s.end_ns, s.attributes, s.dropped_attributes) for s in export.spans] == [
        (NOW - 2 * SECOND, NOW - SECOND, {"n": 2**63 - 1}, 1),
    ] * 2


def test_json_enums_as_names() -> None:
    # Given kind and status code spelled as enum names
    body = json_request(
        json_span(kind="SPAN_KIND_CLIENT", status={"code": "STATUS_CODE_ERROR", "message": "x"})
    )

    # When decoded
    span = only_span(decode_json(body, now_ns=NOW))

    # Then they read as their numbers
    assert (span.kind, span.status_code, span.status_message) == (3, 2, "x")


def test_json_unknown_enum_name_reads_as_zero() -> None:
    span = only_span(decode_json(json_request(json_span(kind="SPAN_KIND_TELEPORT")), now_ns=NOW))

    assert span.kind == 0


def test_json_unknown_fields_are_ignored() -> None:
    # Given unknown keys at every level, and fields the decoder does not use
    span = json_span(
        futureField={"x": 1},
        events=[{"name": "exception", "timeUnixNano": "1", "futureField": 2}],
        links=[{"traceId": "not hex"}],
        attributes=[{"key": "k", "value": {"stringValue": "v", "futureValue": 1}, "extra": 1}],
    )
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": [], "future": True},
                "scopeSpans": [{"scope": {"name": "lib"}, "spans": [span], "schemaUrl": "x"}],
                "schemaUrl": "https://opentelemetry.io/schemas/1.26.0",
            }
        ],
        "somethingNew": [],
    }

    # When decoded
    decoded = only_span(decode_json(json.dumps(document).encode(), now_ns=NOW))

    # Then they change nothing
    assert decoded.attributes == {"k": "v"}
    assert decoded.service_name == "unknown_service"
    assert [event.name for event in decoded.events] == ["exception"]


def test_json_event_with_a_time_that_is_no_number_is_a_bad_body() -> None:
    # Given an event whose time is not an integer, as a span's own time would be refused
    span = json_span(events=[{"name": "exception", "timeUnixNano": "nonsense"}])
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}

    # When decoded, then the body is refused with the field named
    with pytest.raises(DecodeError, match="timeUnixNano"):
        decode_json(json.dumps(document).encode(), now_ns=NOW)


def test_json_snake_case_keys_are_accepted() -> None:
    # Given a body using the original proto field names
    document = {
        "resource_spans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"string_value": "ranker"}}],
                    "dropped_attributes_count": 1,
                },
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": TRACE_ID.hex(),
                                "span_id": SPAN_ID.hex(),
                                "parent_span_id": PARENT_ID.hex(),
                                "name": "rank",
                                "kind": 1,
                                "start_time_unix_nano": str(NOW - 2 * SECOND),
                                "end_time_unix_nano": str(NOW - SECOND),
                                "dropped_attributes_count": 2,
                                "attributes": [
                                    {"key": "i", "value": {"int_value": "7"}},
                                    {"key": "l", "value": {"array_value": {"values": []}}},
                                    {"key": "m", "value": {"kvlist_value": {"values": []}}},
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }

    # When decoded
    span = only_span(decode_json(json.dumps(document).encode(), now_ns=NOW))

    # Then it reads like the camelCase form
    assert (span.trace_id, span.span_id, span.parent_span_id) == (TRACE_ID, SPAN_ID, PARENT_ID)
    assert (span.start_ns, span.end_ns) == (NOW - 2 * SECOND, NOW - SECOND)
    assert span.service_name == "ranker"
    assert span.attributes == {"i": 7, "l": [], "m": {}}
    assert span.dropped_attributes == 3


def test_json_values_in_their_alternative_spellings() -> None:
    # Given doubles as strings and integers, url-safe unpadded bytes, nulls and empty values
    attributes = [
        {"key": "nan", "value": {"doubleValue": "NaN"}},
        {"key": "minus_inf", "value": {"doubleValue": "-Infinity"}},
        {"key": "int_double", "value": {"doubleValue": 3}},
        {"key": "urlsafe", "value": {"bytesValue": "-_8"}},
        {"key": "null_string", "value": {"stringValue": None}},
        {"key": "empty", "value": {}},
        {"key": "missing"},
    ]

    # When decoded
    span = only_span(decode_json(json_request(json_span(attributes=attributes)), now_ns=NOW))

    # Then they read as their protobuf equivalents
    assert span.attributes == {
        "nan": "NaN",
        "minus_inf": "-Infinity",
        "int_double": 3.0,
        "urlsafe": base64.b64encode(b"\xfb\xff").decode(),
        "null_string": "",
        "empty": None,
        "missing": None,
    }


def test_json_null_fields_read_as_absent() -> None:
    # Given a span whose optional fields are explicit nulls
    body = json_request(
        json_span(parentSpanId=None, name=None, kind=None, status=None, attributes=None)
    )

    # When decoded
    span = only_span(decode_json(body, now_ns=NOW))

    # Then they take their defaults
    assert (span.parent_span_id, span.name, span.kind, span.status_code) == (None, "", 0, 0)
    assert span.attributes == {}


def test_json_nesting_deeper_than_python_recursion_is_a_decode_error() -> None:
    # Given an attribute value nested 1,000 arrays deep (3,000 JSON levels)
    depth = 1000
    value = '{"arrayValue": {"values": [' * depth + '{"intValue": 1}' + "]}}" * depth
    attribute = f'[{{"key": "deep", "value": {value}}}]'
    body = json_request(json_span(attributes="ATTRIBUTES")).replace(
        b'"ATTRIBUTES"', attribute.encode()
    )

    # When / then it is refused as a whole (by json.loads or, where that nests deeper
    # than Python's recursion limit, by the value conversion)
    with pytest.raises(DecodeError):
        decode_json(body, now_ns=NOW)


def test_json_ten_thousand_attributes_are_capped() -> None:
    attributes = [{"key": f"k{i}", "value": {"intValue": i}} for i in range(10_000)]

    span = only_span(decode_json(json_request(json_span(attributes=attributes)), now_ns=NOW))

    assert len(span.attributes) == 128
    assert span.dropped_attributes == 10_000 - 128


# --- limits ------------------------------------------------------------------------------------


def test_negative_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_attributes"):
        Limits(max_attributes=-1)


# --- properties --------------------------------------------------------------------------------

nonzero_ids = st.binary(min_size=8, max_size=8).filter(any)
valid_spans = st.builds(
    lambda trace_id, span_id, parent, start, duration, name, kind: make_span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        start_time_unix_nano=start,
        end_time_unix_nano=start + duration,
        name=name,
        kind=kind,
    ),
    st.binary(min_size=16, max_size=16).filter(any),
    nonzero_ids,
    st.one_of(st.just(b""), nonzero_ids),
    st.integers(NOW - 86400 * SECOND, NOW - 60 * SECOND),
    st.integers(0, 60 * SECOND),
    st.text(max_size=40),
    st.integers(0, 5),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(valid_spans, max_size=20))
def test_valid_spans_survive_encode_then_decode(spans: list[Span]) -> None:
    # Given any list of valid spans
    request = make_request(*spans)

    # When it goes through protobuf and OTLP/JSON
    from_protobuf = decode_protobuf(request.SerializeToString(), now_ns=NOW)
    from_json = decode_json(to_otlp_json(request), now_ns=NOW)

    # Then every span comes back with the same ids, times, name and kind (a NUL, which no
    # PostgreSQL text column can hold, as U+FFFD)
    expected = [
        (
            s.trace_id,
            s.span_id,
            s.parent_span_id or None,
            s.start_time_unix_nano,
            s.end_time_unix_nano,
            s.name.replace("\x00", "\ufffd"),
            s.kind,
        )
        for s in spans
    ]
    assert from_protobuf.rejected_spans == 0
    assert [
        (s.trace_id, s.span_id, s.parent_span_id, s.start_ns, s.end_ns, s.name, s.kind)
        for s in from_protobuf.spans
    ] == expected
    assert from_json == from_protobuf


def test_nul_in_strings_bound_for_text_columns_becomes_a_replacement_character() -> None:
    # Given a span whose service, environment, name, stage and status message hold NUL
    span = make_span(name="ra\x00nk", attributes={"inference.stage": "model\x00forward"})
    span.status.message = "oo\x00m"
    request = make_request(
        span, resource={"service.name": "rank\x00er", "deployment.environment.name": "pr\x00d"}
    )

    # When it is decoded from protobuf and from OTLP/JSON
    for export in (
        decode_protobuf(request.SerializeToString(), now_ns=NOW),
        decode_json(to_otlp_json(request), now_ns=NOW),
    ):
        # Then those strings hold U+FFFD where the NUL was, and the attribute keeps its value
        (decoded,) = export.spans
        assert (
            decoded.service_name,
            decoded.environment,
            decoded.name,
            decoded.stage,
            decoded.status_message,
        ) == ("rank\ufffder", "pr\ufffdd", "ra\ufffdnk", "model\ufffdforward", "oo\ufffdm")
        assert decoded.attributes["inference.stage"] == "model\x00forward"


@pytest.mark.parametrize("front_end", ["protobuf", "json"])
def test_past_the_event_cap_the_exception_and_both_ends_are_kept(front_end: str) -> None:
    # given a span of 300 events whose first is the exception that failed it (cap: 128)
    names = ["exception", *(f"step {i}" for i in range(299))]
    span = make_span(
        events=[
            Span.Event(time_unix_nano=NOW - 2 * SECOND + i, name=n) for i, n in enumerate(names)
        ]
    )
    request = make_request(span)

    # when it is decoded
    body = request.SerializeToString() if front_end == "protobuf" else to_otlp_json(request)
    decode = decode_protobuf if front_end == "protobuf" else decode_json
    decoded = only_span(decode(body, now_ns=NOW, limits=Limits(max_events=128)))

    # then the exception, the 64 earliest and the 63 latest of the others are kept, in order
    kept = ["exception", *(f"step {i}" for i in (*range(64), *range(236, 299)))]
    assert [event.name for event in decoded.events] == kept
    assert decoded.dropped_events == 172


def test_a_malformed_attribute_rejects_its_span_only() -> None:
    # given two spans, the first with an attribute whose value claims 5 bytes in its 3
    request = make_request(make_span(attributes={"marker": "x"}), make_span(span_id=PARENT_ID))
    body = request.SerializeToString().replace(b"marker\x12\x03\n\x01x", b"marker\x12\x03\n\x05x")

    # when the body is decoded
    export = decode_protobuf(body, now_ns=NOW)

    # then the other span is kept and the first rejected with the reason
    assert [span.span_id for span in export.spans] == [PARENT_ID]
    assert export.error_message == "1 span rejected: 1 malformed attribute"
