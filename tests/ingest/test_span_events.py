"""Span events: decoded from every OTLP encoding, stored beside their spans, read back whole."""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest
from django.db import connection
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from ingest.decoding import DEFAULT_LIMITS
from ingest.otlp_json import decode_json
from ingest.protobuf import decode_protobuf
from latencyboard.storage import span_events, tables
from tests.factories import make_team_with_token
from tests.ingest.otlp import export_request, kv, metric, post

_NOW = time.time_ns()
DROPPED_METRIC = "latencyboard_ingest_events_dropped_total"


def _request_with_events(events: int, attributes_per_event: int, sdk_dropped: int = 0) -> bytes:
    request = export_request()
    span = (
        request.resource_spans[0]
        .scope_spans[0]
        .spans.add(
            trace_id=os.urandom(16),
            span_id=os.urandom(8),
            name="compute",
            start_time_unix_nano=_NOW - 10**9,
            end_time_unix_nano=_NOW,
            dropped_events_count=sdk_dropped,
        )
    )
    for i in range(events):
        event = span.events.add(time_unix_nano=_NOW - 10**9 + i, name=f"E{i}")
        event.attributes.extend(kv(f"k{j}", "v") for j in range(attributes_per_event))
    return request.SerializeToString()


def test_events_past_the_limits_are_dropped_and_counted():
    # given a span with 130 events (the SDK reported 2 more dropped), the last with 130
    # attributes, over the default limits of 128 events and 128 attributes an event
    body = _request_with_events(130, 1, sdk_dropped=2)
    request = export_request()
    request.ParseFromString(body)
    request.resource_spans[0].scope_spans[0].spans[0].events[-1].attributes.extend(
        kv(f"x{j}", "v") for j in range(129)
    )

    # when it is decoded
    (span,) = decode_protobuf(request.SerializeToString(), now_ns=_NOW).spans

    # then the 64 earliest and the 64 latest events are kept, and what is cut is counted
    assert len(span.events) == DEFAULT_LIMITS.max_events == 128
    assert [event.name for event in span.events[63:65]] == ["E63", "E66"]
    assert span.dropped_events == 2 + 2
    assert len(span.events[-1].attributes) == 128
    assert span.events[-1].dropped_attributes == 130 - 128


def test_json_events_decode_like_protobuf_ones():
    # given one span with an exception event, as OTLP/JSON and as protobuf
    trace_id, span_id = os.urandom(16), os.urandom(8)
    event = {
        "timeUnixNano": str(_NOW - 500),
        "name": "exception",
        "attributes": [
            {"key": "exception.type", "value": {"stringValue": "ValueError"}},
            {"key": "attempt", "value": {"intValue": "3"}},
        ],
        "droppedAttributesCount": 1,
    }
    document = {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id.hex(),
                                "spanId": span_id.hex(),
                                "name": "score",
                                "startTimeUnixNano": str(_NOW - 1000),
                                "endTimeUnixNano": str(_NOW),
                                "events": [event],
                                "droppedEventsCount": 4,
                            }
                        ]
                    }
                ],
            }
        ]
    }
    request = export_request()
    pb_span = (
        request.resource_spans[0]
        .scope_spans[0]
        .spans.add(
            trace_id=trace_id,
            span_id=span_id,
            name="score",
            start_time_unix_nano=_NOW - 1000,
            end_time_unix_nano=_NOW,
            dropped_events_count=4,
        )
    )
    pb_event = pb_span.events.add(
        time_unix_nano=_NOW - 500, name="exception", dropped_attributes_count=1
    )
    pb_event.attributes.append(kv("exception.type", "ValueError"))
    pb_event.attributes.add(key="attempt").value.int_value = 3

    # when both are decoded
    (from_json,) = decode_json(json.dumps(document).encode(), now_ns=_NOW).spans
    (from_protobuf,) = decode_protobuf(request.SerializeToString(), now_ns=_NOW).spans

    # then they hold the same event
    assert from_json.events == from_protobuf.events
    assert from_json.events[0].name == "exception"
    assert from_json.events[0].attributes == {"exception.type": "ValueError", "attempt": 3}
    assert (from_json.events[0].dropped_attributes, from_json.dropped_events) == (1, 4)


def _sdk_exporter(ingest_server, token: str, protocol: str) -> SpanExporter:
    if protocol == "grpc":
        return GrpcSpanExporter(
            endpoint=f"127.0.0.1:{ingest_server.grpc_port}",
            insecure=True,
            headers=(("authorization", f"Bearer {token}"),),
        )
    return HttpSpanExporter(
        endpoint=ingest_server.traces_url, headers={"authorization": f"Bearer {token}"}
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_sdk_events_are_stored_and_read_back(ingest_server, protocol):
    # given the SDK's exporter and a span that records an exception and an event, and one
    # span without events
    tenant = make_team_with_token()
    provider = TracerProvider(resource=Resource.create({"service.name": "fraud-scorer"}))
    provider.add_span_processor(
        SimpleSpanProcessor(_sdk_exporter(ingest_server, tenant.token, protocol))
    )
    tracer = provider.get_tracer("tests")
    event_ns = time.time_ns()

    # when they are exported
    with (
        tracer.start_as_current_span("POST /score") as root,
        tracer.start_as_current_span("model_forward") as span,
    ):
        span.add_event("cache.miss", {"cache.key": "user:7"}, timestamp=event_ns)
        try:
            raise ValueError("bad feature")
        except ValueError as exc:
            span.record_exception(exc)
    provider.shutdown()

    # then the trace's events are read back on their span, the plain span has none
    trace_id = uuid.UUID(int=root.get_span_context().trace_id)
    found = span_events.trace_events([tenant.team.id], trace_id)
    span_id = int.from_bytes(span.get_span_context().span_id.to_bytes(8, "big"), "big", signed=True)
    assert list(found) == [span_id]
    cache_miss, exception = found[span_id].events
    assert (cache_miss.name, cache_miss.time_unix_nano) == ("cache.miss", event_ns)
    assert cache_miss.attributes == {"cache.key": "user:7"}
    assert exception.name == "exception"
    assert exception.attributes["exception.type"] == "ValueError"
    assert exception.attributes["exception.message"] == "bad feature"
    assert 'raise ValueError("bad feature")' in exception.attributes["exception.stacktrace"]
    assert found[span_id].dropped_events == 0


@pytest.mark.django_db(transaction=True)
def test_events_the_sdk_allows_past_our_limit_are_counted_in_the_metric(ingest_server):
    # given an SDK whose own event limit is raised past ingest's 128
    tenant = make_team_with_token()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "chatty"}),
        span_limits=SpanLimits(max_events=200),
    )
    provider.add_span_processor(
        SimpleSpanProcessor(_sdk_exporter(ingest_server, tenant.token, "http/protobuf"))
    )
    before = metric(ingest_server.http_port, DROPPED_METRIC, protocol="http/protobuf")

    # when a span with 150 events is exported
    with provider.get_tracer("tests").start_as_current_span("loop") as span:
        for i in range(150):
            span.add_event(f"step {i}")
    provider.shutdown()

    # then 128 are stored, the 64 earliest and the 64 latest, and the 22 between are counted
    # on the span and in the metric
    trace_id = uuid.UUID(int=span.get_span_context().trace_id)
    (stored,) = span_events.trace_events([tenant.team.id], trace_id).values()
    expected = [f"step {i}" for i in (*range(64), *range(86, 150))]
    assert [event.name for event in stored.events] == expected
    assert (len(stored.events), stored.dropped_events) == (128, 22)
    after = metric(ingest_server.http_port, DROPPED_METRIC, protocol="http/protobuf")
    assert after - before == 22


@pytest.mark.django_db(transaction=True)
def test_a_span_without_events_stores_no_extra_byte(ingest_server):
    # given two requests of one span each, alike but for two events on the second
    tenant = make_team_with_token()
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}

    # when the span without events is stored, then the one with events
    assert post(ingest_server.traces_url, _request_with_events(0, 0), headers).status == 200
    with connection.cursor() as cursor:
        events_bytes_after_plain = span_events.stored_bytes(cursor)
    assert post(ingest_server.traces_url, _request_with_events(2, 3), headers).status == 200

    # then the span without events took no event row, and both span rows are the same size:
    # the events went to the side table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_column_size(s.*) FROM {tables.SPAN} s")  # noqa: S608
        row_sizes = [size for (size,) in cursor.fetchall()]
        assert span_events.stored_bytes(cursor) > 0
    assert events_bytes_after_plain == 0
    assert row_sizes == [112, 112]


def test_an_event_before_its_span_keeps_its_exact_time():
    # given an event stamped 1,500 ns before its span started (clocks of two threads)
    row = span_events.EventRow(
        os.urandom(16), os.urandom(8), 10**18 + 1_234_000, 0, [(10**18 + 1_232_500, "e", {}, 0)]
    )

    # when its document is written
    document = json.loads(row.document())

    # then it holds the offset from the span's start, to the nanosecond
    assert document == [[-1500, "e", {}, 0]]
