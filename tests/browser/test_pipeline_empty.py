"""A pipeline with nothing, or a first minute, in the chosen window: every chart shows its
data or says why it has none."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.rollups.stage_share_services import compute_stage_shares
from latencyboard.sla.services import create_objective
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.browser.test_dashboards import open_pipeline
from tests.factories import make_team, make_user
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)


def chart_messages(page) -> dict[str, str]:
    """Per chart area, its message, or DRAWN when it holds a chart."""
    return page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('.chart')].map((chart) => [
            chart.id, chart.classList.contains('is-empty') ? chart.innerText : 'DRAWN']))"""
    )


def quiet_pipeline() -> tuple[Pipeline, User]:
    team = make_team("ml")
    pipeline = Pipeline.objects.create(team=team, service_name="quiet-service")
    for name in ("POST /score", "model_forward"):
        Stage.objects.create(pipeline=pipeline, name=name)
    return pipeline, cast(User, make_user(team, role=Role.ADMIN, password=PASSWORD))


def test_every_chart_of_a_pipeline_without_data_says_why(page, live_web):
    # given a pipeline with stages and an objective, but no span received yet
    pipeline, admin = quiet_pipeline()
    create_objective(
        team=pipeline.team,
        pipeline=pipeline,
        stage=None,
        name="99% under 200 ms",
        threshold_ms=200.0,
        target_percent=Decimal("99"),
        window="rolling_28d",
        created_by=admin,
    )
    log_in(page, live_web, admin.get_username())

    # when they open its page on the last hour
    open_pipeline(page, live_web, pipeline, "?window=1h")
    screenshot(page, "pipeline-empty")

    # then each chart area says why it is empty, and the budget has no figure to contradict it
    messages = chart_messages(page)
    attributes = messages.pop("chart-attributes")
    assert re.fullmatch(r"No spans carrying model\.version from .+ UTC to .+ UTC\.", attributes)
    assert messages == {
        "chart-percentiles": "No spans in this window: nothing was received from this pipeline "
        "between its start and now. Pick a longer window, or check that the service sends "
        "traces.",
        "chart-red": "No requests in this window.",
        "chart-breakdown": "No requests with a complete stage breakdown in this window. Stage "
        "shares are computed 2 minutes after a minute ends, from requests whose root span and "
        "stage spans were all received.",
        "chart-shares": "No stage shares in this window yet. Stage shares are computed 2 "
        "minutes after a minute ends.",
        "chart-sla": "No requests counted for this objective in this window, nor earlier in "
        "its period. Requests are counted as their minute is folded, within seconds.",
    }
    assert page.locator("#budget p").last.inner_text() == "Nothing counted in this period yet."


def test_a_pipeline_without_an_objective_says_so_where_its_sla_chart_would_be(page, live_web):
    pipeline, admin = quiet_pipeline()
    log_in(page, live_web, admin.get_username())

    open_pipeline(page, live_web, pipeline, "?window=1h")

    assert " ".join(chart_messages(page)["sla-none"].split()) == (
        "No SLA objective for this pipeline, so there is no attainment or error budget to "
        "show. Create an objective"
    )
    link = page.locator("#sla-none a")
    assert link.get_attribute("href") == f"/slas/new/?pipeline={pipeline.pk}"


def test_the_first_minute_of_traffic_is_drawn_and_the_budget_agrees(page, live_web):
    # given a new pipeline whose first minute of traffic (3 requests, one slow) was folded
    # and broken down into stage shares, under an objective it already misses
    pipeline, admin = quiet_pipeline()
    root, forward = pipeline.stages.order_by("id")
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=5)
    spans = []
    for number, ms in ((1, 40.0), (2, 60.0), (3, 400.0)):
        at = minute + dt.timedelta(seconds=10 * number)
        spans += [
            StoredSpan(number, 10, None, root, at, ms, attributes={"model.version": "v1"}),
            StoredSpan(number, 11, 10, forward, at + dt.timedelta(milliseconds=1), ms - 2),
        ]
    store(pipeline.team, spans)
    while fold_pending_batches(timezone.now()).batches:
        pass
    compute_stage_shares(timezone.now(), seconds=60)
    create_objective(
        team=pipeline.team,
        pipeline=pipeline,
        stage=None,
        name="99% under 200 ms",
        threshold_ms=200.0,
        target_percent=Decimal("99"),
        window="rolling_28d",
        created_by=admin,
    )
    log_in(page, live_web, admin.get_username())

    # when they open its page on the last hour
    open_pipeline(page, live_web, pipeline, "?window=1h")
    screenshot(page, "pipeline-first-minute")

    # then every chart is drawn, the single step of shares as a stacked bar, the budget's
    # steps as points
    assert set(chart_messages(page).values()) == {"DRAWN"}
    shares, sla = page.evaluate(
        """['chart-shares', 'chart-sla'].map((id) => Array.from(document.getElementById(id).data,
            (t) => [t.name, t.type === 'bar' ? 'bar' : t.mode, Array.from(t.y)]))"""
    )
    assert [(name, kind, len(y)) for name, kind, y in shares] == [
        ("model_forward", "bar", 1),
        ("POST /score (own time)", "bar", 1),
    ]
    assert [(name, kind) for name, kind, _ in sla] == [
        ("attainment per step", "lines+markers"),
        ("error budget left this period", "lines+markers"),
        ("objective: 99% within 200 ms", "lines"),
    ]
    # and the budget's header and its points (one per 5 minutes since the first request)
    # agree: one slow request of three where 1% may be
    header = page.locator("#budget .figure", has_text="error budget left").locator("strong")
    budget = {round(value, 1) for value in sla[1][2]}
    assert (header.inner_text(), budget) == ("-3233.3%", {-3233.3})
