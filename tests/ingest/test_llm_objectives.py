"""A TTFT objective and a TPOT regression alert on vLLM's own spans, end to end: ``llm_request``
spans built as vLLM builds them go through the SDK's exporter to the ingest process and are
folded; the objective and the rule are made in their pages' forms, the measure chosen there as
a user chooses it; attainment and the alert are read back."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Sequence
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert, Rule
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import services as rollup_services
from latencyboard.sla.models import Objective
from latencyboard.sla.queries import window_budget
from latencyboard.teams.models import Role
from tests.factories import TeamWithToken, make_team_with_token, make_user

pytestmark = pytest.mark.django_db(transaction=True)

TTFT, TPOT = "time_to_first_token", "time_per_output_token"
SECOND = 10**9


def send_vllm(
    traces_url: str, token: str, arrivals_ns: Sequence[int], ttft_s: float, tpot_s: float
) -> None:
    """vLLM's llm_request span per arrival (vllm/v1/engine/output_processor.py): a SERVER span
    from arrival, its breakdown in float seconds; 101 output tokens each."""
    provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=traces_url, headers={"x-latencyboard-token": token})
        )
    )
    tracer = provider.get_tracer("vllm.v1.engine.output_processor")
    queue_s, tokens = 0.2 * ttft_s, 101
    decode_s = (tokens - 1) * tpot_s
    for number, arrival in enumerate(arrivals_ns):
        attributes: dict[str, AttributeValue] = {
            "gen_ai.latency.time_to_first_token": ttft_s,
            "gen_ai.latency.e2e": ttft_s + decode_s,
            "gen_ai.latency.time_in_queue": queue_s,
            "gen_ai.usage.prompt_tokens": 500,
            "gen_ai.usage.completion_tokens": tokens,
            "gen_ai.latency.time_in_model_prefill": ttft_s - queue_s,
            "gen_ai.latency.time_in_model_decode": decode_s,
            "gen_ai.latency.time_in_model_inference": ttft_s - queue_s + decode_s,
            "gen_ai.request.id": f"chatcmpl-{arrival}-{number}",
        }
        span = tracer.start_span(
            "llm_request", kind=SpanKind.SERVER, start_time=arrival, attributes=attributes
        )
        span.end(end_time=arrival + round((ttft_s + decode_s) * SECOND))
    provider.shutdown()


def fold() -> None:
    rollup_services.fold_until_idle(lambda: dt.datetime.now(dt.UTC), seconds=120)


def spread(start_ns: int, end_ns: int, count: int) -> list[int]:
    return [start_ns + (end_ns - start_ns) * k // count for k in range(count)]


def admin_of(tenant: TeamWithToken) -> Client:
    client = Client()
    client.force_login(cast(User, make_user(tenant.team, role=Role.ADMIN)))
    return client


def measure(pipeline: Pipeline, name: str) -> Stage:
    return Stage.objects.get(pipeline=pipeline, name=name)


def test_a_ttft_objective_counts_each_request_by_its_time_to_first_token(ingest_server):
    # given vLLM's spans of a team, an earlier request having made its pipeline and measures
    tenant = make_team_with_token()
    client = admin_of(tenant)
    now = time.time_ns()
    send_vllm(ingest_server.traces_url, tenant.token, [now - 600 * SECOND], 0.05, 0.02)
    fold()
    pipeline = Pipeline.objects.get(team=tenant.team, service_name="vllm")
    ttft = measure(pipeline, TTFT)

    # when an admin makes an objective "TTFT at most 100 ms for 90% of requests" in the form,
    # the measure offered among the stages
    form = client.get("/slas/new/").content.decode()
    assert re.search(rf'<option value="{ttft.pk}"[^>]*>{TTFT} \(LLM measure\)', form)
    response = client.post(
        "/slas/new/",
        {
            "pipeline": pipeline.pk,
            "stage": ttft.pk,
            "threshold_ms": "100",
            "target_percent": "90",
            "window": "rolling_28d",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    objective = Objective.objects.get(pipeline=pipeline)
    assert objective.stage == ttft

    # and then 30 requests answer their first token in 50 ms and 10 in 300 ms
    send_vllm(ingest_server.traces_url, tenant.token, spread(now, now + SECOND, 30), 0.05, 0.02)
    send_vllm(ingest_server.traces_url, tenant.token, spread(now, now + SECOND, 10), 0.3, 0.02)
    fold()

    # then the objective counted every request by its TTFT (the first one's 50 ms too):
    # 10 bad of 41
    summary = window_budget(objective, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).summary
    assert (summary.total, summary.bad) == (41, 10)
    page = client.get(f"/slas/{objective.pk}/").content.decode()
    assert TTFT in page


def test_a_tpot_regression_alert_fires_when_decode_gets_slower_per_token(ingest_server, settings):
    # given an admin's rule watching vLLM's time per output token, made in the rule form
    settings.ALERT_BASELINE_MIN_COUNT = 100
    tenant = make_team_with_token()
    client = admin_of(tenant)
    now_ns = time.time_ns()
    now = dt.datetime.fromtimestamp(now_ns / SECOND, dt.UTC)
    # The baseline is the whole hours before the hour an hour ago: history lies there.
    baseline_at = now - dt.timedelta(hours=1)
    history_end = baseline_at.replace(minute=0, second=0, microsecond=0)
    history_ns = int(history_end.timestamp()) * SECOND
    send_vllm(
        ingest_server.traces_url,
        tenant.token,
        spread(history_ns - 3 * 3600 * SECOND, history_ns - 600 * SECOND, 300),
        0.08,
        0.018,
    )
    fold()
    pipeline = Pipeline.objects.get(team=tenant.team, service_name="vllm")
    tpot = measure(pipeline, TPOT)
    form = client.get("/alerts/rules/new/").content.decode()
    assert re.search(rf'value="{tpot.pk}"[^>]*>\s*{TPOT} \(LLM measure\)', form)
    response = client.post(
        "/alerts/rules/new/",
        {
            "pipeline": pipeline.pk,
            "name": "decode per token",
            "regression": "on",
            "stages": [tpot.pk],
            "min_effect_percent": "20",
            "min_effect_ms": "1",
            "significance": "0.001",
            "window_minutes": "10",
            "severity": "page",
            "enabled": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    rule = Rule.objects.get(pipeline=pipeline)
    assert list(rule.stages.all()) == [tpot]

    # when, in the last minutes, each token takes 25 ms instead of 18
    minute_ns = int(now.replace(second=0, microsecond=0).timestamp()) * SECOND
    send_vllm(
        ingest_server.traces_url,
        tenant.token,
        spread(minute_ns - 8 * 60 * SECOND, minute_ns - 60 * SECOND, 200),
        0.08,
        0.025,
    )
    fold()
    compute_baselines(baseline_at)
    evaluate_rule(rule.pk, now)

    # then the rule fires on time per output token, with its evidence
    alert = Alert.objects.get(rule=rule)
    assert (alert.stage, alert.status) == (tpot, "firing")
    evidence = alert.evidence["regression"]
    assert evidence["effect_percent"] >= 30
    assert TPOT in alert.summary
