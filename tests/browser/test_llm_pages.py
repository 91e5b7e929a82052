"""The demo's LLM pipeline in headless Chromium: vLLM behind a gateway, sent by the demo's own
code through the web app's OTLP endpoint and folded. The pipeline page shows TTFT, TPOT and
output tokens per second with n, bound and each figure's definition; a trace's waterfall draws
vLLM's queue, prefill and decode as derived bars, and its TTFT and TPOT on its span."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from latencyboard.demo.llm import VLLM_CHAT, sample_llm_requests
from latencyboard.demo.llm_service import llm_traffic, tracer_providers
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import services as rollup_services
from latencyboard.spans.models import Span
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team_with_token, make_user
from tests.support import SCREENSHOTS

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = SCREENSHOTS / "dialects"
REQUESTS = 40


def keep(shot: Path) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, SHOTS / shot.name)


@pytest.fixture
def llm(live_web):
    """A team whose vLLM and gateway sent REQUESTS served requests of the last minutes."""
    tenant = make_team_with_token()
    member = make_user(tenant.team, password=PASSWORD).get_username()
    batch = sample_llm_requests(VLLM_CHAT, 400, np.random.default_rng(11), candidate_share=0.5)
    served = np.flatnonzero(~batch.refused)[:REQUESTS]
    providers = tracer_providers(
        VLLM_CHAT,
        lambda: BatchSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"{live_web.url}/v1/traces",
                headers={"x-latencyboard-token": tenant.token},
            )
        ),
    )
    traffic = llm_traffic(VLLM_CHAT, providers)
    now = time.time_ns()
    for k, row in enumerate(served.tolist()):
        start = now - int(batch.root_ns[row]) - (REQUESTS - k) * 5 * 10**9
        traffic.emit(batch, row, start)
    for provider in providers:
        provider.shutdown()
    rollup_services.fold_until_idle(lambda: dt.datetime.now(dt.UTC), seconds=120)
    return tenant, member


def test_the_llm_pipeline_page_shows_ttft_tpot_and_tokens_per_second(page, live_web, llm):
    tenant, member = llm
    vllm = Pipeline.objects.get(team=tenant.team, service_name="vllm")

    log_in(page, live_web, member)
    page.goto(f"{live_web.url}/pipelines/{vllm.pk}/?window=1h")
    page.wait_for_selector("#llm-figures tbody tr[data-figure]")

    rows = page.locator("#llm-figures tbody tr")
    figures = {row.get_attribute("data-figure"): row for row in rows.all()}
    assert list(figures) == [
        "time_to_first_token",
        "time_per_output_token",
        "output_tokens_per_second",
    ]
    for row in figures.values():
        cells = row.locator("td").all_inner_texts()
        assert cells[3] == str(REQUESTS)  # n: every request
        assert cells[4] == "±1%"
    assert "arrival to first output token" in figures["time_to_first_token"].inner_text()
    assert "decode time / (output tokens - 1)" in figures["time_per_output_token"].inner_text()
    assert "tok/s" in figures["output_tokens_per_second"].inner_text()
    keep(screenshot(page, "llm-pipeline-page"))


def test_the_waterfall_draws_vllms_stages_as_derived_bars(page, live_web, llm):
    tenant, member = llm
    vllm = Pipeline.objects.get(team=tenant.team, service_name="vllm")
    trace_id = Span.objects.filter(pipeline=vllm, is_root=True).values_list("trace_id", flat=True)[
        0
    ]

    log_in(page, live_web, member)
    page.goto(f"{live_web.url}/traces/{trace_id.hex}/")
    page.wait_for_selector(".wf-span")

    names = [row.get_attribute("data-name") for row in page.locator(".wf-span").all()]
    assert names == [
        "POST /v1/chat/completions",
        "POST",
        "llm_request",
        "queue",
        "prefill",
        "decode",
    ]
    derived = page.locator(".wf-span.derived")
    assert [row.get_attribute("data-name") for row in derived.all()] == [
        "queue",
        "prefill",
        "decode",
    ]
    assert derived.nth(0).locator(".badge.derived").inner_text() == "derived"
    source = derived.nth(0).locator(".badge.derived").get_attribute("title") or ""
    assert "gen_ai.latency.time_in_queue" in source
    request = page.locator(".wf-span[data-name=llm_request]")
    badges = request.locator(".badge.measure").all_inner_texts()
    assert [badge.split()[0] for badge in badges] == ["TTFT", "TPOT"]
    keep(screenshot(page, "llm-waterfall"))
