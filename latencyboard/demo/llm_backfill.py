"""Days of the demo's LLM traffic (a gateway calling vLLM) as history, through live ingest.

The six-stage demo pipelines are backfilled in bulk (:mod:`.backfill`), every span of
a kind sharing one template. An LLM request's spans do not repeat: vLLM's ``llm_request``
carries the request's own latencies and token counts. So its history takes the live path:
hour by hour, the live demo's own code (:mod:`latencyboard.demo.llm_service`) builds the spans
with the OpenTelemetry SDK, they are encoded as an OTLP export request, decoded by ingest and
stored by its writer, exactly as if the demo had sent them then. It is a small part of the
history (about a tenth of its spans at the history's rates).
"""

from __future__ import annotations

import datetime as dt
import logging
from functools import partial

import numpy as np
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ingest import decoding, protobuf
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.demo import profiles
from latencyboard.demo.llm import LLM_PIPELINES, sample_llm_requests
from latencyboard.demo.llm_service import LlmTraffic, llm_traffic, tracer_providers
from latencyboard.teams.models import Team
from latencyboard.windows import DAY, duration_ns, unix_ns

logger = logging.getLogger(__name__)

CHUNK = dt.timedelta(hours=1)


def backfill_llm(
    team: Team,
    *,
    start: dt.datetime,
    end: dt.datetime,
    requests_per_s: float,
    protocol: str,
    seed: int | None = None,
) -> int:
    """Store the LLM pipelines' requests of ``[start, end)`` for ``team``, at
    ``requests_per_s`` each (a daily mean, on the demo's daily curve and rollouts), each
    hour in one ingest batch ``received_at`` ``end`` under ``protocol``; returns the spans
    stored."""
    rng = np.random.default_rng(seed)
    days = (end - start) / DAY
    limits = decoding.Limits(max_age_ns=duration_ns((days + 1) * DAY))
    writer = SpanWriter(conninfo(), max_connections=1)
    stored = 0
    try:
        for pipeline in LLM_PIPELINES:
            exporter = InMemorySpanExporter()
            providers = tracer_providers(pipeline, partial(SimpleSpanProcessor, exporter))
            traffic = llm_traffic(pipeline, providers)
            chunk = start
            while chunk < end:
                _emit_hour(traffic, chunk, min(chunk + CHUNK, end), requests_per_s, rng)
                chunk += CHUNK
                body = encode_spans(exporter.get_finished_spans()).SerializeToString()
                exporter.clear()
                decoded = protobuf.decode_protobuf(body, now_ns=unix_ns(end), limits=limits)
                if decoded.spans:
                    stored += writer.write(
                        team.pk,
                        decoded.spans,
                        rejected=decoded.rejected_spans,
                        protocol=protocol,
                        received_at=end,
                    ).stored
            for provider in providers:
                provider.shutdown()
    finally:
        writer.close()
    logger.info("backfill.llm.done", extra={"team": team.pk, "spans": stored})
    return stored


def _emit_hour(
    traffic: LlmTraffic,
    start: dt.datetime,
    end: dt.datetime,
    requests_per_s: float,
    rng: np.random.Generator,
) -> None:
    """The spans of the requests arriving in ``[start, end)`` that finished before ``end``:
    the hour's export cannot hold spans that end later (a few seconds' worth are left out)."""
    pipeline = traffic.pipeline
    start_ns, end_ns = unix_ns(start), unix_ns(end)
    middle_s = (start_ns + end_ns) / 2e9
    rate = requests_per_s * float(profiles.diurnal_factor(pipeline, middle_s))
    n = int(rng.poisson(rate * (end_ns - start_ns) / 1e9))
    arrivals = np.sort(rng.integers(start_ns, end_ns, size=n))
    share = profiles.candidate_share_at(pipeline, arrivals / 1e9)
    batch = sample_llm_requests(pipeline, n, rng, candidate_share=share)
    for row in np.flatnonzero(arrivals + batch.root_ns < end_ns).tolist():
        traffic.emit(batch, row, int(arrivals[row]))
