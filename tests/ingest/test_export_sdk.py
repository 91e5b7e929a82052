"""Real OpenTelemetry SDK exporters against the live ingest server: every span arrives once."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token

pytestmark = pytest.mark.django_db(transaction=True)

STAGES = ["queue_wait", "feature_hydration", "preprocess", "model_forward", "postprocess"]


def _signed(span_id: int) -> int:
    return span_id - 2**64 if span_id >= 2**63 else span_id


def _send_traces(exporter: SpanExporter, traces: int) -> list[int]:
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "fraud-scorer", "deployment.environment.name": "production"}
        )
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    sent = []
    for _ in range(traces):
        with tracer.start_as_current_span("POST /score", kind=SpanKind.SERVER) as root:
            sent.append(root.get_span_context().span_id)
            for stage in STAGES:
                with tracer.start_as_current_span(
                    stage, attributes={"inference.stage": stage}
                ) as s:
                    sent.append(s.get_span_context().span_id)
    provider.shutdown()
    return [_signed(span_id) for span_id in sent]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_sdk_exporter_spans_arrive_once(ingest_server, protocol):
    # given a team token and the SDK's own exporter for the protocol
    tenant = make_team_with_token()
    if protocol == "grpc":
        exporter: SpanExporter = GrpcSpanExporter(
            endpoint=f"127.0.0.1:{ingest_server.grpc_port}",
            insecure=True,
            headers=(("authorization", f"Bearer {tenant.token}"),),
        )
    else:
        exporter = HttpSpanExporter(
            endpoint=ingest_server.traces_url,
            headers={"authorization": f"Bearer {tenant.token}"},
        )

    # when 20 traces of 6 spans are exported
    sent = _send_traces(exporter, traces=20)

    # then each span is stored exactly once, in the token's team, with its stage and pipeline
    stored = list(Span.objects.filter(team_id=tenant.team.id).values_list("span_id", flat=True))
    assert sorted(stored) == sorted(sent)
    pipeline = Pipeline.objects.get(team=tenant.team)
    assert (pipeline.service_name, pipeline.environment) == ("fraud-scorer", "production")
    stage_names = set(Stage.objects.filter(pipeline=pipeline).values_list("name", flat=True))
    assert stage_names == {"POST /score", *STAGES}
    assert Span.objects.filter(team_id=tenant.team.id, is_root=True).count() == 20


def test_sdk_http_exporter_with_gzip(ingest_server):
    # given the HTTP exporter compressing its bodies
    from opentelemetry.exporter.otlp.proto.http import Compression

    tenant = make_team_with_token()
    exporter = HttpSpanExporter(
        endpoint=ingest_server.traces_url,
        headers={"x-latencyboard-token": tenant.token},
        compression=Compression.Gzip,
    )

    # when traces are exported
    sent = _send_traces(exporter, traces=3)

    # then all spans are stored
    assert Span.objects.filter(team_id=tenant.team.id).count() == len(sent) == 18
