"""OTLP/HTTP against the live ingest server: statuses, bodies and what gets stored."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path

import pytest
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from latencyboard.spans.models import IngestBatch, Span
from latencyboard.teams.services import revoke_ingest_tokens
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, post, signed

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"
EXAMPLE = Path(__file__).parent / "data" / "trace.json"


def _headers(token: str, content_type: str = PROTOBUF, **extra: str) -> dict[str, str]:
    return {"content-type": content_type, "authorization": f"Bearer {token}", **extra}


def _stored(team_id: int) -> int:
    return Span.objects.filter(team_id=team_id).count()


def test_example_json_payload_is_one_server_span_of_exactly_one_second(ingest_server):
    # given the example request of the opentelemetry-proto repository
    tenant = make_team_with_token()

    # when it is posted as JSON
    reply = post(
        ingest_server.traces_url, EXAMPLE.read_bytes(), _headers(tenant.token, "application/json")
    )

    # then it is accepted in full, answered in JSON, and stored as one 1.000 s SERVER span
    assert (reply.status, reply.headers["content-type"], json.loads(reply.body)) == (
        200,
        "application/json",
        {},
    )
    span = Span.objects.select_related("pipeline").get(team_id=tenant.team.id)
    assert span.pipeline.service_name == "my.service"
    assert span.kind == PbSpan.SPAN_KIND_SERVER
    assert span.duration_ns == 1_000_000_000
    assert span.trace_id == uuid.UUID("5b8efff798038103d269b633813fc60c")
    assert span.span_id == signed(bytes.fromhex("EEE19B7EC3C1B174"))
    assert span.parent_span_id == signed(bytes.fromhex("EEE19B7EC3C1B173"))
    assert span.name == "I'm a server span"
    assert span.attributes == {"my.span.attr": "some value"}


def test_same_request_twice_stores_each_span_once(ingest_server):
    # given one request of three spans
    tenant = make_team_with_token()
    body = export_request(SpanSpec(), SpanSpec(), SpanSpec()).SerializeToString()

    # when the exporter retries it
    first = post(ingest_server.traces_url, body, _headers(tenant.token))
    second = post(ingest_server.traces_url, body, _headers(tenant.token))

    # then both are acknowledged, the spans are stored once, and the batches say so
    assert (first.status, second.status) == (200, 200)
    assert _stored(tenant.team.id) == 3
    batches = IngestBatch.objects.filter(team=tenant.team).order_by("id")
    assert [(b.stored_spans, b.duplicate_spans) for b in batches] == [(3, 0), (0, 3)]


def test_truncated_protobuf_is_400_with_status_body(ingest_server):
    tenant = make_team_with_token()
    body = export_request(SpanSpec(), SpanSpec()).SerializeToString()

    reply = post(ingest_server.traces_url, body[: len(body) // 2], _headers(tenant.token))

    assert reply.status == 400
    assert reply.headers["content-type"] == PROTOBUF
    status = Status.FromString(reply.body)
    assert status.code == 3  # INVALID_ARGUMENT
    assert status.message
    assert _stored(tenant.team.id) == 0


def test_invalid_json_is_400(ingest_server):
    tenant = make_team_with_token()

    reply = post(
        ingest_server.traces_url, b'{"resourceSpans": [', _headers(tenant.token, "application/json")
    )

    assert reply.status == 400
    assert json.loads(reply.body)["code"] == 3


def test_invalid_spans_are_rejected_and_valid_siblings_stored(ingest_server):
    # given a request with a good span, a short trace id, a long span id and a far-future one
    tenant = make_team_with_token()
    good = SpanSpec()
    far_future = SpanSpec(start_ns=SpanSpec().start_ns + 10 * 86_400 * 10**9)
    body = export_request(
        good, SpanSpec(trace_id=b"\x01" * 8), SpanSpec(span_id=b"\x02" * 16), far_future
    ).SerializeToString()

    # when it is exported
    reply = post(ingest_server.traces_url, body, _headers(tenant.token))

    # then it is a partial success naming the rejections, and only the good span is stored
    assert reply.status == 200
    response = ExportTraceServiceResponse.FromString(reply.body)
    assert response.partial_success.rejected_spans == 3
    assert "rejected" in response.partial_success.error_message
    assert list(Span.objects.filter(team_id=tenant.team.id).values_list("span_id", flat=True)) == [
        signed(good.span_id)
    ]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/xml", ""], ids=["text", "xml", "none"]
)
def test_other_content_types_are_415(ingest_server, content_type):
    tenant = make_team_with_token()
    body = export_request(SpanSpec()).SerializeToString()

    reply = post(ingest_server.traces_url, body, _headers(tenant.token, content_type))

    assert reply.status == 415
    assert _stored(tenant.team.id) == 0


def test_missing_token_is_401(ingest_server):
    body = export_request(SpanSpec()).SerializeToString()

    reply = post(ingest_server.traces_url, body, {"content-type": PROTOBUF})

    assert reply.status == 401
    assert Status.FromString(reply.body).code == 16  # UNAUTHENTICATED


def test_revoked_token_is_401_and_stores_nothing(ingest_server):
    tenant = make_team_with_token()
    revoke_ingest_tokens(tenant.team.ingest_tokens.all())
    body = export_request(SpanSpec()).SerializeToString()

    reply = post(ingest_server.traces_url, body, _headers(tenant.token))

    assert reply.status == 401
    assert _stored(tenant.team.id) == 0


def test_unknown_token_is_401(ingest_server):
    body = export_request(SpanSpec()).SerializeToString()

    reply = post(ingest_server.traces_url, body, _headers("lb_not-a-real-token"))

    assert reply.status == 401


def test_body_over_the_cap_is_413(ingest_server):
    # given a body larger than the server's 4 MiB cap (one span with a huge name)
    tenant = make_team_with_token()
    body = export_request(SpanSpec(name="x" * (5 * 1024 * 1024))).SerializeToString()

    reply = post(ingest_server.traces_url, body, _headers(tenant.token))

    assert reply.status == 413
    assert _stored(tenant.team.id) == 0


def test_gzip_bomb_is_413_while_inflating(ingest_server):
    # given 256 MiB of zeros gzipped into about 250 KiB
    tenant = make_team_with_token()
    bomb = gzip.compress(b"\0" * (256 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 512 * 1024

    reply = post(
        ingest_server.traces_url, bomb, _headers(tenant.token, **{"content-encoding": "gzip"})
    )

    assert reply.status == 413
    assert _stored(tenant.team.id) == 0


def test_gzip_body_is_accepted(ingest_server):
    tenant = make_team_with_token()
    body = gzip.compress(export_request(SpanSpec(), SpanSpec()).SerializeToString())

    reply = post(
        ingest_server.traces_url, body, _headers(tenant.token, **{"content-encoding": "gzip"})
    )

    assert reply.status == 200
    assert _stored(tenant.team.id) == 2


def test_span_with_ten_thousand_attributes_is_stored_capped(ingest_server):
    # given a span carrying 10,000 attributes
    tenant = make_team_with_token()
    spec = SpanSpec(attributes={f"attr.{i}": "v" for i in range(10_000)})

    # when it is exported
    reply = post(
        ingest_server.traces_url, export_request(spec).SerializeToString(), _headers(tenant.token)
    )

    # then it is stored with the attributes capped at 128
    assert reply.status == 200
    span = Span.objects.get(team_id=tenant.team.id)
    assert len(span.attributes) == 128


def test_nul_characters_are_stored_as_replacement_characters(ingest_server):
    # given spans whose name, status message and attributes hold NUL, which PostgreSQL text
    # and jsonb cannot store, next to a literal backslash-u0000 that must stay as it is
    tenant = make_team_with_token()
    request = export_request(
        SpanSpec(name="score\x00v2", attributes={"key\x00": "a\x00b", "path": "C:\\u0000"}),
        SpanSpec(),
    )
    request.resource_spans[0].scope_spans[0].spans[0].status.message = "bad\x00"

    # when they are exported
    reply = post(ingest_server.traces_url, request.SerializeToString(), _headers(tenant.token))

    # then both are stored, NUL replaced by U+FFFD and nothing else changed
    assert reply.status == 200
    assert _stored(tenant.team.id) == 2
    span = Span.objects.get(team_id=tenant.team.id, name__startswith="score")
    assert (span.name, span.status_message) == ("score\ufffdv2", "bad\ufffd")
    assert span.attributes["key\ufffd"] == "a\ufffdb"
    assert span.attributes["path"] == "C:\\u0000"


def test_rate_limited_token_gets_429_with_retry_after(ingest_server):
    # given a token allowed 10 spans/s (a burst of 20)
    tenant = make_team_with_token(rate_limit=10)
    body = export_request(*[SpanSpec() for _ in range(15)]).SerializeToString()

    # when it sends 15 spans twice in a row
    first = post(ingest_server.traces_url, body, _headers(tenant.token))
    second = post(ingest_server.traces_url, body, _headers(tenant.token))

    # then the second is refused for now, with a hint when to retry
    assert first.status == 200
    assert second.status == 429
    assert int(second.headers["retry-after"]) >= 1
    assert _stored(tenant.team.id) == 15


@pytest.mark.parametrize("method", ["GET", "PUT"])
def test_wrong_method_is_405(ingest_server, method):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", ingest_server.http_port, timeout=10)
    conn.request(method, "/v1/traces", body=b"")
    assert conn.getresponse().status == 405


def test_metrics_count_stored_spans(ingest_server):
    import urllib.request

    tenant = make_team_with_token()
    post(
        ingest_server.traces_url,
        export_request(SpanSpec()).SerializeToString(),
        _headers(tenant.token),
    )

    with urllib.request.urlopen(f"http://127.0.0.1:{ingest_server.http_port}/metrics") as response:
        text = response.read().decode()

    assert 'latencyboard_ingest_spans_stored_total{protocol="http/protobuf"}' in text
    assert 'latencyboard_ingest_requests_total{code="200",protocol="http/protobuf"}' in text


def test_web_app_route_accepts_bodies_over_djangos_upload_limit(client):
    # given a valid 3 MB export (Django's own body limit is 2.5 MB) sent to the web app
    tenant = make_team_with_token()
    spans = [SpanSpec(attributes={"payload": "x" * 1000}) for _ in range(3000)]
    body = export_request(*spans).SerializeToString()
    assert len(body) > 3_000_000

    # when it is posted to /v1/traces of the web app
    response = client.post(
        "/v1/traces",
        body,
        content_type=PROTOBUF,
        headers={"authorization": f"Bearer {tenant.token}"},
    )

    # then it is stored in full, not refused
    assert response.status_code == 200
    assert _stored(tenant.team.id) == 3000
