"""A pipeline with nothing in the chosen window: every chart says why it is empty."""

from __future__ import annotations

from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.services import create_objective
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.browser.test_dashboards import open_pipeline
from tests.factories import make_team, make_user

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
    since = page.evaluate("LB.charts.formatTime(LB.pipeline.range.start)")
    assert chart_messages(page) == {
        "chart-percentiles": "No spans in this window: nothing was received from this pipeline "
        "between its start and now. Pick a longer window, or check that the service sends "
        "traces.",
        "chart-breakdown": "No requests with a complete stage breakdown in this window. Stage "
        "shares are computed 2 minutes after a minute ends, from requests whose root span and "
        "stage spans were all received.",
        "chart-shares": "No stage shares in this window yet. Stage shares are computed 2 "
        "minutes after a minute ends.",
        "chart-sla": "No requests counted for this objective in this window, nor earlier in "
        "its period. Requests are counted as their minute is folded, within seconds.",
        "chart-attributes": f"No spans with attributes since {since}: nothing to break the "
        "latency down by.",
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
