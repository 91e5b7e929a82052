"""Span events through the real SDK exporter and the ingest process, read back by the trace
API: an exception recorded with ``span.record_exception`` is there with its type, message and
stack trace; a span without events has none."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.factories import make_team_with_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)


class FeatureStoreTimeout(TimeoutError):
    pass


def _fetch_features(key: str) -> None:
    raise FeatureStoreTimeout(f"feature store did not answer for {key} within 50 ms")


def export_failed_request(traces_url: str, token: str, limits: SpanLimits | None = None) -> str:
    """One request of fraud-scorer whose hydration failed, with the exception recorded; returns
    the trace id (hex)."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "fraud-scorer"}),
        span_limits=limits,
    )
    provider.add_span_processor(
        # Batched: the request's spans are exported together when it is over.
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=traces_url, headers={"authorization": f"Bearer {token}"})
        )
    )
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("POST /score", kind=SpanKind.SERVER) as root:
        with tracer.start_as_current_span(
            "feature_hydration", attributes={"inference.stage": "feature_hydration"}
        ) as span:
            try:
                _fetch_features("card:42")
            except FeatureStoreTimeout as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, "feature store timeout"))
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id


def test_a_recorded_exception_is_returned_by_the_trace_api(ingest_server):
    # given a team member and a request whose stage recorded an exception, sent by the SDK
    tenant = make_team_with_token()
    client = Client()
    client.force_login(cast(User, make_user(tenant.team)))
    trace_id = export_failed_request(ingest_server.traces_url, tenant.token)

    # when the member opens the trace through the API
    body = client.get(f"/api/traces/{trace_id}/").json()

    # then the failing span carries the exception event: type, message, stack trace, time
    root, hydration = body["spans"]
    assert (root["events"], root["dropped_events_count"]) == ([], 0)
    (event,) = hydration["events"]
    assert event["name"] == "exception"
    attributes = event["attributes"]
    assert attributes["exception.type"].endswith("FeatureStoreTimeout")
    assert attributes["exception.message"] == (
        "feature store did not answer for card:42 within 50 ms"
    )
    assert "in _fetch_features" in attributes["exception.stacktrace"]
    assert "raise FeatureStoreTimeout" in attributes["exception.stacktrace"]
    assert hydration["offset_ms"] <= event["offset_ms"]
    assert event["offset_ms"] <= hydration["offset_ms"] + hydration["duration_ms"]
    assert event["time"].endswith("Z")
    assert int(event["time_unix_nano"]) > 0
    assert event["dropped_attributes_count"] == 0
    assert hydration["dropped_events_count"] == 0


def test_the_waterfall_page_embeds_the_exception(ingest_server):
    tenant = make_team_with_token()
    client = Client()
    client.force_login(cast(User, make_user(tenant.team)))
    trace_id = export_failed_request(ingest_server.traces_url, tenant.token)

    page = client.get(f"/traces/{trace_id}/")

    spans = page.context["trace"]["spans"]
    assert [event["name"] for event in spans[1]["events"]] == ["exception"]


def test_events_past_the_sdks_limit_are_counted_as_dropped(ingest_server):
    # given an SDK keeping no event attributes beyond one
    tenant = make_team_with_token()
    client = Client()
    client.force_login(cast(User, make_user(tenant.team)))
    trace_id = export_failed_request(
        ingest_server.traces_url, tenant.token, SpanLimits(max_event_attributes=1)
    )

    body = client.get(f"/api/traces/{trace_id}/").json()

    (event,) = body["spans"][1]["events"]
    assert len(event["attributes"]) == 1
    assert event["dropped_attributes_count"] >= 2
