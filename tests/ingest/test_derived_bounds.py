"""Derived stages and span events of hostile or broken exports: every acknowledged span is
stored once, a derived stage never leaves its span, and nothing answers 500."""

from __future__ import annotations

import time
import uuid

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from latencyboard.spans.models import Span
from latencyboard.storage import span_events
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, post, signed

pytestmark = pytest.mark.django_db(transaction=True)


def _headers(token: str) -> dict[str, str]:
    return {"content-type": "application/x-protobuf", "authorization": f"Bearer {token}"}


def _names(team_id: int) -> list[str]:
    return sorted(Span.objects.filter(team_id=team_id).values_list("name", flat=True))


@pytest.mark.parametrize("seconds", [1e300, 1e10, 2.0])
def test_a_queue_time_longer_than_its_span_is_no_stage_and_the_span_is_stored(
    ingest_server, seconds
):
    # given a vLLM-shaped span of 1 s whose queue time says 1e300 s, 1e10 s or 2 s
    tenant = make_team_with_token()
    span = SpanSpec(name="llm_request", kind=PbSpan.SPAN_KIND_SERVER, duration_ns=10**9).build()
    span.attributes.add(key="gen_ai.latency.time_in_queue").value.double_value = seconds
    span.attributes.add(key="gen_ai.latency.time_to_first_token").value.double_value = seconds
    request = export_request(service="vllm")
    request.resource_spans[0].scope_spans[0].spans.append(span)

    # when it is exported
    reply = post(ingest_server.traces_url, request.SerializeToString(), _headers(tenant.token))

    # then it is accepted and stored, without a queue stage or a TTFT past its end
    assert reply.status == 200, reply.body
    assert _names(tenant.team.id) == ["llm_request"]


def test_a_start_event_before_its_span_is_no_stage_and_the_spans_are_stored(ingest_server):
    # given a Triton-shaped model span whose QUEUE_START is stamped in 1970, and its compute
    # child with a real COMPUTE_START
    tenant = make_team_with_token()
    start = time.time_ns() - 10**9
    model = SpanSpec(name="resnet50", start_ns=start, duration_ns=10**6).build()
    model.events.add(time_unix_nano=1000, name="QUEUE_START")
    compute = SpanSpec(
        trace_id=model.trace_id,
        parent_span_id=model.span_id,
        name="compute",
        start_ns=start + 1000,
        duration_ns=5000,
    ).build()
    compute.events.add(time_unix_nano=start + 2000, name="COMPUTE_START")
    request = export_request(service="triton")
    request.resource_spans[0].scope_spans[0].spans.extend([model, compute])

    # when they are exported
    reply = post(ingest_server.traces_url, request.SerializeToString(), _headers(tenant.token))

    # then both are stored, and no queue stage reaching back to 1970
    assert reply.status == 200, reply.body
    assert _names(tenant.team.id) == ["compute", "resnet50"]


def test_a_huge_dropped_events_count_is_stored_and_read_back(ingest_server):
    # given a span whose SDK says it dropped 3,000,000,000 events (uint32 allows it)
    tenant = make_team_with_token()
    span = SpanSpec(name="chatty").build()
    span.dropped_events_count = 3_000_000_000
    request = export_request(service="chatty")
    request.resource_spans[0].scope_spans[0].spans.append(span)

    # when it is exported
    reply = post(ingest_server.traces_url, request.SerializeToString(), _headers(tenant.token))

    # then it is stored, and its events read back with the count at the column's largest
    assert reply.status == 200, reply.body
    (stored,) = span_events.trace_events([tenant.team.id], uuid.UUID(bytes=span.trace_id)).values()
    assert stored.dropped_events == 2**31 - 1


def test_a_capped_trace_read_reads_the_events_of_its_spans_only(ingest_server):
    # given a trace of two spans with an event each
    tenant = make_team_with_token()
    first, second = SpanSpec(name="a").build(), SpanSpec(name="b").build()
    second.trace_id = first.trace_id
    for span in (first, second):
        span.events.add(time_unix_nano=span.start_time_unix_nano, name="cache.miss")
    request = export_request(service="cache")
    request.resource_spans[0].scope_spans[0].spans.extend([first, second])
    reply = post(ingest_server.traces_url, request.SerializeToString(), _headers(tenant.token))
    assert reply.status == 200, reply.body

    # when the events of the first span only are read (a trace read past its span cap)
    found = span_events.trace_events(
        [tenant.team.id], uuid.UUID(bytes=first.trace_id), [signed(first.span_id)]
    )

    # then the second span's events are not read
    assert list(found) == [signed(first.span_id)]
