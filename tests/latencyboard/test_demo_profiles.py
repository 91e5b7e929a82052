"""The demo traffic profiles and the spans the demo service builds from them."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from latencyboard.demo.profiles import (
    FEATURE_HYDRATION,
    FORWARD_INDEX,
    HYDRATION_INDEX,
    MODEL_FORWARD,
    PIPELINES,
    ROLLOUT_STEPS,
    STAGE_NAMES,
    Pipeline,
    RequestBatch,
    candidate_share_at,
    diurnal_factor,
    sample_requests,
)
from latencyboard.demo.service import (
    STAGE_ATTRIBUTE,
    PipelineTraffic,
    emit_request,
    make_exporter,
    make_tracer_provider,
    otlp_protocol_from_env,
    run_traffic,
)

N = 200_000
NS_PER_MS = 1_000_000
START_NS = 1_763_000_000 * 1_000_000_000
by_name = pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])


@pytest.fixture(scope="module")
def batches() -> dict[str, RequestBatch]:
    """A large seeded sample per pipeline, half of it on the candidate model."""
    rng = np.random.default_rng(20240601)
    return {p.name: sample_requests(p, N, rng, candidate_share=0.5) for p in PIPELINES}


def _median_ms(values: np.ndarray) -> float:
    return float(np.median(values)) / NS_PER_MS


def test_three_pipelines_run_the_six_stages_in_order() -> None:
    assert [p.name for p in PIPELINES] == ["fraud-scorer", "recommender", "clinical-alerts"]
    assert STAGE_NAMES == (
        "queue_wait",
        "feature_hydration",
        "preprocess",
        "model_forward",
        "postprocess",
        "serialize",
    )
    for pipeline in PIPELINES:
        assert tuple(stage.name for stage in pipeline.stages) == STAGE_NAMES


@by_name
def test_stage_medians_match_the_profile(
    pipeline: Pipeline, batches: dict[str, RequestBatch]
) -> None:
    batch = batches[pipeline.name]
    baseline = batch.model_version_idx == 0
    for s, stage in enumerate(pipeline.stages):
        sample = batch.ran[:, s]
        if s == HYDRATION_INDEX:
            sample &= batch.cache_hit
        if s == FORWARD_INDEX:
            sample &= baseline
        measured = _median_ms(batch.stage_ns[sample, s])
        assert measured == pytest.approx(stage.latency.median_ms, rel=0.04), stage.name


@by_name
def test_cache_misses_make_feature_hydration_much_slower(
    pipeline: Pipeline, batches: dict[str, RequestBatch]
) -> None:
    batch = batches[pipeline.name]
    hydration = pipeline.stages[HYDRATION_INDEX]
    assert hydration.name == FEATURE_HYDRATION
    assert hydration.cache_miss is not None
    assert batch.cache_hit.mean() == pytest.approx(pipeline.cache_hit_rate, abs=0.005)
    ran = batch.ran[:, HYDRATION_INDEX]
    hit_ms = _median_ms(batch.stage_ns[ran & batch.cache_hit, HYDRATION_INDEX])
    miss_ms = _median_ms(batch.stage_ns[ran & ~batch.cache_hit, HYDRATION_INDEX])
    assert miss_ms == pytest.approx(hydration.cache_miss.median_ms, rel=0.04)
    assert miss_ms > 5 * hit_ms


@by_name
def test_candidate_model_is_slower_in_model_forward_only(
    pipeline: Pipeline, batches: dict[str, RequestBatch]
) -> None:
    batch = batches[pipeline.name]
    baseline, candidate = pipeline.model_versions
    assert candidate.forward_factor > 1.2
    assert (batch.model_version_idx == 1).mean() == pytest.approx(0.5, abs=0.005)
    on_candidate = batch.model_version_idx == 1
    for s, stage in enumerate(pipeline.stages):
        ran = batch.ran[:, s] & batch.cache_hit
        ratio = _median_ms(batch.stage_ns[ran & on_candidate, s]) / _median_ms(
            batch.stage_ns[ran & ~on_candidate, s]
        )
        expected = candidate.forward_factor / baseline.forward_factor if s == FORWARD_INDEX else 1
        assert ratio == pytest.approx(expected, rel=0.04), stage.name


@by_name
def test_latencies_have_heavy_tails(pipeline: Pipeline, batches: dict[str, RequestBatch]) -> None:
    batch = batches[pipeline.name]
    forward = pipeline.stages[FORWARD_INDEX]
    assert forward.name == MODEL_FORWARD
    durations = batch.stage_ns[
        batch.ran[:, FORWARD_INDEX] & (batch.model_version_idx == 0), FORWARD_INDEX
    ]
    p50, p999 = np.percentile(durations, [50, 99.9])
    # The log-normal body alone would put p99.9 at exp(3.09 sigma) times the median.
    assert p999 / p50 > 3 * np.exp(3.09 * forward.latency.sigma)
    root_p50, root_p999 = np.percentile(batch.root_ns, [50, 99.9])
    assert root_p999 / root_p50 > 8


@by_name
def test_root_duration_is_the_stages_plus_small_gaps(
    pipeline: Pipeline, batches: dict[str, RequestBatch]
) -> None:
    batch = batches[pipeline.name]
    assert batch.stage_ns.dtype == np.int64
    assert batch.stage_ns.shape == (N, len(STAGE_NAMES))
    assert batch.gap_ns.shape == (N, len(STAGE_NAMES) + 1)
    np.testing.assert_array_equal(batch.root_ns, batch.stage_ns.sum(1) + batch.gap_ns.sum(1))
    starts = batch.stage_start_ns
    np.testing.assert_array_equal(starts[:, 0], batch.gap_ns[:, 0])
    np.testing.assert_array_equal(
        starts[:, 1:], starts[:, :-1] + batch.stage_ns[:, :-1] + batch.gap_ns[:, 1:-1]
    )
    ran_gaps = batch.gap_ns[:, :-1][batch.ran]
    assert (ran_gaps > 0).all()
    assert (batch.stage_ns[batch.ran] > 0).all()
    assert np.median(batch.gap_ns) < 0.1 * NS_PER_MS
    assert np.median(batch.gap_ns.sum(1) / batch.root_ns) < 0.02


@by_name
def test_about_one_percent_of_requests_fail_and_stop_at_the_failing_stage(
    pipeline: Pipeline, batches: dict[str, RequestBatch]
) -> None:
    batch = batches[pipeline.name]
    rate = batch.is_error.mean()
    assert 0.005 <= pipeline.error_rate <= 0.015
    tolerance = 4 * np.sqrt(pipeline.error_rate * (1 - pipeline.error_rate) / N)
    assert rate == pytest.approx(pipeline.error_rate, abs=tolerance)

    failing = {pipeline.stages[s].name for s in np.unique(batch.error_stage[batch.is_error])}
    assert failing == {stage.name for stage in pipeline.stages if stage.error_weight > 0}
    assert batch.ran[~batch.is_error].all()
    failed = np.flatnonzero(batch.is_error)
    for row in failed[:50]:
        after = slice(batch.error_stage[row] + 1, None)
        assert batch.ran[row, : after.start].all()
        assert not batch.ran[row, after].any()
        assert (batch.stage_ns[row, after] == 0).all()
        assert (batch.gap_ns[row, :-1][after] == 0).all()
        assert batch.gap_ns[row, -1] > 0


def test_sampling_is_reproducible_from_the_seed() -> None:
    pipeline = PIPELINES[0]
    first = sample_requests(pipeline, 1000, np.random.default_rng(7), candidate_share=0.3)
    second = sample_requests(pipeline, 1000, np.random.default_rng(7), candidate_share=0.3)
    assert len(first) == 1000
    for name in ("stage_ns", "gap_ns", "cache_hit", "model_version_idx", "error_stage"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))


def test_candidate_share_can_vary_per_request() -> None:
    pipeline = PIPELINES[1]
    share = np.repeat([0.0, 1.0], 5000)
    batch = sample_requests(pipeline, len(share), np.random.default_rng(3), candidate_share=share)
    np.testing.assert_array_equal(batch.model_version_idx, share.astype(np.int8))


@by_name
def test_diurnal_factor_is_higher_by_day_and_averages_one(pipeline: Pipeline) -> None:
    day_start = 1_763_078_400.0  # a UTC midnight
    hours = day_start + np.arange(0, 86_400, 60.0)
    factors = diurnal_factor(pipeline, hours)
    assert factors.mean() == pytest.approx(1.0, abs=1e-9)
    assert (factors > 0).all()
    peak = float(diurnal_factor(pipeline, day_start + pipeline.peak_hour_utc * 3600))
    trough = float(diurnal_factor(pipeline, day_start + (pipeline.peak_hour_utc + 12) * 3600))
    assert peak == pytest.approx(1 + pipeline.diurnal_amplitude)
    assert trough == pytest.approx(1 - pipeline.diurnal_amplitude)


@by_name
def test_candidate_rollouts_ramp_up_once_per_period(pipeline: Pipeline) -> None:
    times = 1_763_078_400.0 + np.linspace(0, pipeline.rollout_period_s, 10_000, endpoint=False)
    shares = candidate_share_at(pipeline, times)
    assert set(np.unique(shares).tolist()) == {0.0} | {share for _, share in ROLLOUT_STEPS}
    # A single ramp per period: the share changes 4 times (3 steps up, 1 rollback), cyclically.
    assert np.count_nonzero(np.diff(np.append(shares, shares[0]))) == len(ROLLOUT_STEPS) + 1
    assert float(candidate_share_at(pipeline, float(times[1234]))) == shares[1234]


def _spans_of_one_request(
    pipeline: Pipeline, batch: RequestBatch, row: int
) -> tuple[ReadableSpan, list[ReadableSpan]]:
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider(pipeline, SimpleSpanProcessor(exporter))
    emit_request(provider.get_tracer("test"), pipeline, batch, row, START_NS)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    roots = [span for span in spans if span.parent is None]
    assert len(roots) == 1
    children = sorted((span for span in spans if span.parent is not None), key=_start)
    return roots[0], children


def _start(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def _duration(span: ReadableSpan) -> int:
    assert span.start_time is not None
    assert span.end_time is not None
    return span.end_time - span.start_time


@by_name
def test_a_request_becomes_a_server_span_with_one_child_per_stage(pipeline: Pipeline) -> None:
    batch = sample_requests(pipeline, 500, np.random.default_rng(11), candidate_share=0.5)
    row = int(np.flatnonzero(~batch.is_error & (batch.model_version_idx == 1))[0])
    root, children = _spans_of_one_request(pipeline, batch, row)

    assert root.resource.attributes["service.name"] == pipeline.name
    assert root.resource.attributes["service.version"] == pipeline.service_version
    assert root.resource.attributes["deployment.environment.name"] == "production"
    assert root.name == pipeline.root_name
    assert root.kind is SpanKind.SERVER
    assert root.start_time == START_NS
    assert _duration(root) == batch.root_ns[row]
    assert root.status.status_code is StatusCode.UNSET
    assert root.attributes is not None
    assert root.attributes["http.response.status_code"] == 200
    assert root.attributes["model.version"] == pipeline.model_versions[1].name

    assert [span.name for span in children] == list(STAGE_NAMES)
    for s, span in enumerate(children):
        assert span.kind is SpanKind.INTERNAL
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id
        assert span.context.trace_id == root.context.trace_id
        assert span.attributes is not None
        assert span.attributes[STAGE_ATTRIBUTE] == STAGE_NAMES[s]
        assert span.start_time == START_NS + batch.stage_start_ns[row, s]
        assert _duration(span) == batch.stage_ns[row, s]
        assert span.status.status_code is StatusCode.UNSET
    hydration = children[HYDRATION_INDEX].attributes
    assert hydration is not None
    assert hydration["cache_hit"] is bool(batch.cache_hit[row])
    forward = children[FORWARD_INDEX].attributes
    assert forward is not None
    assert forward["model.version"] == pipeline.model_versions[1].name


def test_a_failed_request_marks_the_stage_and_the_root_and_stops_there() -> None:
    pipeline = PIPELINES[0]
    batch = sample_requests(pipeline, 20_000, np.random.default_rng(5))
    row = int(np.flatnonzero(batch.error_stage == FORWARD_INDEX)[0])
    root, children = _spans_of_one_request(pipeline, batch, row)

    failing = pipeline.stages[FORWARD_INDEX]
    assert [span.name for span in children] == list(STAGE_NAMES[: FORWARD_INDEX + 1])
    assert [span.status.status_code for span in children] == [StatusCode.UNSET] * FORWARD_INDEX + [
        StatusCode.ERROR
    ]
    assert children[-1].attributes is not None
    assert children[-1].attributes["error.type"] == failing.error_type
    assert root.status.status_code is StatusCode.ERROR
    assert root.attributes is not None
    assert root.attributes["http.response.status_code"] == failing.error_http_status
    assert _duration(root) == batch.root_ns[row]
    assert root.end_time == children[-1].end_time + batch.gap_ns[row, -1]


def test_run_traffic_sends_finished_requests_of_every_pipeline() -> None:
    exporter = InMemorySpanExporter()
    providers = [make_tracer_provider(p, SimpleSpanProcessor(exporter)) for p in PIPELINES]
    services = [
        PipelineTraffic(p, provider.get_tracer("test"))
        for p, provider in zip(PIPELINES, providers, strict=True)
    ]

    sent = run_traffic(
        services, 300.0, threading.Event(), duration_s=1.0, rng=np.random.default_rng(1)
    )
    returned_ns = time.time_ns()
    for provider in providers:
        provider.shutdown()

    spans = exporter.get_finished_spans()
    roots = [span for span in spans if span.parent is None]
    assert len(roots) == sent
    assert 200 < sent < 400
    assert {span.resource.attributes["service.name"] for span in roots} == {
        p.name for p in PIPELINES
    }
    assert all(span.end_time is not None and span.end_time <= returned_ns for span in spans)
    assert len(spans) > 6 * sent


def test_run_traffic_returns_when_stopped() -> None:
    exporter = InMemorySpanExporter()
    provider = make_tracer_provider(PIPELINES[0], SimpleSpanProcessor(exporter))
    stop = threading.Event()
    stop.set()
    began = time.monotonic()
    assert (
        run_traffic([PipelineTraffic(PIPELINES[0], provider.get_tracer("test"))], 30.0, stop) == 0
    )
    assert time.monotonic() - began < 1


def test_exporter_follows_the_otlp_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcSpanExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    assert otlp_protocol_from_env() == "http/protobuf"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert otlp_protocol_from_env() == "grpc"

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    for protocol, expected in (("http/protobuf", HttpSpanExporter), ("grpc", GrpcSpanExporter)):
        exporter = make_exporter(protocol)
        assert isinstance(exporter, expected)
        exporter.shutdown()
    with pytest.raises(ValueError, match="http/json"):
        make_exporter("http/json")
