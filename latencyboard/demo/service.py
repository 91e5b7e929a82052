"""The demo inference service: sampled requests become OpenTelemetry spans.

Nothing sleeps through a stage: each request's spans are created with explicit nanosecond
timestamps from its sampled durations, so emulating tens of requests per second costs little CPU.
A request's root span starts at the (real) time it arrived; the spans are created once the request
would have finished, as an instrumented server would end and export them, so no exported
timestamp lies in the future.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from latencyboard.demo.incident import Incident
from latencyboard.demo.profiles import (
    ENVIRONMENT,
    FORWARD_INDEX,
    HYDRATION_INDEX,
    Pipeline,
    RequestBatch,
    candidate_share_at,
    sample_requests,
)

STAGE_ATTRIBUTE = "inference.stage"
PROTOCOLS = ("http/protobuf", "grpc")

logger = logging.getLogger(__name__)


def pipeline_resource(pipeline: Pipeline) -> Resource:
    """The OTel resource of one demo service (``OTEL_RESOURCE_ATTRIBUTES`` may add to it)."""
    return Resource.create(
        {
            "service.name": pipeline.name,
            "service.version": pipeline.service_version,
            "deployment.environment.name": ENVIRONMENT,
        }
    )


def make_tracer_provider(pipeline: Pipeline, processor: SpanProcessor) -> TracerProvider:
    """A tracer provider for ``pipeline`` sending its spans to ``processor``.

    The caller shuts it down (no atexit hook), so the flush happens while logging still works.
    """
    provider = TracerProvider(resource=pipeline_resource(pipeline), shutdown_on_exit=False)
    provider.add_span_processor(processor)
    return provider


def otlp_protocol_from_env() -> str:
    """The OTLP protocol the standard environment variables ask for (default http/protobuf)."""
    return (
        os.environ.get(OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
        or os.environ.get(OTEL_EXPORTER_OTLP_PROTOCOL)
        or "http/protobuf"
    ).strip()


def make_exporter(protocol: str) -> SpanExporter:
    """An OTLP span exporter for ``protocol``, configured by the ``OTEL_EXPORTER_OTLP_*`` env vars.

    Raises ``ValueError`` for protocols the Python exporters do not implement (``http/json``).
    """
    # Imported here so that only the chosen transport (requests or grpcio) gets loaded.
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter()
    raise ValueError(f"unsupported OTLP protocol {protocol!r}, expected one of {PROTOCOLS}")


def emit_request(
    tracer: Tracer, pipeline: Pipeline, batch: RequestBatch, row: int, start_ns: int
) -> None:
    """Create the spans of request ``row`` of ``batch``, its root span starting at ``start_ns``.

    One root SERVER span, and one child per stage that ran, in order, separated by the sampled
    gaps. A failed request has ERROR status on the failing stage and on the root, and no spans
    for the stages after the failing one.
    """
    stage_ns = batch.stage_ns[row].tolist()
    gap_ns = batch.gap_ns[row].tolist()
    error_stage = int(batch.error_stage[row])
    failed = pipeline.stages[error_stage] if error_stage >= 0 else None
    version = pipeline.model_versions[int(batch.model_version_idx[row])].name

    root_attributes: dict[str, AttributeValue] = {
        "http.request.method": pipeline.http_method,
        "http.route": pipeline.http_route,
        "http.response.status_code": failed.error_http_status if failed else 200,
        "model.version": version,
    }
    if failed:
        root_attributes["error.type"] = failed.error_type
    root = tracer.start_span(
        pipeline.root_name,
        # An empty context: every request is a new trace, whatever span is current.
        context=Context(),
        kind=SpanKind.SERVER,
        attributes=root_attributes,
        start_time=start_ns,
    )
    parent = trace.set_span_in_context(root)

    t = start_ns
    n_ran = error_stage + 1 if failed else len(pipeline.stages)
    for s, stage in enumerate(pipeline.stages[:n_ran]):
        t += gap_ns[s]
        attributes: dict[str, AttributeValue] = {STAGE_ATTRIBUTE: stage.name}
        if s == HYDRATION_INDEX:
            attributes["cache_hit"] = bool(batch.cache_hit[row])
        elif s == FORWARD_INDEX:
            attributes["model.version"] = version
        span = tracer.start_span(stage.name, context=parent, attributes=attributes, start_time=t)
        if s == error_stage:
            span.set_attribute("error.type", stage.error_type)
            span.set_status(Status(StatusCode.ERROR, stage.error_type))
        t += stage_ns[s]
        span.end(end_time=t)

    if failed:
        root.set_status(Status(StatusCode.ERROR, failed.error_type))
    root.end(end_time=t + gap_ns[-1])


def slow_down(pipeline: Pipeline, batch: RequestBatch, incident: Incident) -> None:
    """Scale the incident's stage durations in ``batch`` (in place) by its factor."""
    for s, stage in enumerate(pipeline.stages):
        if stage.name == incident.stage:
            column = batch.stage_ns[:, s]
            column[:] = np.rint(column * incident.factor).astype(np.int64)


class Sampled(Protocol):
    """Requests sampled in bulk; each request's root span lasts ``root_ns``."""

    @property
    def root_ns(self) -> npt.NDArray[np.int64]: ...


B = TypeVar("B", bound=Sampled)


class Traffic(Protocol[B]):
    """One kind of demo request: its daily mean rate, how a batch of it is sampled (``now_s``
    places the rollout; ``incident`` may slow it), and how one request becomes spans."""

    @property
    def requests_per_s(self) -> float: ...
    def sample(
        self, n: int, rng: np.random.Generator, now_s: float, incident: Incident | None
    ) -> B: ...
    def emit(self, batch: B, row: int, start_ns: int) -> None: ...


@dataclass(frozen=True)
class PipelineTraffic:
    """A six-stage demo pipeline (:mod:`latencyboard.demo.profiles`) sending through
    ``tracer``."""

    pipeline: Pipeline
    tracer: Tracer

    @property
    def requests_per_s(self) -> float:
        return self.pipeline.requests_per_s

    def sample(
        self, n: int, rng: np.random.Generator, now_s: float, incident: Incident | None
    ) -> RequestBatch:
        share = float(candidate_share_at(self.pipeline, now_s))
        batch = sample_requests(self.pipeline, n, rng, candidate_share=share)
        if incident is not None and incident.active(self.pipeline.name, now_s):
            slow_down(self.pipeline, batch, incident)
        return batch

    def emit(self, batch: RequestBatch, row: int, start_ns: int) -> None:
        emit_request(self.tracer, self.pipeline, batch, row, start_ns)


def run_traffic(
    sources: Sequence[Traffic[Any]],
    total_rate: float,
    stop: threading.Event,
    duration_s: float | None = None,
    rng: np.random.Generator | None = None,
    tick_s: float = 0.1,
    log_every_s: float = 10.0,
    incident: Callable[[], Incident | None] | None = None,
) -> int:
    """Send Poisson traffic of ``sources`` until ``stop`` is set or ``duration_s`` has passed.

    ``total_rate`` (requests/s) is split between the sources in proportion to their
    ``requests_per_s``. ``incident``, asked once a tick, may slow one stage of one pipeline
    (see :mod:`latencyboard.demo.incident`). Requests still in flight at the end are dropped,
    as their spans would end in the future. Returns the number of requests sent.
    """
    rng = rng if rng is not None else np.random.default_rng()
    weights = np.array([source.requests_per_s for source in sources])
    rates = total_rate * weights / weights.sum()
    # Timestamps come from a wall clock anchored once and advanced by the monotonic clock, so a
    # system clock step cannot make arrival intervals negative or reorder requests.
    mono0 = time.monotonic_ns()
    wall0 = time.time_ns()
    deadline = None if duration_s is None else mono0 + int(duration_s * 1e9)
    # In-flight requests ordered by end time: (end_ns, tie-breaker, source, batch, row, start_ns).
    in_flight: list[tuple[int, int, int, Any, int, int]] = []
    tie_breaker = itertools.count()
    sent = 0
    last_ns = wall0
    last_log_ns, sent_at_last_log = wall0, 0

    while True:
        mono = time.monotonic_ns()
        wait_s = tick_s if deadline is None else min(tick_s, max(deadline - mono, 0) / 1e9)
        if stop.wait(wait_s):
            break
        mono = time.monotonic_ns()
        now_ns = wall0 + (mono - mono0)

        injected = incident() if incident is not None else None
        # Arrivals of the interval that just elapsed: a Poisson count, uniformly spread.
        for k, source in enumerate(sources):
            n = int(rng.poisson(rates[k] * (now_ns - last_ns) / 1e9))
            if n == 0:
                continue
            starts = rng.integers(last_ns, now_ns, size=n)
            batch = source.sample(n, rng, now_ns / 1e9, injected)
            ends = starts + batch.root_ns
            for row, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
                heapq.heappush(in_flight, (end, next(tie_breaker), k, batch, row, start))
        last_ns = now_ns

        while in_flight and in_flight[0][0] <= now_ns:
            _, _, k, batch, row, start_ns = heapq.heappop(in_flight)
            sources[k].emit(batch, row, start_ns)
            sent += 1

        if now_ns - last_log_ns >= log_every_s * 1e9:
            elapsed_s = (now_ns - last_log_ns) / 1e9
            logger.info(
                "demo: sent %d requests (%.1f req/s over the last %.0f s)",
                sent,
                (sent - sent_at_last_log) / elapsed_s,
                elapsed_s,
            )
            last_log_ns, sent_at_last_log = now_ns, sent
        if deadline is not None and mono >= deadline:
            break
    return sent
