"""Trace search and the trace waterfall in headless Chromium, against the database."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import pytest
from django.db import connection
from playwright.sync_api import expect

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.teams.models import Team
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)

TRACE = uuid.UUID("4bf92f3577b34da6a3ce929d0e0e4736")
# (span id, parent, name, start ms, end ms); the request as a waterfall draws it, depth first.
REQUEST = [
    (0x10, None, "POST /score", 0, 120),
    (0x11, 0x10, "queue_wait", 0, 8),
    (0x12, 0x10, "feature_hydration", 8, 30),
    (0x13, 0x12, "redis GET", 10, 26),
    (0x14, 0x10, "preprocess", 30, 42),
    (0x15, 0x10, "model_forward", 42, 110),
    (0x16, 0x15, "tokenize", 43, 50),
    (0x17, 0x15, "gpu.infer", 50, 108),
    (0x18, 0x10, "send_response", 110, 119),
    (0x19, 0x18, "serialize", 110, 114),
    (0x1A, 0x18, "network.write", 114, 119),
    (0x1B, 0x99, "audit.log", 60, 75),  # its parent never arrived
]
# Every stage ran after the one before; only the orphan is off the path.
CRITICAL = [name for _, parent, name, _, _ in REQUEST if parent != 0x99]
SELF_MS = {"POST /score": 1.0, "model_forward": 3.0, "send_response": 0.0, "audit.log": 15.0}


@dataclass
class Demo:
    team: Team
    pipeline: Pipeline
    member_name: str
    outsider_name: str
    started: dt.datetime


@pytest.fixture
def demo() -> Demo:
    team = make_team("ml")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    stages = {}
    for _, _, name, _, _ in REQUEST:
        stages[name] = Stage.objects.get_or_create(pipeline=pipeline, name=name)[0]
    started = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=10)).replace(microsecond=0)
    spans = [
        StoredSpan(
            trace=TRACE,
            span_id=span_id,
            parent=parent,
            stage=stages[name],
            start=started + dt.timedelta(milliseconds=start),
            ms=end - start,
            attributes={"model.version": "v8", "device": "gpu:0"}
            if name == "model_forward"
            else {},
        )
        for span_id, parent, name, start, end in REQUEST
    ]
    store(team, spans)
    # three more requests of the last hour, one of them slower
    root = stages["POST /score"]
    for number, ms in ((1, 80), (2, 300), (3, 45)):
        at = started - dt.timedelta(minutes=number)
        store(team, [StoredSpan(number, 0x20 + number, None, root, at, ms, error=ms == 300)])
    return Demo(
        team=team,
        pipeline=pipeline,
        member_name=make_user(team, password=PASSWORD).get_username(),
        outsider_name=make_user(make_team("other"), password=PASSWORD).get_username(),
        started=started,
    )


def stored_spans(trace: uuid.UUID) -> dict[str, float]:
    """Name -> duration in ms of each stored span of the trace, straight from the table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, duration_ns FROM spans_span WHERE trace_id = %s", [trace])
        return {name: duration / 1e6 for name, duration in cursor.fetchall()}


def test_search_then_open_a_waterfall(page, live_web, demo):
    # given a member logged in
    log_in(page, live_web, demo.member_name)

    # when they search the last hour's traces of the pipeline, 50 ms and slower
    page.goto(f"{live_web.url}/traces/")
    page.select_option("#f-pipeline", str(demo.pipeline.pk))
    page.fill("input[name=min_ms]", "50")
    page.click(".trace-filters button[type=submit]")
    page.wait_for_selector("#results")

    # then the matching requests are listed slowest first, with their durations
    rows = page.locator(".trace-table tbody tr")
    assert rows.locator(".dur-value").all_inner_texts() == ["300 ms", "120 ms", "80.0 ms"]
    assert "error" in rows.nth(0).inner_text()
    screenshot(page, "trace-search")

    # when they open the 120 ms request
    page.click(f"a.trace-link:text('{TRACE.hex}')")
    page.wait_for_selector(".wf-span")

    # then every stored span has its bar, in waterfall order, with its duration
    spans = page.locator(".wf-span")
    names = [spans.nth(i).get_attribute("data-name") for i in range(spans.count())]
    assert names == [name for _, _, name, _, _ in REQUEST]
    shown = {
        spans.nth(i).get_attribute("data-name"): float(
            spans.nth(i).get_attribute("data-duration-ms") or "nan"
        )
        for i in range(spans.count())
    }
    assert shown == stored_spans(TRACE)
    assert spans.nth(5).locator(".wf-total").inner_text() == "68.0 ms"
    selfs = {
        span.get_attribute("data-name"): float(span.get_attribute("data-self-ms") or "nan")
        for span in spans.all()
    }
    assert {name: selfs[name] for name in SELF_MS} == SELF_MS
    assert page.inner_text("#trace-id") == TRACE.hex

    # the critical path is marked, and the orphan is at the top level, said to be one
    critical = page.locator(".wf-span.critical")
    assert [critical.nth(i).get_attribute("data-name") for i in range(critical.count())] == (
        CRITICAL
    )
    assert "parent not received" in spans.nth(11).inner_text()

    # the flame view plots the same spans, sized by self time
    figure = page.evaluate(
        "() => { const d = document.getElementById('flame').data[0];"
        " return {labels: d.labels, values: d.values}; }"
    )
    assert figure["labels"][: len(REQUEST)] == names
    assert dict(zip(figure["labels"], figure["values"], strict=False))["model_forward"] == 3.0

    # when they click model_forward, its attributes show
    page.click(".wf-span[data-name='model_forward']")
    detail = page.locator(".wf-detail")
    assert detail.count() == 1
    text = detail.inner_text()
    assert "model.version\tv8" in text
    assert "device\tgpu:0" in text
    assert f"{0x15:016x}" in text
    screenshot(page, "trace-waterfall")


def test_collapsing_a_span_hides_its_descendants(page, live_web, demo):
    log_in(page, live_web, demo.member_name)
    page.goto(f"{live_web.url}/traces/{TRACE.hex}/")

    page.click(".wf-span[data-name='model_forward'] button.wf-toggle")

    visible = page.locator(".wf-span:visible")
    assert "gpu.infer" not in visible.all_inner_texts()
    assert visible.count() == len(REQUEST) - 2


def test_a_chart_points_link_lists_the_traces_near_its_quantile(page, live_web, demo):
    log_in(page, live_web, demo.member_name)
    minute = demo.started.replace(second=0)

    page.goto(
        f"{live_web.url}/traces/?pipeline={demo.pipeline.pk}"
        f"&minute={minute:%Y-%m-%dT%H:%M:%SZ}&near=p99"
    )

    heading = page.inner_text("#results h2")
    assert heading.startswith("Traces nearest the p99 of fraud-scorer (prod)")
    assert page.locator(".trace-table tbody tr").count() == 1
    assert "120.000 ms" in page.inner_text("#results .summary")
    screenshot(page, "trace-exemplars")


def test_the_stage_filter_offers_the_chosen_pipelines_stages(page, live_web, demo):
    # given a second pipeline of the team, with stages of its own
    other = Pipeline.objects.create(team=demo.team, service_name="recommender")
    for name in ("GET /recommend", "retrieval", "ranking"):
        Stage.objects.create(pipeline=other, name=name)
    log_in(page, live_web, demo.member_name)
    page.goto(f"{live_web.url}/traces/")

    def offered() -> list[str]:
        return page.locator("#f-stage option").all_inner_texts()

    # when they pick the recommender, its stages only are offered
    page.select_option("#f-pipeline", str(other.pk))
    assert offered() == ["Any stage", "GET /recommend", "retrieval", "ranking"]

    # and when they pick fraud-scorer, a stage of the recommender picked before is let go
    page.select_option("#f-stage", label="ranking")
    page.select_option("#f-pipeline", str(demo.pipeline.pk))
    assert offered() == ["Any stage", *[name for _, _, name, _, _ in REQUEST]]
    assert page.input_value("#f-stage") == ""

    # and a search keeps the narrowed list on the results page
    page.select_option("#f-stage", label="model_forward")
    page.click(".trace-filters button[type=submit]")
    page.wait_for_selector("#results")
    # (the list is narrowed by the page's script, which may run just after #results is parsed)
    expect(page.locator("#f-stage option")).to_have_text(
        ["Any stage", *[name for _, _, name, _, _ in REQUEST]]
    )
    assert page.locator("#f-stage option:checked").inner_text() == "model_forward"
    assert page.input_value("input[name=start]").count(":") == 2  # 24-hour, seconds included
    screenshot(page, "trace-search-stage-filter")


def test_an_outsider_cannot_open_our_trace(page, live_web, demo):
    log_in(page, live_web, demo.outsider_name)

    response = page.goto(f"{live_web.url}/traces/{TRACE.hex}/")

    assert response is not None
    assert response.status == 404
    assert "fraud-scorer" not in page.content()
