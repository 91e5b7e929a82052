"""The channels on the alert settings page in a real browser: an admin presses "Send test",
the test goes through the outbox to a receiver on loopback and shows in the delivery log."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from latencyboard.alerts.outbox import send_due
from latencyboard.teams.models import Role
from tests.browser.conftest import PASSWORD, LiveWeb, log_in, screenshot
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import make_scene
from tests.latencyboard.notifications.receiver import allow_loopback_receivers, running_receiver

pytestmark = pytest.mark.django_db(transaction=True)


def _in_a_thread(work: Callable[[], object]) -> None:
    def run() -> None:
        try:
            work()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(run).result(timeout=120)


def test_an_admin_sends_a_test_and_reads_its_outcome_in_the_delivery_log(
    page: Any, live_web: LiveWeb, settings: Any
):
    allow_loopback_receivers(settings)
    with running_receiver() as receiver:
        scene = make_scene()
        scene.channel.target = receiver.url
        scene.channel.save()
        admin = make_user(scene.team, Role.ADMIN, password=PASSWORD)
        log_in(page, live_web, admin.get_username())

        page.goto(f"{live_web.url}/alerts/settings/")
        page.click(f"[data-channel-test='{scene.channel.pk}']")
        page.wait_for_selector("#deliveries td:text('Pending')")
        # The outbox's worker sends; Playwright's event loop runs in this thread, and the
        # transport runs its own.
        _in_a_thread(lambda: send_due(timezone.now))
        page.goto(f"{live_web.url}/alerts/settings/")
        page.wait_for_selector("#deliveries td:text('Delivered')")
        screenshot(page, "oncall-channel-test-delivered")

        cells = page.inner_text("#deliveries tbody tr").split("\t")
        assert cells[1:5] == ["hook", f"test by {admin.get_username()}", "Delivered", "1"]
        assert cells[5].startswith("200 OK after ")
        (request,) = receiver.requests
        assert request.json()["data"]["title"] == "[TEST] Test notification from latencyboard"
