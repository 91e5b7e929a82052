"""Charts that say what they show, at any traffic, and pages that fit a phone: thin percentile
points marked, the flame's widths as labelled, the pipeline page's SLO line and request and
error panels, the SLA page's burn rates, and no page wider than a 390 px screen."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Sum
from django.utils import timezone

from audits import services as audit_services
from latencyboard.alerts.models import Channel
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla.models import SlaMinute
from latencyboard.teams.models import Membership, Role, Team
from latencyboard.teams.services import add_member
from tests.browser.conftest import PASSWORD, answered, log_in
from tests.browser.test_dashboards import demo, open_pipeline, plotted  # noqa: F401 - the fixture
from tests.browser.test_llm_pages import llm  # noqa: F401 - the fixture
from tests.browser.test_oncall import fired
from tests.browser.test_trace_critical_path import store_trace
from tests.factories import make_user
from tests.latencyboard.test_window_tail import fraud_scorer, write_minutes
from tests.support import SCREENSHOTS

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = SCREENSHOTS / "honest-charts"


def test_thin_points_are_hollow_with_the_reason_on_hover(page, live_web, demo):  # noqa: F811
    # given a day of demo traffic at a few requests a minute: some 70 a 15-minute step
    log_in(page, live_web, demo.member)

    # when the member opens fraud-scorer's p99
    open_pipeline(page, live_web, demo.fraud)

    # then every p99 point is thin (a p99 needs 1,000 spans: 10 above it), drawn hollow
    chart = page.locator("#chart-percentiles")
    thin = int(chart.get_attribute("data-thin-points") or 0)
    symbols = page.evaluate(
        """() => document.getElementById('chart-percentiles').data
            .filter((t) => t.visible === true && t.meta !== 'slo')
            .flatMap((t) => t.y.map((y, i) => (y === null ? null : t.marker.symbol[i])))
            .filter((s) => s !== null)"""
    )
    assert thin == len(symbols) > 0
    assert set(symbols) == {"circle-open"}
    # and hovering one says why
    box = page.locator("#chart-percentiles .nsewdrag").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
    hover = page.locator("#chart-percentiles .hoverlayer")
    hover.locator("text", has_text="thin:").first.wait_for()
    assert "above the p99; 10 needed" in (hover.text_content() or "")

    # and at p50 (20 spans suffice) fewer buckets are thin
    thin_at_p99 = int(chart.get_attribute("data-thin-points") or "0")
    page.click("#percentile-picker button[data-key=p50]")
    page.wait_for_function(
        "() => document.getElementById('chart-percentiles').layout.yaxis.title.text.includes('p50')"
    )
    assert int(chart.get_attribute("data-thin-points") or "0") < thin_at_p99

    # and over 7 days, of which only the last day has data, the chart says since when
    page.click("#window-picker button[data-window='7d']")
    page.wait_for_function(
        "() => document.getElementById('chart-percentiles').dataset.dataSince !== undefined"
        " && document.getElementById('chart-percentiles').dataset.dataSince !== ''"
    )
    assert "data since" in page.inner_text("#chart-percentiles")


def test_pipeline_page_has_the_slo_line_and_requests_and_errors_on_the_same_axis(
    page,
    live_web,
    demo,  # noqa: F811
):
    log_in(page, live_web, demo.member)

    with answered(page, r"/percentiles/") as answer:
        open_pipeline(page, live_web, demo.fraud)
    api = answer.value.json()

    # then the objective's threshold (99% under 60 ms, end to end) is a dashed line
    slo = [t for t in plotted(page, "chart-percentiles") if t["name"].startswith("SLO")]
    assert [(t["name"], t["y"]) for t in slo] == [
        ("SLO: 99% of end-to-end under 60.0 ms", [60, 60])
    ]
    # and requests per second and the error rate are the API's end-to-end counts
    total = next(s for s in api["series"] if s["stage"]["id"] is None)
    requests, errors = plotted(page, "chart-red")
    assert requests["y"] == [p["n"] / api["step_seconds"] for p in total["points"]]
    assert errors["y"] == [p["error_rate"] * 100 if p["n"] else None for p in total["points"]]
    # on the very time axis of the latency chart
    ranges = page.evaluate(
        """() => ['chart-percentiles', 'chart-red'].map(
            (id) => document.getElementById(id).layout.xaxis.range)"""
    )
    assert ranges[0] == ranges[1]


def test_flame_widths_are_the_work_its_labels_give(page, live_web):
    # given a 100 ms request whose two 70 ms children ran in parallel
    trace, member = store_trace(
        [(1, None, "generate", 0, 100), (2, 1, "retrieve", 10, 70), (3, 1, "rerank", 20, 70)]
    )
    log_in(page, live_web, member)

    page.goto(f"{live_web.url}/traces/{trace.hex}/")
    page.wait_for_selector("#flame .main-svg")

    # then each box's width is in proportion to the work its label gives: 160 ms of work at
    # the root (its own 20 ms outside the children, and theirs), 70 ms for each child, side
    # by side
    drawn = page.evaluate(
        """() => [...document.querySelectorAll('#flame g.slice')].map((slice) => ({
            text: slice.querySelector('text') ? slice.querySelector('text').textContent : '',
            width: slice.querySelector('path').getBBox().width,
        }))"""
    )
    labels = " | ".join(d["text"] for d in drawn)
    assert "160 ms of work · 100 ms wall" in labels
    root = next(d["width"] for d in drawn if d["text"].startswith("generate"))
    children = [d["width"] for d in drawn if d["text"].startswith(("retrieve", "rerank"))]
    assert children == [pytest.approx(root * 70 / 160, rel=0.02)] * 2, labels


def test_the_sla_page_shows_burn_rates_and_when_the_budget_runs_out(page, live_web, demo):  # noqa: F811
    log_in(page, live_web, demo.member)

    before = timezone.now().replace(second=0, microsecond=0)
    page.goto(f"{live_web.url}/slas/{demo.objective.pk}/")
    after = timezone.now().replace(second=0, microsecond=0)
    rows = page.locator("#burn-rates tbody tr")

    # then the last hour, six hours and three days each have their burn rate: the share of
    # requests over the threshold divided by the 1% the target allows
    assert rows.evaluate_all("(rows) => rows.map((r) => r.dataset.window)") == [
        "60",
        "360",
        "4320",
    ]
    # over the complete minutes before the page's (before or after a minute turned while it
    # loaded)
    for row, minutes in zip(rows.all(), (60, 360, 4320), strict=True):
        rates = []
        for end in {before, after}:
            sums = SlaMinute.objects.filter(
                objective=demo.objective,
                minute__gte=end - dt.timedelta(minutes=minutes),
                minute__lt=end,
            ).aggregate(good=Sum("good"), total=Sum("total"))
            rates.append((sums["total"] - sums["good"]) / sums["total"] / 0.01)
        shown = row.locator("[data-field=rate]").inner_text()
        assert any(float(shown.rstrip("\u00d7")) == pytest.approx(r, abs=0.006) for r in rates)
        assert (
            row.locator("[data-field=exhausted]")
            .inner_text()
            .startswith(("in ", "already spent", "not being spent"))
        )


def pages_of(demo: Any, admin: Any, llm_team: Team) -> dict[str, str]:  # noqa: F811
    """Every page of the product a signed-in admin opens, by name, with what shows it is
    drawn."""
    alert = fired()
    add_member(alert.pipeline.team, admin, Role.ADMIN)
    add_member(llm_team, admin, Role.ADMIN)
    channel = Channel.objects.create(
        team=demo.team,
        name="on-call hook",
        kind="webhook",
        target="https://hooks.example.com/latencyboard/on-call",
    )
    report = audit_services.request_report(None, demo.team, 2026, 3, None, admin, timezone.now())
    audit_services.build_report(report.pk)
    vllm = Pipeline.objects.get(team=llm_team, service_name="vllm")
    now = timezone.now().replace(second=0, microsecond=0)
    a, b = now - dt.timedelta(hours=4), now - dt.timedelta(hours=2)
    windows = (
        f"pipeline={demo.fraud.pk}&a_start={a:%Y-%m-%dT%H:%MZ}&a_end={b:%Y-%m-%dT%H:%MZ}"
        f"&b_start={b:%Y-%m-%dT%H:%MZ}&b_end={now:%Y-%m-%dT%H:%MZ}"
    )
    return {
        "overview": "/",
        "pipeline": f"/pipelines/{demo.fraud.pk}/",
        "pipeline-llm": f"/pipelines/{vllm.pk}/",
        "pipeline-stages": f"/pipelines/{demo.fraud.pk}/stages/",
        "traces": f"/traces/?pipeline={demo.fraud.pk}",
        "traces-llm": f"/traces/?pipeline={vllm.pk}",
        "compare": f"/compare/?{windows}",
        "slas": "/slas/",
        "sla-detail": f"/slas/{demo.objective.pk}/",
        "sla-new": "/slas/new/",
        "api-tokens": "/account/api-tokens/",
        "oncall": "/alerts/",
        "alert-detail": f"/alerts/{alert.pk}/",
        "alerts-settings": "/alerts/settings/",
        "alert-rule-new": "/alerts/rules/new/",
        "alert-rule-edit": f"/alerts/rules/{alert.rule.pk}/",
        "alert-channel-new": "/alerts/channels/new/",
        "alert-channel-edit": f"/alerts/channels/{channel.pk}/",
        "audit-reports": "/audits/reports/",
        "audit-report": f"/audits/reports/{report.pk}/",
        "audit-log": "/audits/log/",
        "api-docs": "/api/docs/",
        "admin": "/admin/",
    }


WIDTH = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


@pytest.mark.timeout(900)  # some thirty pages, each with its charts drawn
@pytest.mark.parametrize("width", [1440, 390])
def test_no_page_is_wider_than_the_screen(browser, live_web, demo, llm, width):  # noqa: F811
    # given the demo team's admin on a screen of `width` pixels, admin of an LLM team too
    admin = Membership.objects.get(team=demo.team, role=Role.ADMIN).user
    get_user_model().objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    SHOTS.mkdir(parents=True, exist_ok=True)

    # when they open every page (the login page first, then a trace of the list)
    page.goto(f"{live_web.url}/login/")
    found = {"login": page.evaluate(WIDTH)}
    page.screenshot(path=str(SHOTS / f"login-{width}.png"), full_page=True)
    log_in(page, live_web, admin.username)
    paths = pages_of(demo, admin, llm[0].team)
    page.goto(f"{live_web.url}{paths['traces']}")
    paths["trace"] = page.get_attribute("a.trace-link", "href") or ""
    page.goto(f"{live_web.url}{paths['traces-llm']}")
    paths["trace-llm"] = page.get_attribute("a.trace-link", "href") or ""
    for name, path in paths.items():
        response = page.goto(f"{live_web.url}{path}")
        assert response is not None, path
        assert response.status == 200, path
        # (its charts' data fetched: slow on a loaded machine, hence the long wait)
        page.wait_for_load_state("networkidle", timeout=90_000)
        found[name] = page.evaluate(WIDTH)
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
    context.close()

    # then none scrolls sideways: the document is no wider than the screen
    assert {name: sizes for name, sizes in found.items() if sizes[0] > sizes[1]} == {}


def test_compare_explains_every_colour_and_counts_requests_as_the_table(page, live_web, demo):  # noqa: F811
    log_in(page, live_web, demo.member)
    now = timezone.now().replace(second=0, microsecond=0)
    a, b = now - dt.timedelta(hours=8), now - dt.timedelta(hours=4)
    query = (
        f"pipeline={demo.fraud.pk}&a_start={a:%Y-%m-%dT%H:%MZ}&a_end={b:%Y-%m-%dT%H:%MZ}"
        f"&b_start={b:%Y-%m-%dT%H:%MZ}&b_end={now:%Y-%m-%dT%H:%MZ}"
    )

    with page.expect_response(lambda r: "/api/compare/" in r.url) as answer:
        page.goto(f"{live_web.url}/compare/?{query}")
    page.wait_for_selector("#chart-compare .main-svg")
    api = answer.value.json()

    # then every colour of B's bars has its legend entry
    legend = page.locator("#chart-compare .legendtext").evaluate_all(
        "(texts) => texts.map((text) => text.textContent)"
    )
    changes = {q["change"] for s in api["stages"] for q in s["quantiles"]}
    words = {
        "slower": "B, slower",
        "faster": "B, faster",
        "none": "B, no significant change",
        "not_enough_data": "B, not enough data",
    }
    assert {words[c] for c in changes} <= set(legend)
    # and the note counts requests as the table does (end to end), not spans of all stages
    total = next(s for s in api["stages"] if s["stage"]["id"] is None)
    note = page.inner_text("#sample-note")
    assert f"{total['n_a']:,} requests" in note
    assert f"{total['n_b']:,} requests" in note


def test_three_requests_a_minute_draw_no_slowest_1_percent_bar(page, live_web):
    # given the last hour of fraud-scorer at 3 requests a minute, stage shares written
    pipeline, stage_ids = fraud_scorer()
    start = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=62)
    write_minutes(pipeline, stage_ids, per_minute=3, minutes=60, seed=4, start=start)
    member = make_user(pipeline.team, password=PASSWORD).get_username()
    log_in(page, live_web, member)

    open_pipeline(page, live_web, pipeline, "?window=6h")
    page.wait_for_selector("#chart-breakdown[data-tail]")

    # then the breakdown has the all-requests bar only, and says why
    bars = plotted(page, "chart-breakdown")
    assert {len(bar["y"]) for bar in bars} == {1}
    assert page.get_attribute("#chart-breakdown", "data-tail") == "too-few"
    assert "No slowest-1% bar" in page.inner_text("#chart-breakdown")
