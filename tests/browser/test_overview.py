"""The overview at a glance in headless Chromium, on a day of demo traffic stored, folded,
compacted and split into stage shares as the workers do it."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from latencyboard.demo.backfill import backfill_demo
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.compaction import compact_rollups
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.rollups.stage_share_services import compute_stage_shares
from latencyboard.sla.services import create_objective
from latencyboard.teams.models import Role, Team
from tests.browser.conftest import ARTIFACTS, PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user
from tests.snapshots import Seeds

pytestmark = pytest.mark.django_db(transaction=True)

SCALE = 0.005  # as tests/browser/test_dashboards.py: a few requests a minute per pipeline


@dataclass(frozen=True)
class Demo:
    team: Team
    recommender: Pipeline
    member: str
    outsider: str


@pytest.fixture
def demo(seeds: Seeds) -> Demo:
    """A day of the three demo pipelines; the recommender's ranking model is most of its
    slowest requests' time. Another team has a pipeline of its own. Built once in a test
    process, each test gets a copy of its own."""
    return cast(Demo, seeds.get("browser overview demo", _demo))


def _demo() -> Demo:
    now = timezone.now()
    team, other = make_team("demo"), make_team("other")
    backfill_demo(team, days=1, end=now, now=now, scale=SCALE, seed=20261124)
    while fold_pending_batches(timezone.now()).batches:
        pass
    compact_rollups(timezone.now())
    compute_stage_shares(timezone.now(), seconds=120)
    Pipeline.objects.create(team=other, service_name="their-secret-service")
    return Demo(
        team,
        Pipeline.objects.get(team=team, service_name="recommender"),
        make_user(team, password=PASSWORD).get_username(),
        make_user(other, password=PASSWORD).get_username(),
    )


# Whether any element matching the selector, or inside it, reaches past the screen's edge (the
# pipeline page's charts below its head are another helper's work in progress).
WIDER_THAN_THE_SCREEN = """(selector) => Array.from(document.querySelectorAll(selector)).some(
    (root) => [root, ...root.querySelectorAll("*")].some(
        (element) => element.closest(".table-scroll") === null
            && element.getBoundingClientRect().right > document.documentElement.clientWidth + 1))"""


def names(page) -> list[str]:
    return page.locator("#overview tbody a.row-link").all_inner_texts()


def sort_values(page, field: str) -> list[float]:
    return [
        float(value)
        for value in page.locator(f"#overview tbody td[data-field={field}]").evaluate_all(
            "(cells) => cells.map((cell) => cell.dataset.sortValue)"
        )
    ]


def test_overview_shows_the_bottleneck_class_of_a_model_bound_pipeline(page, live_web, demo):
    log_in(page, live_web, demo.member)

    # when the member opens the recommender's bottleneck badge on the overview
    row = page.locator(f"#overview tr[data-pipeline='{demo.recommender.pk}']")
    badge = row.locator("details.bottleneck summary")
    badge.click()

    # then it is compute-bound, justified by model_forward's share of all requests: an hour
    # of a few requests a minute has no slowest 1% to build a class on, and it says so
    detail = row.locator(".bottleneck-detail")
    assert badge.inner_text().startswith("compute-bound")
    assert detail.is_visible()
    text = detail.inner_text()
    assert text.startswith("Compute-bound: model_forward is ")
    assert "% of all requests (too few requests for a slowest 1%)" in text
    assert "batch requests on the accelerator" in text
    # and every pipeline with traffic has its 24-hour p99 line
    assert page.locator("#overview svg.sparkline").count() == 3
    screenshot(page, "overview-bottleneck-open")


def test_sorting_a_column_reorders_the_rows(page, live_web, demo):
    log_in(page, live_web, demo.member)
    header = page.locator("#overview th", has=page.locator("button", has_text="p99"))

    # when the member sorts by p99 with the mouse, then again with the keyboard
    header.locator("button").click()
    ascending = names(page), sort_values(page, "p99"), header.get_attribute("aria-sort")
    header.locator("button").focus()
    page.keyboard.press("Enter")
    descending = names(page), sort_values(page, "p99"), header.get_attribute("aria-sort")

    # then the rows follow p99 up, then down, each row moving whole (pipelines whose p99
    # fall in one sketch bucket tie, and keep their order both ways)
    assert ascending[1] == sorted(ascending[1])
    assert ascending[2] == "ascending"
    assert descending[1] == sorted(ascending[1], reverse=True)
    assert dict(zip(*descending[:2], strict=True)) == dict(zip(*ascending[:2], strict=True))
    assert descending[2] == "descending"
    assert ascending[0] != descending[0]


def test_window_choice_changes_the_figures_and_survives_a_reload(page, live_web, demo):
    log_in(page, live_web, demo.member)
    row = page.locator(f"#overview tr[data-pipeline='{demo.recommender.pk}']")
    last_hour = row.locator("[data-field=traffic]").get_attribute("data-sort-value")

    page.locator(".window-choice a", has_text="24h").click()
    page.wait_for_url(f"{live_web.url}/?window=24h")
    last_day = row.locator("[data-field=traffic]").get_attribute("data-sort-value")
    page.reload()

    assert last_day != last_hour
    assert page.locator(".window-choice a[aria-current=true]").inner_text() == "24h"
    # (the same day's figure: a minute may turn between the loads, moving the day by a minute)
    reloaded = float(row.locator("[data-field=traffic]").get_attribute("data-sort-value") or 0)
    assert reloaded == pytest.approx(float(last_day or 0), rel=0.01)
    assert "last 24 hours" in page.inner_text(".page-head")


@pytest.mark.parametrize("width", [1440, 390])
def test_overview_and_pipeline_page_fit_the_screen(page, live_web, demo, width):
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_web, demo.member)
    page.locator(f"#overview tr[data-pipeline='{demo.recommender.pk}'] summary").click()

    overview_overflow = page.evaluate(
        "document.documentElement.scrollWidth > document.documentElement.clientWidth"
    )
    screenshot(page, f"overview-{width}")
    page.goto(f"{live_web.url}/pipelines/{demo.recommender.pk}/")
    page.locator(".page-head details.bottleneck summary").click()
    page.locator(".page-head").screenshot(path=str(ARTIFACTS / f"pipeline-head-{width}.png"))
    head_overflow = page.evaluate(WIDER_THAN_THE_SCREEN, ".page-head, .topbar")
    screenshot(page, f"pipeline-{width}")

    # then nothing is wider than the screen: the table scrolls inside its own box
    assert not overview_overflow
    assert not head_overflow
    assert page.inner_text(".page-head .bottleneck summary").startswith("Bottleneck, last 24 h:")


def test_outsider_sees_none_of_another_teams_pipelines(page, live_web, demo):
    log_in(page, live_web, demo.outsider)

    listed = names(page)
    api = page.request.get(
        f"{live_web.url}/api/pipelines/{demo.recommender.pk}/bottleneck/",
        params={"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"},
    )

    assert listed == ["their-secret-service"]
    assert api.status == 404
    assert "recommender" not in api.text()


def test_at_a_laptop_width_every_column_of_the_overview_is_in_view(page, live_web, demo):
    # given objectives named as a first start names them, and a member on the overview at
    # 1440 px, where each shows its attainment, name and error budget
    admin = cast(User, make_user(demo.team, role=Role.ADMIN))
    for pipeline in Pipeline.objects.filter(team=demo.team):
        create_objective(
            team=demo.team,
            pipeline=pipeline,
            stage=None,
            name=f"{pipeline.service_name} end to end under 300 ms",
            threshold_ms=300.0,
            target_percent=Decimal("99"),
            window="rolling_28d",
            created_by=admin,
        )
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, live_web, demo.member)

    # then the table needs no sideways scrolling: the bottleneck column is in view
    box = page.evaluate(
        "(() => { const b = document.querySelector('.table-scroll');"
        " return [b.scrollWidth, b.clientWidth]; })()"
    )
    assert box[0] <= box[1]
    assert page.locator("#overview th", has_text="Bottleneck").is_visible()
