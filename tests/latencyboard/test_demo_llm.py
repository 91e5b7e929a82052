"""The demo's LLM pipeline: a gateway calling vLLM, spans shaped as vLLM's own."""

from __future__ import annotations

import threading
from typing import cast

import numpy as np
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from latencyboard.demo.llm import LLM_PIPELINES, VLLM_CHAT, LlmBatch, sample_llm_requests
from latencyboard.demo.llm_service import llm_traffic, tracer_providers
from latencyboard.demo.service import run_traffic

START_NS = 1_763_000_000 * 1_000_000_000
# vllm/tracing.py SpanAttributes, as vllm/v1/engine/output_processor.py sets them.
VLLM_ATTRIBUTES = {
    "gen_ai.latency.time_to_first_token",
    "gen_ai.latency.e2e",
    "gen_ai.latency.time_in_queue",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.latency.time_in_model_prefill",
    "gen_ai.latency.time_in_model_decode",
    "gen_ai.latency.time_in_model_inference",
    "gen_ai.request.id",
    "gen_ai.request.top_p",
    "gen_ai.request.max_tokens",
    "gen_ai.request.temperature",
    "gen_ai.request.n",
}


@pytest.fixture(scope="module")
def batch() -> LlmBatch:
    return sample_llm_requests(VLLM_CHAT, 100_000, np.random.default_rng(24), candidate_share=0.5)


def _spans(batch: LlmBatch, row: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    providers = tracer_providers(VLLM_CHAT, lambda: SimpleSpanProcessor(exporter))
    llm_traffic(VLLM_CHAT, providers).emit(batch, row, START_NS)
    for provider in providers:
        provider.shutdown()
    return sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)


def test_the_catalogue_has_a_vllm_pipeline_behind_a_gateway() -> None:
    assert [(p.gateway, p.name) for p in LLM_PIPELINES] == [("chat-gateway", "vllm")]


def test_the_candidate_answers_longer_and_decodes_each_token_slower(batch: LlmBatch) -> None:
    served = ~batch.refused
    figures = []
    for version in (0, 1):
        mine = served & (batch.model_version_idx == version)
        many = mine & (batch.output_tokens > 1)
        tpot = batch.decode_ns[many] / (batch.output_tokens[many] - 1)
        figures.append(
            (np.median(batch.output_tokens[mine]), np.median(tpot) / 1e6, batch.e2e_ns[mine])
        )
    (base_tokens, base_tpot, base_e2e), (cand_tokens, cand_tpot, cand_e2e) = figures
    assert cand_tokens / base_tokens == pytest.approx(260 / 160, rel=0.05)
    assert (base_tpot, cand_tpot) == (pytest.approx(18, rel=0.02), pytest.approx(23, rel=0.02))
    assert np.median(cand_e2e) > 1.8 * np.median(base_e2e)


def test_a_served_request_is_a_gateway_trace_with_vllms_span_under_its_call(
    batch: LlmBatch,
) -> None:
    row = int(np.flatnonzero(~batch.refused & (batch.model_version_idx == 1))[0])

    root, call, llm = _spans(batch, row)

    assert (root.name, root.kind, root.parent) == (
        "POST /v1/chat/completions",
        SpanKind.SERVER,
        None,
    )
    assert root.resource.attributes["service.name"] == "chat-gateway"
    assert call.parent is not None
    assert (call.name, call.kind, call.parent.span_id) == (
        "POST",
        SpanKind.CLIENT,
        root.context.span_id,
    )
    assert (llm.name, llm.kind) == ("llm_request", SpanKind.SERVER)
    assert llm.parent is not None
    assert llm.parent.is_remote
    assert llm.parent.span_id == call.context.span_id
    assert llm.context.trace_id == root.context.trace_id
    resource = llm.resource.attributes
    assert (resource["service.name"], resource["model.version"]) == ("vllm", "chat-2026-11")
    attributes = dict(llm.attributes or {})
    assert set(attributes) == VLLM_ATTRIBUTES
    assert all(
        isinstance(value, float)
        for key, value in attributes.items()
        if key.startswith("gen_ai.latency")
    )
    seconds = {key: cast(float, value) for key, value in attributes.items()}
    assert llm.start_time == START_NS + batch.arrival_ns[row]
    assert cast(int, llm.end_time) - cast(int, llm.start_time) == round(
        seconds["gen_ai.latency.e2e"] * 1e9
    )
    assert seconds["gen_ai.latency.time_in_model_inference"] == pytest.approx(
        seconds["gen_ai.latency.time_in_model_prefill"]
        + seconds["gen_ai.latency.time_in_model_decode"]
    )
    assert seconds["gen_ai.latency.time_to_first_token"] > (
        seconds["gen_ai.latency.time_in_queue"] + seconds["gen_ai.latency.time_in_model_prefill"]
    )
    assert attributes["gen_ai.usage.completion_tokens"] == batch.output_tokens[row]
    assert cast(int, root.start_time) < cast(int, call.start_time) < cast(int, llm.start_time)
    assert cast(int, llm.end_time) < cast(int, call.end_time) < cast(int, root.end_time)


def test_a_refused_request_records_the_gateways_exception(batch: LlmBatch) -> None:
    row = int(np.flatnonzero(batch.refused)[0])

    (root,) = _spans(batch, row)

    assert root.status.status_code == StatusCode.ERROR
    (event,) = root.events
    assert event.name == "exception"
    assert event.attributes is not None
    assert str(event.attributes["exception.type"]).endswith("ContextLengthExceeded")
    assert "maximum context length" in str(event.attributes["exception.message"])
    assert "_check_context" in str(event.attributes["exception.stacktrace"])


def test_run_traffic_sends_llm_requests() -> None:
    exporter = InMemorySpanExporter()
    providers = tracer_providers(VLLM_CHAT, lambda: SimpleSpanProcessor(exporter))

    sent = run_traffic(
        [llm_traffic(VLLM_CHAT, providers)],
        100.0,
        threading.Event(),
        duration_s=3.0,
        rng=np.random.default_rng(5),
    )
    for provider in providers:
        provider.shutdown()

    spans = exporter.get_finished_spans()
    llm = [span for span in spans if span.name == "llm_request"]
    # Requests run for seconds: only those that finished in time are sent.
    assert 0 < len(llm) <= sent
    assert len([span for span in spans if span.parent is None]) == sent
