"""Every page that follows live updates shows its status, at a laptop's and a phone's width."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.browser.test_dashboards import Demo, demo  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1440, 390])
def test_the_live_status_shows_on_the_overview_pipeline_and_sla_pages(
    browser,
    live_web,
    demo: Demo,  # noqa: F811 (the fixture imported above)
    width,
):
    # given a member of the demo team, on a laptop or a phone
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log_in(page, live_web, demo.member)
    pages = {
        "overview": ("/", "#overview"),
        "pipeline": (f"/pipelines/{demo.fraud.pk}/", "body[data-loaded]:not(.loading)"),
        "sla": (f"/slas/{demo.objective.pk}/", "#sla-charts[data-state=ready]"),
    }
    statuses = {}
    for name, (path, loaded) in pages.items():
        # when each page is open and has drawn
        page.goto(f"{live_web.url}{path}")
        page.wait_for_selector(loaded)
        page.wait_for_selector("[data-live-status=live]")
        screenshot(page, f"live-status-{name}-{width}")
        box = page.locator("[data-live-status]").bounding_box()
        statuses[name] = (page.inner_text("[data-live-status]"), box["x"] + box["width"] <= width)
    context.close()

    # then each says it is live, inside the screen's width
    assert statuses == {name: ("Live", True) for name in pages}
