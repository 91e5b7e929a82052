"""The demo's LLM requests as spans: a gateway's, and vLLM's ``llm_request`` under them.

vLLM's span is built as vLLM builds it (``vllm/v1/engine/output_processor.py``,
``vllm/tracing.py``): after the request finished, a SERVER span named ``llm_request`` in the
trace context the caller's ``traceparent`` header carried, starting at the request's arrival,
with the float-seconds ``gen_ai.latency.*`` attributes, the ``gen_ai.usage.*_tokens`` counts,
the request id and the sampling parameters. vLLM's tracer provider has no resource attributes
but what ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` give it: here ``service.name``,
the environment and the deployment's ``model.version`` (a canary runs as a second deployment).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from latencyboard.demo.incident import Incident
from latencyboard.demo.llm import LlmBatch, LlmPipeline, sample_llm_requests
from latencyboard.demo.profiles import ENVIRONMENT, candidate_share_at

STAGE_ATTRIBUTE = "inference.stage"
VLLM_SPAN = "llm_request"
_PROPAGATOR = TraceContextTextMapPropagator()
_S = 1e-9  # vLLM's latency attributes are float seconds


class ContextLengthExceeded(ValueError):
    """What the gateway raises for a prompt longer than the model's context."""


def tracer_providers(
    pipeline: LlmPipeline, processor: Callable[[], SpanProcessor]
) -> list[TracerProvider]:
    """The gateway's tracer provider, then vLLM's of the baseline and of the canary
    deployment, each with a span processor of its own; the caller shuts them down."""

    def provider(attributes: dict[str, str]) -> TracerProvider:
        resource = Resource.create({**attributes, "deployment.environment.name": ENVIRONMENT})
        made = TracerProvider(resource=resource, shutdown_on_exit=False)
        made.add_span_processor(processor())
        return made

    gateway = {"service.name": pipeline.gateway, "service.version": pipeline.gateway_version}
    return [provider(gateway)] + [
        provider({"service.name": pipeline.name, "model.version": version.name})
        for version in pipeline.model_versions
    ]


def llm_traffic(pipeline: LlmPipeline, providers: Sequence[TracerProvider]) -> LlmTraffic:
    """The traffic of ``pipeline`` through :func:`tracer_providers`' providers."""
    gateway, *vllm = (provider.get_tracer("latencyboard.demo") for provider in providers)
    return LlmTraffic(pipeline, gateway, vllm)


@dataclass(frozen=True)
class LlmTraffic:
    """The LLM pipeline as demo traffic (:class:`latencyboard.demo.service.Traffic`): the
    gateway's tracer and vLLM's, one per model version."""

    pipeline: LlmPipeline
    gateway: Tracer
    vllm: Sequence[Tracer]

    @property
    def requests_per_s(self) -> float:
        return self.pipeline.requests_per_s

    def sample(
        self, n: int, rng: np.random.Generator, now_s: float, incident: Incident | None
    ) -> LlmBatch:
        share = float(candidate_share_at(self.pipeline, now_s))
        return sample_llm_requests(self.pipeline, n, rng, candidate_share=share)

    def emit(self, batch: LlmBatch, row: int, start_ns: int) -> None:
        emit_llm_request(self, batch, row, start_ns)


def emit_llm_request(traffic: LlmTraffic, batch: LlmBatch, row: int, start_ns: int) -> None:
    """The spans of request ``row``, the gateway's root span starting at ``start_ns``: the
    gateway's SERVER span, its CLIENT call to vLLM and vLLM's ``llm_request`` under it; or,
    for a refused request, the gateway's span alone, failed with the exception recorded."""
    pipeline = traffic.pipeline
    version = int(batch.model_version_idx[row])
    refused = bool(batch.refused[row])
    root = traffic.gateway.start_span(
        pipeline.root_name,
        context=Context(),
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": "POST",
            "http.route": pipeline.http_route,
            "http.response.status_code": 400 if refused else 200,
            "gen_ai.request.model": pipeline.served_model,
            "model.version": pipeline.model_versions[version].name,
        },
        start_time=start_ns,
    )
    if refused:
        _refuse(root, int(batch.prompt_tokens[row]), start_ns + int(batch.check_ns[row]))
    else:
        _call_vllm(traffic, batch, row, start_ns, trace.set_span_in_context(root), version)
    root.end(end_time=start_ns + int(batch.root_ns[row]))


def _refuse(root: trace.Span, prompt_tokens: int, at_ns: int) -> None:
    try:
        _check_context(prompt_tokens)
    except ContextLengthExceeded as exc:
        root.record_exception(exc, timestamp=at_ns)
        root.set_attribute("error.type", type(exc).__qualname__)
        root.set_status(Status(StatusCode.ERROR, str(exc)))


def _check_context(prompt_tokens: int) -> None:
    raise ContextLengthExceeded(
        f"This model's maximum context length is 8192 tokens; the messages take "
        f"{max(prompt_tokens, 8193)}."
    )


def _call_vllm(
    traffic: LlmTraffic,
    batch: LlmBatch,
    row: int,
    start_ns: int,
    parent: Context,
    version: int,
) -> None:
    pipeline = traffic.pipeline
    call = traffic.gateway.start_span(
        "POST",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes={
            STAGE_ATTRIBUTE: "vllm_call",
            "http.request.method": "POST",
            "server.address": pipeline.name,
            "server.port": 8000,
            "url.full": f"http://{pipeline.name}:8000{pipeline.http_route}",
            "http.response.status_code": 200,
        },
        start_time=start_ns + int(batch.call_ns[row]),
    )
    headers: dict[str, str] = {}
    _PROPAGATOR.inject(headers, context=trace.set_span_in_context(call))
    arrival = start_ns + int(batch.arrival_ns[row])
    queue, prefill, decode = (
        int(batch.queue_ns[row]),
        int(batch.prefill_ns[row]),
        int(batch.decode_ns[row]),
    )
    e2e = int(batch.e2e_ns[row])
    attributes: dict[str, AttributeValue] = {
        "gen_ai.latency.time_to_first_token": int(batch.ttft_ns[row]) * _S,
        "gen_ai.latency.e2e": e2e * _S,
        "gen_ai.latency.time_in_queue": queue * _S,
        "gen_ai.usage.prompt_tokens": int(batch.prompt_tokens[row]),
        "gen_ai.usage.completion_tokens": int(batch.output_tokens[row]),
        "gen_ai.latency.time_in_model_prefill": prefill * _S,
        "gen_ai.latency.time_in_model_decode": decode * _S,
        "gen_ai.latency.time_in_model_inference": (prefill + decode) * _S,
        "gen_ai.request.id": f"chatcmpl-{uuid.uuid4().hex}",
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.max_tokens": pipeline.max_tokens,
        "gen_ai.request.temperature": 0.7,
        "gen_ai.request.n": 1,
    }
    llm = traffic.vllm[version].start_span(
        VLLM_SPAN,
        context=_PROPAGATOR.extract(headers),
        kind=SpanKind.SERVER,
        attributes=attributes,
        start_time=arrival,
    )
    llm.end(end_time=arrival + e2e)
    call.end(end_time=start_ns + int(batch.call_end_ns[row]))
