"""Strings PostgreSQL cannot hold, through the live OTLP/HTTP listener and the web app's route:
a lone UTF-16 surrogate in OTLP/JSON, invalid UTF-8 in protobuf: both replaced, the batch kept."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format

from latencyboard.spans.models import Span
from latencyboard.storage import span_events
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, post

pytestmark = pytest.mark.django_db(transaction=True)

JSON = "application/json"
PROTOBUF = "application/x-protobuf"
# Protobuf cannot hold a lone surrogate, so the batch is built with a marker that the JSON text
# then spells as the escape \ud800: valid JSON, but no UTF-8 can encode it.
BAD = "bad@SURROGATE@"
FIXED = "bad\ufffd"


def _json_batch_with_one_bad_span() -> bytes:
    """Ten valid spans and one whose every string holds a lone surrogate, as OTLP/JSON."""
    bad = SpanSpec(name=BAD, attributes={BAD: BAD, "inference.stage": BAD, "ok": "x"})
    request = export_request(bad, *[SpanSpec() for _ in range(10)], service=BAD)
    request.resource_spans[0].scope_spans[0].spans[0].status.message = BAD
    document = json_format.MessageToDict(request)
    for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        # OTLP/JSON sends ids as hex where the proto3 mapping would use base64.
        for key in ("traceId", "spanId"):
            span[key] = bytes(json_format.base64.b64decode(span[key])).hex()
    return json.dumps(document).replace("@SURROGATE@", "\\ud800").encode("ascii")


def _assert_bad_span_stored_with_replacement(team_id: int) -> None:
    assert Span.objects.filter(team_id=team_id).count() == 11
    span = Span.objects.select_related("pipeline", "stage").get(team_id=team_id, name=FIXED)
    assert (span.status_message, span.pipeline.service_name, span.stage.name) == (
        FIXED,
        FIXED,
        FIXED,
    )
    assert span.attributes == {FIXED: FIXED, "inference.stage": FIXED, "ok": "x"}


def test_lone_surrogate_in_json_is_replaced_on_the_ingest_listener(ingest_server):
    # given a team token and a JSON batch of 10 valid spans and one full of lone surrogates
    tenant = make_team_with_token()

    # when it is posted to :4318
    reply = post(
        ingest_server.traces_url,
        _json_batch_with_one_bad_span(),
        {"content-type": JSON, "authorization": f"Bearer {tenant.token}"},
    )

    # then all 11 are acknowledged and stored, each surrogate replaced by U+FFFD
    assert (reply.status, json.loads(reply.body)) == (200, {})
    _assert_bad_span_stored_with_replacement(tenant.team.id)


def test_lone_surrogate_in_json_is_replaced_on_the_web_route(client):
    # given the same batch
    tenant = make_team_with_token()

    # when it is posted to the web app's /v1/traces
    response = client.post(
        "/v1/traces",
        _json_batch_with_one_bad_span(),
        content_type=JSON,
        headers={"authorization": f"Bearer {tenant.token}"},
    )

    # then it is stored the same way
    assert (response.status_code, json.loads(response.content)) == (200, {})
    _assert_bad_span_stored_with_replacement(tenant.team.id)


def test_invalid_utf8_in_protobuf_strings_is_replaced_and_the_batch_kept(ingest_server):
    # given a protobuf batch of ten valid spans and one whose name, status message, attribute
    # key and value and event name hold bytes that are not UTF-8 (proto3 forbids them)
    tenant = make_team_with_token()
    bad = SpanSpec(name="bad\x01", attributes={"bad\x01": "bad\x01", "ok": "x"})
    request = export_request(bad, *[SpanSpec() for _ in range(10)])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.status.message = "bad\x01"
    span.events.add(time_unix_nano=span.start_time_unix_nano, name="bad\x01")
    body = request.SerializeToString().replace(b"bad\x01", b"bad\xff")

    # when it is posted
    reply = post(
        ingest_server.traces_url,
        body,
        {"content-type": PROTOBUF, "authorization": f"Bearer {tenant.token}"},
    )

    # then all 11 spans are stored, each invalid byte replaced by U+FFFD as in OTLP/JSON
    assert reply.status == 200
    assert Span.objects.filter(team_id=tenant.team.id).count() == 11
    stored = Span.objects.get(team_id=tenant.team.id, name=FIXED)
    assert (stored.status_message, stored.attributes) == (FIXED, {FIXED: FIXED, "ok": "x"})
    events = span_events.trace_events([tenant.team.id], stored.trace_id)
    assert [event.name for found in events.values() for event in found.events] == [FIXED]
