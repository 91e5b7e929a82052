"""OTLP/HTTP request bodies for the ingest benchmark: realistic 512-span exports, made distinct.

``BodyTemplate`` encodes an export once and remembers where its ids and timestamps sit, so that
each request costs a byte scatter instead of building and encoding a fresh message.
"""

from __future__ import annotations

import random
import struct
import time

import numpy as np
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

SPANS_PER_REQUEST = 512

# service -> (version, route, model, typical model_forward ms)
SERVICES = {
    "fraud-scorer": ("2.14.1", "/v1/score", "xgb-fraud", 6.0),
    "recommender": ("5.3.0", "/v2/recommendations", "two-tower-recsys", 28.0),
    "clinical-alerts": ("1.8.7", "/alerts/evaluate", "sepsis-lstm", 45.0),
}
# stage -> typical duration in ms (model_forward comes from the service)
STAGES = {
    "queue_wait": 2.0,
    "feature_hydration": 9.0,
    "preprocess": 3.0,
    "model_forward": 0.0,
    "postprocess": 1.5,
    "serialize": 0.4,
}
SERVER, INTERNAL = Span.SpanKind.SPAN_KIND_SERVER, Span.SpanKind.SPAN_KIND_INTERNAL
STATUS_ERROR = Status.StatusCode.STATUS_CODE_ERROR


def _attr(key: str, value: str | bool | int | float) -> KeyValue:
    if isinstance(value, bool):  # before int: bool is an int
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


class BodyTemplate:
    """A pre-encoded 512-span export plus the byte offsets of its ids and timestamps.

    ``render`` copies the bytes and scatters fresh random ids (children keep pointing at their
    root's new span id) and shifts every timestamp by the time since the template was built,
    so each request is distinct, realistic and costs the sender 0.2-0.4 ms instead of the ~20 ms
    of building and encoding a fresh message (which would make the senders the bottleneck).
    """

    def __init__(self, rng: random.Random, now_ns: int) -> None:
        self.base_ns = now_ns
        request, spans, trace_of, parent_of = self._build(rng, now_ns)
        body = request.SerializeToString()
        self.template = np.frombuffer(body, dtype=np.uint8).copy()
        self.traces = max(trace_of) + 1
        self.trace_slot = np.array(trace_of)
        children = [i for i, parent in enumerate(parent_of) if parent is not None]
        self.parent_slot = np.array([parent_of[i] for i in children])
        trace_at, span_at, parent_at, time_at = [], [], [], []
        cursor = 0
        for i, span in enumerate(spans):
            # Tag + value patterns: ids are random and timestamps carry random nanoseconds,
            # so each pattern occurs once in its span (checked below by decoding a render).
            start = body.index(b"\x0a\x10" + span.trace_id, cursor) + 2
            trace_at.append(start)
            found = [start + 16]
            span_at.append(body.index(b"\x12\x08" + span.span_id, start) + 2)
            found.append(span_at[-1] + 8)
            if parent_of[i] is not None:
                parent_at.append(body.index(b"\x22\x08" + span.parent_span_id, start) + 2)
                found.append(parent_at[-1] + 8)
            for tag, value in (
                (b"\x39", span.start_time_unix_nano),
                (b"\x41", span.end_time_unix_nano),
            ):
                time_at.append(body.index(tag + struct.pack("<Q", value), start) + 1)
                found.append(time_at[-1] + 8)
            cursor = max(found)
        assert len(children) == len(parent_at)
        self.trace_pos = np.array(trace_at)[:, None] + np.arange(16)
        self.span_pos = np.array(span_at)[:, None] + np.arange(8)
        self.parent_pos = np.array(parent_at)[:, None] + np.arange(8)
        self.time_pos = np.array(time_at)[:, None] + np.arange(8)
        self.times = self.template[self.time_pos].copy().view("<u8").ravel()
        self._check(spans, trace_of, parent_of)

    @staticmethod
    def _build(
        rng: random.Random, now_ns: int
    ) -> tuple[ExportTraceServiceRequest, list[Span], list[int], list[int | None]]:
        """Traces of 1 SERVER root + 6 stage children until 512 spans, grouped by service."""
        by_service: dict[str, list[list[Span]]] = {name: [] for name in SERVICES}
        count = 0
        while count < SPANS_PER_REQUEST:
            service = rng.choice(list(SERVICES))
            trace = _trace(rng, service, now_ns, SPANS_PER_REQUEST - count)
            by_service[service].append(trace)
            count += len(trace)
        request = ExportTraceServiceRequest()
        spans: list[Span] = []
        trace_of: list[int] = []
        parent_of: list[int | None] = []
        for service, traces in by_service.items():
            if not traces:
                continue
            version = SERVICES[service][0]
            request.resource_spans.append(
                ResourceSpans(
                    resource=Resource(
                        attributes=[
                            _attr("service.name", service),
                            _attr("service.version", version),
                            _attr("deployment.environment.name", "production"),
                        ]
                    ),
                    scope_spans=[
                        ScopeSpans(
                            scope=InstrumentationScope(
                                name="opentelemetry.instrumentation.fastapi", version="0.48b0"
                            ),
                            spans=[span for trace in traces for span in trace],
                        )
                    ],
                )
            )
            for trace in traces:
                root, number = len(spans), trace_of[-1] + 1 if trace_of else 0
                for position, span in enumerate(trace):
                    trace_of.append(number)
                    parent_of.append(None if position == 0 else root)
                    spans.append(span)
        # Re-read the spans from the message: the offsets must follow its serialisation order.
        ordered = [
            span
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        assert [s.span_id for s in ordered] == [s.span_id for s in spans]
        return request, ordered, trace_of, parent_of

    def _check(self, spans: list[Span], trace_of: list[int], parent_of: list[int | None]) -> None:
        """Render once and decode: every patched field must hold exactly what was scattered."""
        body, traces, ids = self._render(np.random.default_rng(0), self.base_ns + 10**9)
        decoded = [
            span
            for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        assert len(decoded) == len(spans) == SPANS_PER_REQUEST
        for i, (old, new) in enumerate(zip(spans, decoded, strict=True)):
            assert new.trace_id == traces[trace_of[i]].tobytes()
            assert new.span_id == ids[i].tobytes()
            parent = parent_of[i]
            assert new.parent_span_id == (b"" if parent is None else ids[parent].tobytes())
            assert new.start_time_unix_nano == old.start_time_unix_nano + 10**9
            assert new.end_time_unix_nano == old.end_time_unix_nano + 10**9
            assert new.name == old.name
            assert new.attributes == old.attributes

    def _render(
        self, rng: np.random.Generator, now_ns: int
    ) -> tuple[bytes, np.ndarray, np.ndarray]:
        out = self.template.copy()
        traces = rng.integers(1, 256, size=(self.traces, 16), dtype=np.uint8)
        ids = rng.integers(1, 256, size=(SPANS_PER_REQUEST, 8), dtype=np.uint8)
        out[self.trace_pos] = traces[self.trace_slot]
        out[self.span_pos] = ids
        out[self.parent_pos] = ids[self.parent_slot]
        shifted = (self.times + np.uint64(now_ns - self.base_ns)).astype("<u8")
        out[self.time_pos] = shifted.view(np.uint8).reshape(-1, 8)
        return out.tobytes(), traces, ids

    def render(self, rng: np.random.Generator) -> bytes:
        return self._render(rng, time.time_ns())[0]


def _trace(rng: random.Random, service: str, now_ns: int, room: int) -> list[Span]:
    """One inference request: a SERVER root and its six stages, back to back, ended < 30 s ago.

    With less ``room`` than a full trace, only the root (a request served from cache).
    """
    _version, route, model, forward_ms = SERVICES[service]
    stages = list(STAGES) if room >= 1 + len(STAGES) else []
    durations = [
        rng.lognormvariate(0, 0.5) * (forward_ms if name == "model_forward" else typical) * 1e6
        for name, typical in STAGES.items()
        if name in stages
    ]
    total = int(sum(durations)) + rng.randrange(100_000, 2_000_000)
    # Random nanoseconds in every timestamp keep each one unique within a body.
    end = now_ns - rng.randrange(1, 30 * 10**9)
    start = end - total
    trace_id, root_id = rng.randbytes(16), rng.randbytes(8)
    cache_hit = not stages or rng.random() < 0.2
    failed = rng.random() < 0.005
    batch = rng.choice([1, 1, 2, 4, 8, 16])
    common = [
        _attr("model.name", model),
        _attr("model.version", f"{model}-{rng.randrange(40, 44)}"),
        _attr("cache_hit", cache_hit),
        _attr("http.route", route),
        _attr("inference.batch_size", batch),
    ]
    root = Span(
        trace_id=trace_id,
        span_id=root_id,
        name=f"POST {route}",
        kind=SERVER,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=[
            *common,
            _attr("http.request.method", "POST"),
            _attr("http.response.status_code", 500 if failed else 200),
            _attr("tenant.id", f"tenant-{rng.randrange(1, 200):03d}"),
        ],
        status=Status(code=STATUS_ERROR, message="model_forward failed") if failed else None,
    )
    spans = [root]
    cursor = start + rng.randrange(10_000, 200_000)
    for name, duration in zip(stages, durations, strict=True):
        child_end = cursor + int(duration)
        error = failed and name == "model_forward"
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=rng.randbytes(8),
                parent_span_id=root_id,
                name=name,
                kind=INTERNAL,
                start_time_unix_nano=cursor,
                end_time_unix_nano=child_end,
                attributes=[
                    _attr("inference.stage", name),
                    *common,
                    _attr("device", "cpu" if name != "model_forward" else "cuda:0"),
                    _attr("queue.depth", rng.randrange(0, 64) if name == "queue_wait" else 0),
                ],
                status=Status(code=STATUS_ERROR, message="CUDA error: out of memory")
                if error
                else None,
            )
        )
        cursor = child_end
    return spans
