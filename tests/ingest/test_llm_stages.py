"""Stages and LLM measures of the servers people run, from their own OpenTelemetry output.

vLLM- and Triton-shaped spans are built with the OTel SDK as those servers' sources build
them (vLLM ``output_processor.do_tracing``: one SERVER span ``llm_request`` started at the
request's arrival, float-second ``gen_ai.latency.*`` attributes; Triton
``mode=opentelemetry``: ``InferRequest``, a model span with ``QUEUE_START``, a ``compute``
child with ``COMPUTE_*`` events), exported to the live ingest server, folded, and read back
through the percentiles API as a user would.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import extract, inject
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from latencyboard.pipelines import derivation
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import services as rollup_services
from latencyboard.rollups import stage_share_services
from latencyboard.rollups.models import StageShare
from latencyboard.sketches.buckets import RELATIVE_ERROR
from latencyboard.spans.models import Span
from tests.factories import make_team_with_token, make_user
from tests.ingest.otlp import SpanSpec, export_request, post, signed

pytestmark = pytest.mark.django_db(transaction=True)

BOUND = RELATIVE_ERROR * (1 + 1e-9)
REQUESTS = 60


def _provider(ingest_server, token: str, service: str) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(
        endpoint=ingest_server.traces_url, headers={"authorization": f"Bearer {token}"}
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


@dataclass
class VllmRequest:
    queue_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    completion_tokens: int

    @property
    def ttft_s(self) -> float:
        return self.queue_s + self.prefill_s

    @property
    def e2e_s(self) -> float:
        return self.ttft_s + self.decode_s


def _vllm_requests(rng: np.random.Generator) -> list[VllmRequest]:
    return [
        VllmRequest(
            float(rng.lognormal(np.log(0.02), 0.8)),
            float(rng.lognormal(np.log(0.05), 0.5)),
            float(rng.lognormal(np.log(0.8), 0.5)),
            int(rng.integers(10, 3000)),
            int(rng.integers(2, 600)),
        )
        for _ in range(REQUESTS)
    ]


def _send_vllm(ingest_server, token: str, requests: list[VllmRequest]) -> None:
    """Half the requests come in under a gateway's trace (W3C traceparent), as vLLM reads it
    from the request headers; the rest start a trace of their own."""
    gateway = _provider(ingest_server, token, "gateway")
    vllm = _provider(ingest_server, token, "vllm")
    tracer = vllm.get_tracer("vllm.v1.engine.output_processor")
    now = time.time_ns()
    for index, request in enumerate(requests):
        # Two minutes back: windows that end at the current minute hold them whole.
        arrival_ns = now - round(request.e2e_s * 1e9) - 120 * 10**9
        headers: dict[str, str] = {}
        gateway_span = None
        if index % 2:
            gateway_span = gateway.get_tracer("gateway").start_span(
                "POST /v1/completions", kind=SpanKind.SERVER, start_time=arrival_ns - 10**6
            )
            inject(headers, context=trace.set_span_in_context(gateway_span))
        attributes: dict[str, str | int | float] = {
            "gen_ai.latency.time_to_first_token": request.ttft_s,
            "gen_ai.latency.e2e": request.e2e_s,
            "gen_ai.latency.time_in_queue": request.queue_s,
            "gen_ai.usage.prompt_tokens": request.prompt_tokens,
            "gen_ai.usage.completion_tokens": request.completion_tokens,
            "gen_ai.latency.time_in_model_prefill": request.prefill_s,
            "gen_ai.latency.time_in_model_decode": request.decode_s,
            "gen_ai.latency.time_in_model_inference": request.prefill_s + request.decode_s,
            "gen_ai.request.id": f"cmpl-{index}",
        }
        span = tracer.start_span(
            "llm_request",
            kind=SpanKind.SERVER,
            context=extract(headers) if headers else None,
            start_time=arrival_ns,
            attributes=attributes,
        )
        span.end(end_time=arrival_ns + round(request.e2e_s * 1e9))
        if gateway_span is not None:
            gateway_span.end(end_time=arrival_ns + round(request.e2e_s * 1e9) + 10**6)
    vllm.shutdown()
    gateway.shutdown()


def _fold() -> None:
    rollup_services.fold_until_idle(lambda: dt.datetime.now(dt.UTC), seconds=120)


def _summaries(client, user, pipeline: Pipeline, names: list[str]) -> dict[str, dict]:
    stages = {stage.name: stage.pk for stage in Stage.objects.filter(pipeline=pipeline)}
    now = dt.datetime.now(dt.UTC)
    client.force_login(user)
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/percentiles/",
        {
            "stages": ",".join(str(stages[name]) for name in names),
            "start": (now - dt.timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": (now + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "q": "0.5,0.99",
        },
    )
    assert response.status_code == 200, response.content
    return {series["stage"]["name"]: series["summary"] for series in response.json()["series"]}


def _assert_within_bound(summary: dict, exact_ms: np.ndarray) -> None:
    assert summary["n"] == len(exact_ms)
    for key, q in (("p50", 0.5), ("p99", 0.99)):
        exact = np.quantile(exact_ms, q, method="lower")
        assert abs(summary[key] - exact) / exact <= BOUND, (key, summary[key], exact)


def test_vllm_requests_show_queue_prefill_decode_ttft_and_tpot(ingest_server, client):
    # given vLLM-shaped requests, half of them under a gateway's trace
    tenant = make_team_with_token()
    requests = _vllm_requests(np.random.default_rng(24))

    # when vLLM exports them and they are folded
    _send_vllm(ingest_server, tenant.token, requests)
    _fold()

    # then the percentiles API has every stage and measure, one value per request, within
    # the sketch's bound of the exact figures
    pipeline = Pipeline.objects.get(team=tenant.team, service_name="vllm")
    names = ["queue", "prefill", "decode", "time_to_first_token", "time_per_output_token"]
    summaries = _summaries(client, make_user(tenant.team), pipeline, names)
    exact = {
        "queue": [r.queue_s for r in requests],
        "prefill": [r.prefill_s for r in requests],
        "decode": [r.decode_s for r in requests],
        "time_to_first_token": [r.ttft_s for r in requests],
        "time_per_output_token": [r.decode_s / (r.completion_tokens - 1) for r in requests],
    }
    for name in names:
        _assert_within_bound(summaries[name], np.array(exact[name]) * 1e3)
    # and the pipelines API says which are derived, which are measures, and what each is
    listed = client.get("/api/pipelines/").json()
    (stages,) = [p["stages"] for p in listed if p["id"] == pipeline.pk]
    by_name = {stage["name"]: stage for stage in stages}
    assert by_name["llm_request"]["kind"] == "span"
    assert by_name["decode"]["kind"] == "derived"
    assert by_name["decode"]["definition"] == "attribute gen_ai.latency.time_in_model_decode (s)"
    assert by_name["time_to_first_token"]["kind"] == "measure"
    assert "queue and prefill included" in by_name["time_to_first_token"]["definition"]


def _folded_vllm(ingest_server, seed: int) -> tuple[Pipeline, list[VllmRequest]]:
    tenant = make_team_with_token()
    requests = _vllm_requests(np.random.default_rng(seed))
    _send_vllm(ingest_server, tenant.token, requests)
    _fold()
    return Pipeline.objects.get(team=tenant.team, service_name="vllm"), requests


def test_vllm_decode_is_split_by_output_token_band(ingest_server, client):
    # given folded vLLM-shaped requests
    pipeline, requests = _folded_vllm(ingest_server, 11)

    # when the pipeline page asks for latency by output-token band
    client.force_login(make_user(pipeline.team))
    now = dt.datetime.now(dt.UTC)
    response = client.get(
        f"/api/pipelines/{pipeline.pk}/attributes/",
        {
            "key": "output_tokens.band",
            "start": (now - dt.timedelta(hours=1)).isoformat(),
            "end": (now + dt.timedelta(minutes=1)).isoformat(),
        },
    )

    # then the bands are cohorts of the pipeline, and decode counts each request in its band
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["cohort"] is True
    assert {"input_tokens.band", "output_tokens.band"} <= set(body["keys"])
    decode = {g["value"]: g["n"] for g in body["groups"] if g["stage"]["name"] == "decode"}
    bands = [derivation.token_band(r.completion_tokens) for r in requests]
    assert decode == {band: bands.count(band) for band in set(bands)}


def test_vllm_budget_counts_each_nanosecond_once_and_leaves_measures_out(ingest_server):
    # given folded vLLM-shaped requests
    pipeline, requests = _folded_vllm(ingest_server, 7)

    # when the stage shares are computed
    stage_share_services.compute_stage_shares(
        dt.datetime.now(dt.UTC) + dt.timedelta(hours=2), seconds=120
    )

    # then the request's self times add up to its duration (to the microsecond a start time
    # is stored at): the derived stages are taken out of llm_request's own time, and the
    # measures are in no share
    shares = StageShare.objects.filter(pipeline=pipeline, resolution="minute")
    by_stage: dict[str, float] = {}
    for name, self_ms in shares.values_list("stage__name", "self_ms_sum"):
        by_stage[name] = by_stage.get(name, 0.0) + self_ms
    assert set(by_stage) == {"llm_request", "queue", "prefill", "decode"}
    root_ms = sum({row.bucket_start: row.root_ms_sum for row in shares}.values())
    assert sum(by_stage.values()) == pytest.approx(root_ms, abs=REQUESTS * 1e-3)
    assert root_ms == pytest.approx(sum(r.e2e_s for r in requests) * 1e3, rel=1e-6)
    assert by_stage["decode"] == pytest.approx(sum(r.decode_s for r in requests) * 1e3, rel=1e-6)


def _send_triton(ingest_server, token: str, phases_us: np.ndarray) -> None:
    """One request per row of ``phases_us``: queue, compute input, infer, output (µs)."""
    provider = _provider(ingest_server, token, "triton-inference-server")
    tracer = provider.get_tracer("triton")
    now = time.time_ns()
    for queue, compute_input, infer, output in (phases_us * 1000).astype(np.int64).tolist():
        start = now - 10**9
        root = tracer.start_span("InferRequest", start_time=start)
        root.add_event("HTTP_RECV_START", timestamp=start)
        model = tracer.start_span(
            "resnet50", context=trace.set_span_in_context(root), start_time=start + 1000
        )
        model.add_event("REQUEST_START", timestamp=start + 1000)
        model.add_event("QUEUE_START", timestamp=start + 2000)
        compute_start = start + 2000 + queue
        compute = tracer.start_span(
            "compute", context=trace.set_span_in_context(model), start_time=compute_start
        )
        times = np.cumsum([compute_start, compute_input, infer, output]).tolist()
        for name, at in zip(
            ("COMPUTE_START", "COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START", "COMPUTE_END"),
            times,
            strict=True,
        ):
            compute.add_event(name, timestamp=at)
        compute.end(end_time=times[-1])
        model.add_event("REQUEST_END", timestamp=times[-1] + 500)
        model.end(end_time=times[-1] + 500)
        root.end(end_time=times[-1] + 1000)
    provider.shutdown()


def test_triton_requests_show_queue_and_compute_phases(ingest_server, client):
    # given Triton-shaped requests with known phase durations
    tenant = make_team_with_token()
    rng = np.random.default_rng(3)
    phases_us = rng.lognormal(np.log([300, 80, 2000, 60]), 0.6, size=(REQUESTS, 4)).round()

    # when Triton exports them and they are folded
    _send_triton(ingest_server, tenant.token, phases_us)
    _fold()

    # then the percentiles API has the four phases, one value per request
    pipeline = Pipeline.objects.get(team=tenant.team, service_name="triton-inference-server")
    names = ["queue", "compute_input", "compute_infer", "compute_output"]
    summaries = _summaries(client, make_user(tenant.team), pipeline, names)
    for column, name in enumerate(names):
        _assert_within_bound(summaries[name], phases_us[:, column] / 1e3)


def test_a_retried_vllm_export_stores_its_derived_stages_once(ingest_server):
    # given one vLLM request's export, as protobuf (a span of 0.4 s, its stages within)
    tenant = make_team_with_token()
    span = SpanSpec(
        name="llm_request", kind=PbSpan.SPAN_KIND_SERVER, duration_ns=400_000_000
    ).build()
    for key, seconds in (
        ("gen_ai.latency.time_in_queue", 0.01),
        ("gen_ai.latency.time_in_model_prefill", 0.02),
        ("gen_ai.latency.time_in_model_decode", 0.3),
        ("gen_ai.latency.time_to_first_token", 0.03),
    ):
        span.attributes.add(key=key).value.double_value = seconds
    span.attributes.add(key="gen_ai.usage.completion_tokens").value.int_value = 31
    request = export_request(service="vllm")
    request.resource_spans[0].scope_spans[0].spans.append(span)
    headers = {"content-type": "application/x-protobuf", "authorization": f"Bearer {tenant.token}"}

    # when the SDK sends it twice (a retry after a lost answer)
    for _ in range(2):
        assert post(ingest_server.traces_url, request.SerializeToString(), headers).status == 200

    # then the span and its five derived rows (three stages, two measures) are stored once
    stored = Span.objects.filter(team_id=tenant.team.id)
    names = ["llm_request", "queue", "prefill", "decode", *derivation.MEASURES]
    assert sorted(stored.values_list("name", flat=True)) == sorted(names)
    derived = stored.exclude(name="llm_request")
    assert {row.parent_span_id for row in derived} == {signed(span.span_id)}
    flags = {derivation.DERIVED_ATTRIBUTE, derivation.MEASURE_ATTRIBUTE}
    assert all(len(flags & set(row.attributes)) == 1 for row in derived)
