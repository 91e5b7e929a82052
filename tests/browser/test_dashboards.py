"""The overview and the pipeline page in headless Chromium, on demo traffic folded as the
workers fold it: the charts must plot what the APIs answer."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from latencyboard.demo.backfill import backfill_demo
from latencyboard.demo.profiles import STAGE_NAMES
from latencyboard.pipelines.models import CohortAttribute, Pipeline, Stage
from latencyboard.rollups.compaction import compact_rollups
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.rollups.stage_share_services import compute_stage_shares
from latencyboard.sla.models import Objective
from latencyboard.sla.services import create_objective
from latencyboard.teams.models import Role, Team
from tests.browser.conftest import ARTIFACTS, PASSWORD, answered, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.test_compare import write_spans
from tests.snapshots import Seeds

pytestmark = pytest.mark.django_db(transaction=True)

# A day of the three demo pipelines at 0.5% of the live demo's rate: ~90 k spans, a few
# requests a minute per pipeline, enough for every chart and quick to fold.
SCALE = 0.005
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Demo:
    team: Team
    fraud: Pipeline
    objective: Objective
    member: str
    outsider: str


@pytest.fixture
def demo(seeds: Seeds) -> Demo:
    """Demo traffic of the last day, folded into rollups (cohorts included), stage shares and
    the counters of an end-to-end objective on fraud-scorer; a member and an outsider. Built
    once in a test process, each test gets a copy of its own."""
    return cast(Demo, seeds.get("browser dashboards demo", _demo))


def _demo() -> Demo:
    now = timezone.now()
    team, other = make_team("demo"), make_team("other")
    backfill_demo(team, days=1, end=now, now=now, scale=SCALE, seed=20261121)
    # cache_hit gets sketches per value before the fold, as an admin would add it
    CohortAttribute.objects.create(
        pipeline=Pipeline.objects.get(team=team, service_name="fraud-scorer"), key="cache_hit"
    )
    while fold_pending_batches(timezone.now()).batches:
        pass
    compute_stage_shares(timezone.now(), seconds=120)
    Pipeline.objects.create(team=other, service_name="their-secret-service")
    admin = cast(User, make_user(team, role=Role.ADMIN, password=PASSWORD))
    fraud = Pipeline.objects.get(team=team, service_name="fraud-scorer")
    objective = create_objective(
        team=team,
        pipeline=fraud,
        stage=None,
        name="99% under 60 ms",
        threshold_ms=60.0,
        target_percent=Decimal("99"),
        window="rolling_28d",
        created_by=admin,
    )
    member = make_user(team, password=PASSWORD).get_username()
    outsider = make_user(other, password=PASSWORD).get_username()
    return Demo(team, fraud, objective, member, outsider)


def open_pipeline(page, live_web, pipeline: Pipeline, query: str = "") -> None:
    page.goto(f"{live_web.url}/pipelines/{pipeline.pk}/{query}")
    page.wait_for_selector("body[data-loaded]:not(.loading)")


def plotted(page, chart: str) -> list[dict]:
    """The traces of a Plotly chart, as the page drew them (once it has drawn them: the page
    may be marked loaded a moment before a chart's draw finishes)."""
    page.wait_for_function(f"() => document.getElementById({chart!r})?.data !== undefined")
    return page.evaluate(
        f"""Array.from(document.getElementById({chart!r}).data, (t) => ({{
            name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || []),
            visible: t.visible === undefined ? true : t.visible,
        }}))"""
    )


def test_overview_lists_my_pipelines_most_impacted_first(page, live_web, demo):
    log_in(page, live_web, demo.member)

    rows = page.locator("#overview tbody tr")
    names = rows.locator("a.row-link").all_inner_texts()
    screenshot(page, "overview")

    # fraud-scorer has the only objective (and a tight one): it comes first, with a figure
    assert names[0] == "fraud-scorer"
    assert sorted(names) == ["clinical-alerts", "fraud-scorer", "recommender"]
    first = rows.first
    assert first.locator("[data-field=p99]").inner_text().endswith("ms")
    assert "req/min" in first.locator("[data-field=traffic]").inner_text()
    assert "of 99%" in first.locator("[data-field=sla]").inner_text()
    assert "their-secret-service" not in page.inner_text("main")
    first.locator("a.row-link").click()
    page.wait_for_url(f"{live_web.url}/pipelines/{demo.fraud.pk}/")


def test_pipeline_page_plots_what_the_apis_answer(page, live_web, demo):
    log_in(page, live_web, demo.member)

    # when the member opens fraud-scorer's page (24 hours, p99 by default)
    with answered(page, r"/percentiles/") as answer:
        open_pipeline(page, live_web, demo.fraud)
    api = answer.value.json()
    screenshot(page, "pipeline")

    # then each stage's plotted p99 is the API's, point for point
    traces = {trace["name"]: trace for trace in plotted(page, "chart-percentiles")}
    assert {"end-to-end", *STAGE_NAMES} <= set(traces)
    for series in api["series"]:
        name = "end-to-end" if series["stage"]["id"] is None else series["stage"]["name"]
        if series["summary"]["n"]:
            assert traces[name]["y"] == [point["p99"] for point in series["points"]], name
    forward = next(s for s in api["series"] if s["stage"]["name"] == "model_forward")
    busiest = max(forward["points"], key=lambda point: point["n"])
    index = traces["model_forward"]["x"].index(busiest["t"])
    assert traces["model_forward"]["y"][index] == busiest["p99"]
    # and the root span's stage, the end-to-end latency again, is off until asked for
    assert traces["POST /v1/score"]["visible"] == "legendonly"
    # and hovering shows each stage's value, n and error bound
    box = page.locator("#chart-percentiles .nsewdrag").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    hover = page.locator("#chart-percentiles .hoverlayer")
    hover.locator("text", has_text="n = ").first.wait_for()
    assert "±1%" in (hover.text_content() or "")
    page.locator("#percentiles").screenshot(path=str(ARTIFACTS / "pipeline-hover.png"))

    # and the breakdown shows the six demo stages in both bars, shares adding up to 100%
    bars = plotted(page, "chart-breakdown")
    assert set(STAGE_NAMES) <= {bar["name"] for bar in bars}
    for row in range(2):
        assert sum(bar["x"][row] for bar in bars) == pytest.approx(100.0)
    assert {trace["name"] for trace in plotted(page, "chart-shares")} == {
        bar["name"] for bar in bars
    }

    # and the SLA chart and the error budget of the objective
    assert plotted(page, "chart-sla")[0]["y"]
    assert "error budget left" in page.inner_text("#budget")

    # and one deployment line per version that appeared in the window
    markers = page.request.get(
        f"{live_web.url}/api/pipelines/{demo.fraud.pk}/deployments/",
        params={"start": api["start"], "end": api["end"]},
    ).json()["markers"]
    lines = page.evaluate("document.getElementById('chart-percentiles').layout.shapes.length")
    assert lines == sum(1 for marker in markers if marker["kind"] == "appeared")

    # and the model.version breakdown by attribute, end to end and for model_forward
    names = {trace["name"] for trace in plotted(page, "chart-attributes")}
    assert names
    assert all(name.startswith("model.version = v") for name in names)
    assert "from the cohort sketches" in page.inner_text("#attribute-note")


def test_switching_window_and_percentile_redraws_from_the_api(page, live_web, demo):
    log_in(page, live_web, demo.member)
    open_pipeline(page, live_web, demo.fraud)

    # when the member picks 7 days at p50
    with answered(page, r"/percentiles/.*step=1h") as answer:
        page.click("#window-picker button[data-window='7d']")
    page.wait_for_selector("body[data-loaded='7d']:not(.loading)")
    page.click("#percentile-picker button[data-key='p50']")
    api = answer.value.json()
    screenshot(page, "pipeline-7d-p50")

    # then the chart holds the hourly p50 of the API and the URL keeps the choice
    end_to_end = next(t for t in plotted(page, "chart-percentiles") if t["name"] == "end-to-end")
    assert end_to_end["y"] == [point["p50"] for point in api["series"][0]["points"]]
    assert len(end_to_end["y"]) == 7 * 24
    assert page.url.endswith("?window=7d&percentile=p50")


def test_cache_hit_breakdown(page, live_web, demo):
    log_in(page, live_web, demo.member)
    open_pipeline(page, live_web, demo.fraud, "?window=6h")

    with answered(page, r"/attributes/.*key=cache_hit"):
        page.select_option("#attribute-picker", "cache_hit")
    # A function, not an expression: the page's CSP (no 'unsafe-eval') refuses eval'd strings.
    page.wait_for_function(
        "() => document.getElementById('chart-attributes').data"
        " && document.getElementById('chart-attributes').data[0].name.startsWith('cache_hit')"
    )

    traces = plotted(page, "chart-attributes")
    assert {t["name"] for t in traces} == {"cache_hit = true", "cache_hit = false"}
    # a miss of the feature cache is the slow path of feature_hydration
    hydration = {t["name"]: t["y"][t["x"].index("feature_hydration")] for t in traces}
    assert hydration["cache_hit = false"] > hydration["cache_hit = true"]
    screenshot(page, "pipeline-cache-hit")


def test_pipeline_without_objective_offers_to_create_one(page, live_web, demo):
    recommender = Pipeline.objects.get(team=demo.team, service_name="recommender")
    log_in(page, live_web, demo.member)
    open_pipeline(page, live_web, recommender, "?window=1h")

    link = page.locator("#sla a", has_text="Create an objective")
    assert link.get_attribute("href").endswith(f"?pipeline={recommender.pk}")
    screenshot(page, "pipeline-1h-no-objective")


def test_outsider_sees_none_of_another_teams_pipelines(page, live_web, demo):
    log_in(page, live_web, demo.outsider)

    body = page.inner_text("main")
    response = page.goto(f"{live_web.url}/pipelines/{demo.fraud.pk}/")
    api = page.request.get(
        f"{live_web.url}/api/pipelines/{demo.fraud.pk}/stage-breakdown/",
        params={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
    )

    assert "their-secret-service" in body
    assert "fraud-scorer" not in body
    assert "recommender" not in body
    assert response.status == 404
    assert "fraud-scorer" not in page.content()
    assert api.status == 404


def test_empty_overview_shows_how_to_send_traces(page, live_web):
    team = make_team("fresh")
    member = make_user(team, password=PASSWORD)
    log_in(page, live_web, member.get_username())

    text = page.inner_text("#send-traces")
    screenshot(page, "overview-empty")

    assert "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318" in text
    assert "OTEL_EXPORTER_OTLP_HEADERS" in text


def test_back_after_switching_windows_returns_to_the_previous_window(page, live_web, demo):
    # given the member on fraud-scorer's page, 24 hours by default
    log_in(page, live_web, demo.member)
    open_pipeline(page, live_web, demo.fraud)
    first = page.url

    # when they switch to 7 days, then press Back
    page.click("#window-picker button[data-window='7d']")
    page.wait_for_selector("body[data-loaded='7d']:not(.loading)")
    assert page.url.endswith("?window=7d&percentile=p99")
    page.go_back()
    page.wait_for_selector("body[data-loaded='24h']:not(.loading)")

    # then they are still on the page, back on 24 hours, in 15-minute steps
    assert page.url == first
    pressed = page.locator("#window-picker button[aria-pressed='true']").all_inner_texts()
    assert pressed == ["24h"]
    assert "15-minute steps" in page.inner_text("#window-range")

    # and Forward brings 7 days back
    page.go_forward()
    page.wait_for_selector("body[data-loaded='7d']:not(.loading)")
    assert page.locator("#window-picker button[aria-pressed='true']").all_inner_texts() == ["7d"]


def test_the_window_ends_now_not_at_the_end_of_its_last_step(page, live_web, demo):
    log_in(page, live_web, demo.member)

    open_pipeline(page, live_web, demo.fraud)

    # the 24 h window's last 15-minute step ends up to 15 minutes ahead: it is not shown so
    shown = page.evaluate(
        """() => ({
            text: document.getElementById('window-range').innerText,
            now: LB.charts.formatTime(LB.pipeline.range.now),
            start: LB.charts.formatTime(LB.pipeline.range.start),
            rangeEnd: Date.parse(LB.pipeline.range.now),
            axisEnd: Date.parse(document.getElementById('chart-percentiles').layout.xaxis.range[1]),
            clock: Date.now(),
        })"""
    )
    assert shown["text"] == (
        f"{shown['start']} to now ({shown['now']}), 15-minute steps; the last step is still filling"
    )
    # "now" is the moment the page loaded, a few seconds ago at most
    assert shown["clock"] - 30_000 < shown["rangeEnd"] <= shown["clock"]
    assert shown["axisEnd"] <= shown["clock"]


def test_the_pipeline_page_links_its_traces_comparison_and_objective(page, live_web, demo):
    log_in(page, live_web, demo.member)
    open_pipeline(page, live_web, demo.fraud, "?window=6h")

    traces = page.locator("#link-traces").get_attribute("href")
    assert traces == f"{live_web.url}/traces/?pipeline={demo.fraud.pk}&window=6h"
    assert page.locator(".page-links a", has_text="SLA objective").get_attribute("href") == (
        f"/slas/{demo.objective.pk}/"
    )
    compare = page.evaluate(
        "Object.fromEntries(new URL(document.getElementById('link-compare').href).searchParams)"
    )
    start, end = page.evaluate("[LB.pipeline.range.start, LB.pipeline.range.end]")
    assert compare == {
        "pipeline": str(demo.fraud.pk),
        "a_start": minus_six_hours(start),
        "a_end": f"{start[:16]}Z",
        "b_start": f"{start[:16]}Z",
        "b_end": f"{end[:16]}Z",
    }

    # the traces link carries the window: the search opens on the last 6 hours of the pipeline
    page.click("#link-traces")
    page.wait_for_selector("#results")
    assert page.locator("#f-pipeline").input_value() == str(demo.fraud.pk)
    assert page.url.endswith("window=6h")


def minus_six_hours(iso: str) -> str:
    moment = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) - dt.timedelta(hours=6)
    return moment.strftime("%Y-%m-%dT%H:%M") + "Z"


def test_the_error_budget_chart_ends_at_the_headers_figure(page, live_web, demo):
    log_in(page, live_web, demo.member)

    open_pipeline(page, live_web, demo.fraud, "?window=1h")

    header = page.locator("#budget .figure", has_text="error budget left").locator("strong")
    line = next(t for t in plotted(page, "chart-sla") if t["name"].startswith("error budget"))
    assert line["y"], "the budget line is drawn"
    assert header.inner_text() == f"{line['y'][-1]:.1f}%"
    screenshot(page, "pipeline-1h-sla")


def test_the_attribute_breakdown_at_7_days_plots_values_from_the_whole_week(page, live_web):
    # given fraud-scorer on v7 six days ago and on v8 in the last hours, folded and compacted
    team = make_team("ours")
    now = timezone.now().replace(second=0, microsecond=0)
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    stages = {
        name: Stage.objects.create(pipeline=pipeline, name=name)
        for name in ("POST /v1/score", "model_forward")
    }
    for version, start, forward_ms in (("v7", now - 6 * DAY, 6.0), ("v8", now - 3 * HOUR, 8.0)):
        tagged = {"model.version": version}
        step = dt.timedelta(seconds=20)
        write_spans(
            stages["POST /v1/score"], [20.0] * 100, start, step, is_root=True, attributes=tagged
        )
        write_spans(
            stages["model_forward"], [forward_ms] * 100, start, step, attributes=tagged, seed=1
        )
    compact_rollups(now)
    log_in(page, live_web, make_user(team, password=PASSWORD).get_username())

    # when the member opens the pipeline at 7 days
    open_pipeline(page, live_web, pipeline, "?window=7d")
    page.wait_for_function(
        "() => document.getElementById('chart-attributes').data"
        " && document.getElementById('chart-attributes').data.length === 2"
    )
    screenshot(page, "pipeline-7d-attributes")

    # then both versions are plotted, each with its model_forward latency
    traces = {t["name"]: t for t in plotted(page, "chart-attributes")}
    assert set(traces) == {"model.version = v7", "model.version = v8"}
    forward = {name: t["y"][t["x"].index("model_forward")] for name, t in traces.items()}
    assert forward["model.version = v7"] == pytest.approx(6.0, rel=0.01)
    assert forward["model.version = v8"] == pytest.approx(8.0, rel=0.01)
    assert "(400)" in page.inner_text("#attribute-note")
