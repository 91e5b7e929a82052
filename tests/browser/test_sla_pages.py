"""The SLA pages in a real browser: an admin creates an objective through the form, reads the
attainment chart (whose points are the API's), declares maintenance and sees attainment
change; an outsider sees none of it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla import services
from latencyboard.sla.models import Objective, Window
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.test_sla import RawSpan, member, store_batch

pytestmark = pytest.mark.django_db(transaction=True)

FAST_NS = 120_000_000
SLOW_NS = 900_000_000
HOURS = 27 * 24
READY = "#sla-charts[data-state=ready]"


@dataclass
class Traffic:
    pipeline: Pipeline
    stage: Stage
    incident: dt.datetime  # the one minute of the last hours with slow requests
    total: int
    slow: int
    incident_total: int
    incident_slow: int


def prepare_traffic(team: Any) -> Traffic:
    """27 days of model_forward spans, four an hour, one slow in every 37th hour (never in the
    last five); then an incident minute 40 minutes ago: 6 slow requests out of 8. All already
    rolled up."""
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer", environment="prod")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    now = timezone.now().replace(second=0, microsecond=0)
    incident = now - dt.timedelta(minutes=40)
    spans = []
    for hour in range(HOURS):
        start = now - dt.timedelta(hours=hour, minutes=30)
        for i in range(4):
            is_slow = hour % 37 == 5 and i == 0
            spans.append(
                RawSpan(
                    pipeline,
                    stage,
                    start + dt.timedelta(minutes=i * 7),
                    SLOW_NS if is_slow else FAST_NS + i * 5_000_000,
                )
            )
    slow = sum(span.duration_ns == SLOW_NS for span in spans)
    spans += [
        RawSpan(pipeline, stage, incident + dt.timedelta(seconds=s), SLOW_NS) for s in range(6)
    ]
    spans += [
        RawSpan(pipeline, stage, incident + dt.timedelta(seconds=30 + s), FAST_NS) for s in range(2)
    ]
    store_batch(team, spans, rolled_up=True)
    return Traffic(pipeline, stage, incident, len(spans), slow + 6, 8, 6)


def plotted(page: Any, chart: str, trace: str) -> list[float | None]:
    return page.evaluate(
        "([chart, trace]) => document.getElementById(chart).data.find((t) => t.name === trace).y",
        [chart, trace],
    )


def api_series(page: Any, live_web: LiveWeb) -> dict[str, Any]:
    """What the API answers for the range the page charts, fetched with the page's session."""
    url = page.get_attribute("#sla-charts", "data-series-url")
    response = page.request.get(f"{live_web.url}{url}")
    assert response.status == 200
    return response.json()


def test_admin_creates_an_objective_reads_its_chart_and_declares_maintenance(page, live_web):
    # given a team's traffic, already rolled up, and one of its admins
    team = make_team("fraud")
    traffic = prepare_traffic(team)
    admin = make_user(team, Role.ADMIN, password=PASSWORD)
    log_in(page, live_web, admin.get_username())

    # when they create an objective through the form
    page.goto(f"{live_web.url}/slas/new/")
    page.select_option("#id_pipeline", str(traffic.pipeline.pk))
    page.select_option("#id_stage", str(traffic.stage.pk))
    page.fill("#id_threshold_ms", "250")
    page.fill("#id_target_percent", "99")
    page.check("input[name=window][value=rolling_28d]")
    page.fill("#id_name", "Fraud model under 250 ms")
    screenshot(page, "sla-new")
    page.click("button[type=submit].primary")
    page.wait_for_url(f"{live_web.url}/slas/*/")
    objective = Objective.objects.get()
    assert page.url == f"{live_web.url}/slas/{objective.pk}/"

    # then the chart plots the API's points, and the API counts every span the form back-filled
    page.wait_for_selector(READY)
    series = api_series(page, live_web)
    assert plotted(page, "sla-attainment-chart", "attainment per step") == [
        b["attainment_percent"] for b in series["buckets"]
    ]
    assert plotted(page, "sla-budget-chart", "error budget left this period") == [
        p["remaining_percent"] for p in series["burn_down"]
    ]
    summary = series["summary"]
    assert (summary["total"], summary["bad"]) == (traffic.total, traffic.slow)
    [incident_bucket] = [
        i
        for i, b in enumerate(series["buckets"])
        if b["start"] <= traffic.incident.isoformat().replace("+00:00", "Z") < b["end"]
    ]
    before = series["buckets"][incident_bucket]
    assert before["total"] - before["good"] == traffic.incident_slow
    assert page.inner_text("#sla-attainment") == attainment_text(summary["good"], summary["total"])

    # when they declare the incident minute as maintenance
    page.fill("#id_start", traffic.incident.strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_end", (traffic.incident + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#id_reason", "GPU node pool upgrade (CHG-1234)")
    with page.expect_navigation():
        page.click("text=Add window")
    page.wait_for_selector(READY)

    # then that minute's 8 requests (6 slow) are left out: its hour is back to 100%, exactly
    after = api_series(page, live_web)
    assert plotted(page, "sla-attainment-chart", "attainment per step") == [
        b["attainment_percent"] for b in after["buckets"]
    ]
    bucket = after["buckets"][incident_bucket]
    assert (bucket["good"], bucket["total"]) == (before["good"] - 2, before["total"] - 8)
    assert bucket["attainment_percent"] == 100.0
    assert (after["summary"]["total"], after["summary"]["bad"]) == (
        traffic.total - traffic.incident_total,
        traffic.slow - traffic.incident_slow,
    )
    assert after["excluded"] == {"good": 2, "total": 8}
    assert page.inner_text("#sla-attainment") == attainment_text(
        after["summary"]["good"], after["summary"]["total"]
    )
    assert (
        page.evaluate(
            """() => document.getElementById('sla-attainment-chart').layout.shapes
                .filter((shape) => shape.type === 'rect').length"""
        )
        == 1
    )
    assert "GPU node pool upgrade (CHG-1234)" in page.inner_text("#maintenance")
    screenshot(page, "sla-detail")

    # and the list shows the objective with the same figures
    page.goto(f"{live_web.url}/slas/")
    row = page.inner_text("table.sla-table tbody tr")
    assert "Fraud model under 250 ms" in row
    assert attainment_text(after["summary"]["good"], after["summary"]["total"]) in row
    screenshot(page, "sla-list")


def attainment_text(good: int, total: int) -> str:
    """The figure the pages show: the exact ratio rounded down to three decimals."""
    thousandths = 100_000 * good // total
    return f"{thousandths // 1000}.{thousandths % 1000:03d}%"


def test_outsider_sees_no_objective_of_another_team(page, live_web):
    # given another team's objective over its traffic
    team = make_team("fraud")
    traffic = prepare_traffic(team)
    objective = services.create_objective(
        team=team,
        pipeline=traffic.pipeline,
        stage=None,
        name="their secret objective",
        threshold_ms=250.0,
        target_percent=Decimal(99),
        window=Window.ROLLING_28D,
        created_by=member(team, Role.ADMIN),
    )
    outsider = make_user(make_team("theirs"), Role.ADMIN, password=PASSWORD)
    log_in(page, live_web, outsider.get_username())

    # when they look at the list, the objective's page and its API
    page.goto(f"{live_web.url}/slas/")
    listed = page.inner_text("main")
    detail = page.goto(f"{live_web.url}/slas/{objective.pk}/")
    api = page.request.get(f"{live_web.url}/api/slas/{objective.pk}/attainment/")
    maintenance = page.request.get(f"{live_web.url}/api/slas/{objective.pk}/maintenance/")
    refused = page.goto(f"{live_web.url}/slas/new/")

    # then nothing of it shows
    assert "their secret objective" not in listed
    assert "fraud-scorer" not in listed
    assert (detail.status, api.status, maintenance.status) == (404, 404, 404)
    # and the form offers no pipeline of ours: their own team has none yet
    assert refused.status == 200
    assert "no pipelines yet" in page.inner_text("main")
    assert "fraud-scorer" not in page.content()
