"""Building OTLP requests for tests with the real protobuf classes."""

from __future__ import annotations

import http.client
import os
import re
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes


def post(url: str, body: bytes, headers: dict[str, str]) -> Reply:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    try:
        conn.request("POST", parts.path, body=body, headers=headers)
        response = conn.getresponse()
        return Reply(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
    finally:
        conn.close()


def metric(http_port: int, name: str, **labels: str) -> float:
    """One sample of the ingest process's /metrics (labels in Prometheus' sorted order); 0 when
    it has not been counted yet."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics") as response:
        text = response.read().decode()
    selector = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    sample = re.escape(f"{name}{{{selector}}}" if labels else name)
    found = re.search(rf"^{sample} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


@dataclass
class SpanSpec:
    trace_id: bytes = field(default_factory=lambda: os.urandom(16))
    span_id: bytes = field(default_factory=lambda: os.urandom(8))
    parent_span_id: bytes = b""
    name: str = "model_forward"
    start_ns: int = field(default_factory=lambda: time.time_ns() - 5_000_000_000)
    duration_ns: int = 12_000_000
    attributes: dict[str, str] = field(default_factory=dict)
    kind: int = Span.SPAN_KIND_INTERNAL

    def build(self) -> Span:
        return Span(
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            name=self.name,
            kind=self.kind,  # type: ignore[arg-type]
            start_time_unix_nano=self.start_ns,
            end_time_unix_nano=self.start_ns + self.duration_ns,
            attributes=[kv(k, v) for k, v in self.attributes.items()],
        )


def export_request(*specs: SpanSpec, service: str = "recommender") -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    resource_spans: ResourceSpans = request.resource_spans.add()
    resource_spans.resource.attributes.append(kv("service.name", service))
    scope_spans = resource_spans.scope_spans.add()
    scope_spans.spans.extend(spec.build() for spec in specs)
    return request


def signed(raw: bytes) -> int:
    return int.from_bytes(raw, "big", signed=True)
