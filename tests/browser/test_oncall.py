"""The on-call page in a real browser: an on-call member sees the firing alert with its
evidence and acknowledges it; a viewer sees no button and the API refuses them; an outsider
sees nothing of it by page, API or link."""

from __future__ import annotations

from typing import Any

import pytest

from latencyboard.alerts.models import Alert
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import (
    BASELINE_AT,
    NOW,
    make_scene,
    put_history,
    put_minutes,
)

pytestmark = pytest.mark.django_db(transaction=True)


def fired() -> Alert:
    from latencyboard.alerts.baselines import compute_baselines
    from latencyboard.alerts.evaluation import evaluate_rule

    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=1.5)
    compute_baselines(BASELINE_AT)
    evaluate_rule(scene.rule.pk, NOW)
    return Alert.objects.get()


def test_oncall_sees_the_firing_alert_with_its_evidence_and_acknowledges_it(
    page: Any, live_web: LiveWeb
):
    alert = fired()
    user = make_user(alert.pipeline.team, Role.ONCALL, password=PASSWORD)
    log_in(page, live_web, user.get_username())

    page.goto(f"{live_web.url}/alerts/")
    page.click(f"#open-incidents tr[data-alert-id='{alert.pk}'] a")
    page.wait_for_selector("#alert-chart[data-state=ready]")
    screenshot(page, "oncall-alert-firing")

    assert page.inner_text("#alert-status") == "Firing"
    assert page.inner_text("#grew-most") == "model_forward"
    found = alert.evidence["regression"]
    assert page.inner_text("#baseline-figure") == f"{found['baseline']['estimate']:.1f} ms"
    assert page.inner_text("#current-figure") == f"{found['current']['estimate']:.1f} ms"
    interval = found["change_interval"]
    assert page.inner_text("#effect-figure") == (
        f"{found['quantile']} +{found['effect_percent']:.0f}% "
        f"(+{interval['low_percent']:.0f}% to +{interval['high_percent']:.0f}%)"
    )
    page.click("#ack-button")
    page.wait_for_selector("#alert-status:text('Acknowledged')")
    assert user.get_username() in page.inner_text("#history")
    assert page.locator("#ack-button").count() == 0


def test_a_viewer_reads_the_alert_but_cannot_acknowledge_it(page: Any, live_web: LiveWeb):
    alert = fired()
    viewer = make_user(alert.pipeline.team, Role.VIEWER, password=PASSWORD)
    log_in(page, live_web, viewer.get_username())

    page.goto(f"{live_web.url}/alerts/{alert.pk}/")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = page.request.post(
        f"{live_web.url}/api/alerts/{alert.pk}/ack/",
        headers={"X-CSRFToken": csrf, "Referer": f"{live_web.url}/alerts/{alert.pk}/"},
    )

    assert page.inner_text("#alert-status") == "Firing"
    assert page.locator("#ack-button").count() == 0
    assert page.locator("#read-only").is_visible()
    assert answer.status == 403
    alert.refresh_from_db()
    assert alert.status == "firing"


def test_an_outsider_sees_no_alert_of_another_team(page: Any, live_web: LiveWeb):
    alert = fired()
    outsider = make_user(make_team("elsewhere"), Role.ADMIN, password=PASSWORD)
    log_in(page, live_web, outsider.get_username())

    link = page.goto(f"{live_web.url}/alerts/{alert.pk}/")
    api = page.request.get(f"{live_web.url}/api/alerts/")
    page.goto(f"{live_web.url}/alerts/")
    oncall_text = page.inner_text("main")
    page.goto(f"{live_web.url}/")

    assert link.status == 404
    assert api.json()["count"] == 0
    assert alert.summary not in oncall_text
    assert page.locator("#overview-alerts").count() == 0
