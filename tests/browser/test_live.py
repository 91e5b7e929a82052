"""static/js/live.js in headless Chromium against the real web process and Redis layer."""

from __future__ import annotations

import threading

import pytest

from latencyboard.live.groups import team_group
from latencyboard.live.services import publish
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def publish_elsewhere(group: str, event: dict[str, object]) -> None:
    # Not in this thread: Playwright keeps an event loop running here (see conftest).
    thread = threading.Thread(target=publish, args=(group, event))
    thread.start()
    thread.join()


def test_a_signed_in_page_goes_live_and_hears_its_team_s_events(page, live_web, settings):
    # given publishing on in this process too, and a member of a team signed in on the overview
    settings.LIVE_UPDATES = True
    team = make_team()
    log_in(page, live_web, make_user(team, password=PASSWORD).get_username())

    # when the page connects and the team's figures change
    page.evaluate(
        """() => {
            window.heard = [];
            const live = LatencyboardLive.connect("/ws/live/");
            live.addEventListener("rollup", (e) => window.heard.push(e.detail));
        }"""
    )
    page.wait_for_selector("[data-live-status=live]")
    publish_elsewhere(team_group(team.pk), {"type": "rollup", "pipelines": [7]})
    page.wait_for_function("() => window.heard.length > 0")

    # then the indicator says so and the panel got the event
    screenshot(page, "live-status")
    assert page.inner_text("[data-live-status]") == "Live"
    assert page.evaluate("() => window.heard") == [{"type": "rollup", "pipelines": [7]}]
