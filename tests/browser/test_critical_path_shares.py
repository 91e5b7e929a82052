"""The pipeline page's breakdown counted as work or along the critical path, on a pipeline
whose requests run two stages side by side."""

from __future__ import annotations

import datetime as dt
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.rollups.stage_share_services import compute_stage_shares
from latencyboard.teams.models import Role
from tests.browser.conftest import ARTIFACTS, PASSWORD, log_in
from tests.browser.test_dashboards import open_pipeline, plotted
from tests.factories import make_team, make_user
from tests.latencyboard.test_traces import StoredSpan, store

pytestmark = pytest.mark.django_db(transaction=True)


def side_by_side_pipeline() -> tuple[Pipeline, User]:
    """Twenty requests of 100 ms whose feature hydration (70 ms) and model (50 ms) run side by
    side after 10 ms of the root's own: 150 ms of work, 100 ms waited for."""
    team = make_team("ml")
    pipeline = Pipeline.objects.create(team=team, service_name="side-by-side")
    root, hydration, model = (
        Stage.objects.create(pipeline=pipeline, name=name)
        for name in ("predict", "feature_hydration", "model_forward")
    )
    minute = timezone.now().replace(second=0, microsecond=0) - dt.timedelta(minutes=5)
    spans = []
    for number in range(1, 21):
        at = minute + dt.timedelta(seconds=2 * number)
        later = at + dt.timedelta(milliseconds=10)
        spans += [
            StoredSpan(number, 10, None, root, at, 100.0),
            StoredSpan(number, 11, 10, hydration, later, 70.0),
            StoredSpan(number, 12, 10, model, later, 50.0),
        ]
    store(team, spans)
    while fold_pending_batches(timezone.now()).batches:
        pass
    compute_stage_shares(timezone.now(), seconds=60)
    return pipeline, cast(User, make_user(team, role=Role.VIEWER, password=PASSWORD))


WIDTH = "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"


def bars(page) -> dict[str, list[float]]:
    return {
        trace["name"]: [round(x, 1) for x in trace["x"]]
        for trace in plotted(page, "chart-breakdown")
    }


def test_the_breakdown_offers_the_critical_path_share_beside_work(browser, page, live_web):
    pipeline, viewer = side_by_side_pipeline()
    log_in(page, live_web, viewer.get_username())

    # when they open the pipeline page: shares of work by default
    open_pipeline(page, live_web, pipeline, "?window=1h")
    page.locator("#breakdown").scroll_into_view_if_needed()
    assert page.get_attribute("#chart-breakdown", "data-counting") == "work"
    assert bars(page) == {
        "feature_hydration": [46.7],
        "model_forward": [33.3],
        "predict (own time)": [20.0],
    }
    assert "share of work" in page.inner_text("#chart-breakdown")

    # and when they count along the critical path
    page.click("#counting-picker button[data-counting=critical]")
    page.wait_for_selector("#chart-breakdown[data-counting=critical]")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.locator("#breakdown").screenshot(path=str(ARTIFACTS / "breakdown-critical-1440.png"))

    # then the model, which the request never waited for, counts nothing, and the shares
    # divide the 100 ms each request took
    assert bars(page) == {
        "feature_hydration": [70.0],
        "predict (own time)": [30.0],
        "model_forward": [0.0],
    }
    assert "share of end-to-end time" in page.inner_text("#chart-breakdown")
    # and the shares over time count the same way
    page.wait_for_selector("#chart-shares[data-counting=critical]")
    assert {
        trace["name"]: [round(y, 1) for y in trace["y"]] for trace in plotted(page, "chart-shares")
    } == {"feature_hydration": [70.0], "predict (own time)": [30.0], "model_forward": [0.0]}
    assert "share of critical path" in page.inner_text("#chart-shares")
    assert (
        page.get_attribute("#counting-picker button[data-counting=critical]", "aria-pressed")
        == "true"
    )

    # and on a phone's screen the page offers the same, no wider than the screen
    phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    log_in(phone, live_web, viewer.get_username())
    open_pipeline(phone, live_web, pipeline, "?window=1h")
    phone.click("#counting-picker button[data-counting=critical]")
    phone.wait_for_selector("#chart-breakdown[data-counting=critical]")
    assert bars(phone)["feature_hydration"] == [70.0]
    assert phone.evaluate(WIDTH) == [390, 390]
    phone.locator("#breakdown").screenshot(path=str(ARTIFACTS / "breakdown-critical-390.png"))
    phone.context.close()
