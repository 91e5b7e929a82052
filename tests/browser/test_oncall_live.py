"""The on-call page left open in a real browser while an incident fires and resolves: it
updates over the live channel without a reload, and the alert's page charts the stage's
percentile around the alert."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert, Incident
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import MINUTE, make_scene, put_history, put_minutes

pytestmark = pytest.mark.django_db(transaction=True)

HOUR = 60 * MINUTE


def elsewhere(work: Callable[[], object]) -> None:
    """Run ``work`` in another thread: it publishes to the live channel, which cannot be done
    from this one, where Playwright keeps an event loop running (see conftest)."""

    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()


def test_the_open_oncall_page_shows_an_incident_fire_and_resolve_without_reload(
    page: Any, live_web: LiveWeb, settings: Any
):
    # Given live publishing on in this process, a rule on fraud-scorer with its baselines,
    # and an on-call member on the on-call page, live.
    settings.LIVE_UPDATES = True
    at = timezone.now().replace(second=30, microsecond=0) - 2 * HOUR  # within "this week"
    scene = make_scene()
    put_history(scene, now=at - HOUR)
    compute_baselines(at - 2 * HOUR)
    put_minutes(scene, 60, scale=1.0, now=at - 10 * MINUTE)
    user = make_user(scene.team, Role.ONCALL, password=PASSWORD)
    log_in(page, live_web, user.get_username())
    page.goto(f"{live_web.url}/alerts/")
    page.wait_for_selector("[data-live-status=live]")
    page.evaluate("() => { window.sameDocument = true; }")
    assert "Nothing is firing." in page.inner_text("#open-incidents")

    # When model_forward turns 1.5x slower and the rule is evaluated.
    put_minutes(scene, 10, scale=1.5, now=at)
    elsewhere(lambda: evaluate_rule(scene.rule.pk, at))

    # Then the incident appears, firing, on the page as it is.
    incident = Incident.objects.get()
    firing = f"#open-incidents article[data-incident-id='{incident.pk}'][data-state=firing]"
    page.wait_for_selector(firing)
    screenshot(page, "oncall-live-firing")
    assert incident.title in page.inner_text(firing)
    assert page.inner_text("[data-live-status]") == "Live"

    # When the stage recovers, evaluated until the incident resolves.
    later = at + 30 * MINUTE
    put_minutes(scene, 40, scale=1.0, now=later + 10 * MINUTE)
    for minute in range(settings.ALERT_CLEAN_EVALUATIONS):
        elsewhere(functools.partial(evaluate_rule, scene.rule.pk, later + minute * MINUTE))

    # Then it moves to the resolved ones, still without a reload.
    resolved = f"#recent-incidents article[data-incident-id='{incident.pk}'][data-state=resolved]"
    page.wait_for_selector(resolved)
    screenshot(page, "oncall-live-resolved")
    assert "Nothing is firing." in page.inner_text("#open-incidents")
    assert page.evaluate("() => window.sameDocument") is True

    # And the alert's page charts model_forward's percentile around it, marks and band.
    alert = Alert.objects.get()
    page.click(f"{resolved} tr[data-alert-id='{alert.pk}'] a")
    page.wait_for_selector("#alert-chart[data-state=ready]")
    screenshot(page, "oncall-alert-around")
    assert int(page.get_attribute("#alert-chart", "data-points") or 0) >= 60
    assert page.locator("#alert-chart .shapelayer path").count() >= 3
    annotations = page.locator("#alert-chart .annotation-text").all_text_contents()
    assert annotations == ["fired", "resolved"]
