"""OTLP/gRPC against the live ingest server with a raw channel: what a broken client sends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from latencyboard.spans.models import Span
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, metric

pytestmark = pytest.mark.django_db(transaction=True)

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
GARBAGE = b"\xff\xff\xff\xff not a protobuf message"
REQUESTS = "latencyboard_ingest_requests_total"


@pytest.fixture
def export(ingest_server) -> Iterator[grpc.UnaryUnaryMultiCallable]:
    """The Export method taking and returning raw bytes, so any bytes can be sent."""
    with grpc.insecure_channel(f"127.0.0.1:{ingest_server.grpc_port}") as channel:
        yield channel.unary_unary(EXPORT)


def test_malformed_message_is_invalid_argument_and_counted(ingest_server, export):
    # given a team token and bytes that are not an ExportTraceServiceRequest
    tenant = make_team_with_token()
    counted_before = metric(ingest_server.http_port, REQUESTS, code="400", protocol="grpc")

    # when they are exported over gRPC
    with pytest.raises(grpc.RpcError) as raised:
        export(GARBAGE, metadata=[("authorization", f"Bearer {tenant.token}")], timeout=10)

    # then the answer is INVALID_ARGUMENT saying why, and /metrics counts it like an HTTP 400
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith("invalid protobuf ExportTraceServiceRequest")
    counted = metric(ingest_server.http_port, REQUESTS, code="400", protocol="grpc")
    assert counted == counted_before + 1
    assert Span.objects.filter(team_id=tenant.team.id).count() == 0


def test_malformed_message_without_token_is_unauthenticated(export):
    # given no token: authentication comes before decoding, as on OTLP/HTTP
    with pytest.raises(grpc.RpcError) as raised:
        export(GARBAGE, timeout=10)

    assert raised.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_valid_message_through_the_raw_channel_is_stored(export):
    # given a well-formed request of two spans sent as raw bytes
    tenant = make_team_with_token()
    body = export_request(SpanSpec(), SpanSpec()).SerializeToString()

    # when it is exported
    reply = export(body, metadata=[("authorization", f"Bearer {tenant.token}")], timeout=10)

    # then it is a full success (an empty response) and both spans are stored
    assert reply == b""
    assert Span.objects.filter(team_id=tenant.team.id).count() == 2


def test_export_without_token_is_refused_before_its_message_is_sent(ingest_server):
    # given a client that opens the export call with no token and holds its message back
    release = threading.Event()

    def held_back() -> Iterator[bytes]:
        release.wait(30)
        yield export_request(SpanSpec()).SerializeToString()

    with grpc.insecure_channel(f"127.0.0.1:{ingest_server.grpc_port}") as channel:
        export = channel.stream_unary(EXPORT)
        started = time.monotonic()

        # when the server answers (the message has not been sent)
        call = export.future(held_back(), timeout=10)
        code = call.code()
        release.set()

    # then it is UNAUTHENTICATED at once, decided from the metadata alone
    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert time.monotonic() - started < 5
