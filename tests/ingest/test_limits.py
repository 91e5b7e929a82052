"""Attribute limits: count, string length, array/list elements, nesting depth, size per span.

Through both pure decoders (the same request as protobuf and as OTLP/JSON), then end to end
through the live ingest server and its /metrics.
"""

from __future__ import annotations

import time
import tracemalloc
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

from ingest.decoding import DecodedSpan
from ingest.limits import Limits
from ingest.otlp_json import decode_json
from ingest.protobuf import decode_protobuf
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, metric, post
from tests.ingest.test_decoding import NOW, any_value, make_request, make_span, to_otlp_json

SMALL = Limits(max_items=3, max_depth=2, max_attribute_bytes=200)


def _decode_both(request: ExportTraceServiceRequest, limits: Limits) -> list[DecodedSpan]:
    """The one span of ``request`` as decoded from protobuf; asserts JSON decodes the same."""
    from_protobuf = decode_protobuf(request.SerializeToString(), now_ns=NOW, limits=limits)
    from_json = decode_json(to_otlp_json(request), now_ns=NOW, limits=limits)
    assert from_json.spans == from_protobuf.spans
    return from_protobuf.spans


def _span_with(attributes: dict[str, Any]) -> ExportTraceServiceRequest:
    return make_request(make_span(attributes=attributes))


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ([1, 2, 3, 4, 5], [1, 2, 3]),
        ({"a": 1, "b": 2, "c": 3, "d": 4}, {"a": 1, "b": 2, "c": 3}),
        ([[1, [2, [3]]]], [[1, None]]),
        ({"k": {"k": {"k": 1}}}, {"k": {"k": None}}),
    ],
    ids=["array-items", "kvlist-items", "array-depth", "kvlist-depth"],
)
def test_arrays_and_lists_are_cut_to_items_and_depth(value, stored):
    # given a span with one compound attribute, decoded with 3 items and 2 levels allowed
    [span] = _decode_both(_span_with({"v": value}), SMALL)

    # then the value is cut, and it still counts as kept, not dropped
    assert (span.attributes, span.dropped_attributes) == ({"v": stored}, 0)


def test_attributes_past_the_size_budget_are_dropped_and_counted():
    # given 200 bytes of budget and attributes of 1 + 90 characters each
    attributes = {name: "x" * 90 for name in "abcd"}

    [span] = _decode_both(_span_with(attributes), SMALL)

    # then the first two fit (182 bytes), the next two are dropped and counted
    assert (sorted(span.attributes), span.dropped_attributes) == (["a", "b"], 2)


def test_a_large_array_is_dropped_whole_but_later_small_attributes_kept():
    # given a 5,000 x 1,000-character array (5 MB) between two small attributes
    attributes = {"before": "x", "huge": ["y" * 1000] * 5000, "after": 7}

    [span] = _decode_both(_span_with(attributes), Limits())

    # then it is dropped and counted, and its neighbours are stored
    assert (span.attributes, span.dropped_attributes) == ({"before": "x", "after": 7}, 1)


def test_resource_attributes_share_the_budget_and_the_stage_survives_the_caps():
    # given a resource using most of the budget and a span whose stage does not fit in it
    request = _span_with({"big": "z" * 40, "inference.stage": "model_forward"})
    request.resource_spans[0].resource.attributes.append(
        KeyValue(key="r", value=any_value("r" * 150))
    )

    [span] = _decode_both(request, SMALL)

    # then the stage attribute is dropped (151 + 43 of 200 bytes are used), but the stage
    # column keeps its value
    assert (span.all_attributes, span.dropped_attributes, span.stage) == (
        {"r": "r" * 150, "big": "z" * 40},
        1,
        "model_forward",
    )


def test_four_million_element_array_is_refused_without_building_it():
    # given a 4,000,000-element int array (a 16 MB body)
    values = ArrayValue(values=[AnyValue(int_value=1)] * 4_000_000)
    request = make_request(make_span())
    span_pb = request.resource_spans[0].scope_spans[0].spans[0]
    span_pb.attributes.append(KeyValue(key="ids", value=AnyValue(array_value=values)))
    body = request.SerializeToString()
    del request, values, span_pb

    # when it is decoded
    tracemalloc.start()
    started = time.perf_counter()
    export = decode_protobuf(body, now_ns=NOW)
    elapsed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    # then the attribute is dropped and counted, quickly, and no Python list of it was made:
    # Python holds its wire bytes once (tracemalloc sees Python objects, not the protobuf
    # runtime's own arena), where a list would take twice that in pointers alone
    [span] = export.spans
    assert (span.attributes, span.dropped_attributes) == ({}, 1)
    assert peak < len(body) + 1024 * 1024
    assert elapsed < 2.0


@pytest.mark.django_db(transaction=True)
def test_live_server_drops_an_oversized_array_and_counts_it(ingest_server):
    # given a span carrying a 900,000-element int array (3.6 MB, under the 4 MiB body cap)
    tenant = make_team_with_token()
    request = export_request(SpanSpec(attributes={"ok": "yes"}))
    huge = AnyValue(array_value=ArrayValue(values=[AnyValue(int_value=7)] * 900_000))
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(
        KeyValue(key="ids", value=huge)
    )
    dropped = "latencyboard_ingest_attributes_dropped_total"
    counted_before = metric(ingest_server.http_port, dropped, protocol="http/protobuf")

    # when it is exported
    reply = post(
        ingest_server.traces_url,
        request.SerializeToString(),
        {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"},
    )

    # then the span is stored without the array, and /metrics counts the dropped attribute
    assert reply.status == 200
    assert Span.objects.get(team_id=tenant.team.id).attributes == {"ok": "yes"}
    counted = metric(ingest_server.http_port, dropped, protocol="http/protobuf")
    assert counted == counted_before + 1
