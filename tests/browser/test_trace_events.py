"""Span events in the waterfall, in headless Chromium: an exception recorded by the SDK is
shown under its span with its type and message, its stack trace folded until asked for."""

from __future__ import annotations

import shutil

import pytest

from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team_with_token, make_user
from tests.ingest.test_trace_events import export_failed_request
from tests.support import SCREENSHOTS

pytestmark = pytest.mark.django_db(transaction=True)

SHOTS = SCREENSHOTS / "dialects"


def test_an_exception_is_shown_under_its_span_with_a_folded_stack_trace(page, live_web):
    # given a request whose hydration failed, its exception recorded, sent by the real SDK to
    # the web app's OTLP endpoint
    tenant = make_team_with_token()
    member = make_user(tenant.team, password=PASSWORD).get_username()
    trace_id = export_failed_request(f"{live_web.url}/v1/traces", tenant.token)

    # when a member opens the trace
    log_in(page, live_web, member)
    page.goto(f"{live_web.url}/traces/{trace_id}/")
    page.wait_for_selector(".wf-span")

    # then the failing span is marked with the exception's type, and under it the type and
    # message are shown without a click
    hydration = page.locator(".wf-span[data-name=feature_hydration]")
    assert "FeatureStoreTimeout" in hydration.locator(".badge.exception").inner_text()
    assert hydration.locator(".wf-event.exception").count() == 1
    note = page.locator(".wf-exception")
    assert note.count() == 1
    assert "FeatureStoreTimeout: feature store did not answer for card:42 within 50 ms" in (
        note.inner_text()
    )
    # and the stack trace is folded until asked for
    stack = note.locator(".wf-stack pre")
    assert not stack.is_visible()
    note.locator(".wf-stack summary").click()
    assert stack.is_visible()
    assert "_fetch_features" in stack.inner_text()
    shot = screenshot(page, "trace-exception")
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, SHOTS / shot.name)

    # when the root span is collapsed, the exception goes with its span
    page.locator(".wf-span[data-name='POST /score'] button.wf-toggle").click()
    assert not note.is_visible()

    # when the failing span is opened, its events are listed
    page.locator(".wf-span[data-name='POST /score'] button.wf-toggle").click()
    hydration.click()
    events = page.locator(".wf-detail .wf-events")
    assert "Events (1)" in events.inner_text()
    assert "exception.type=" in events.inner_text()
