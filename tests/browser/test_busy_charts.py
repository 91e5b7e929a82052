"""A team's heavy reads are served a few at a time (``WEB_TEAM_MAX_HEAVY_REQUESTS``); a read
that waited ``WEB_HEAVY_WAIT_SECONDS`` for its turn is told to come back (429 with
Retry-After). A chart told so asks again and is drawn once the team's reads leave room,
rather than showing the refusal while the rest of its page is drawn."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from latencyboard.storage import heavy_read_lock
from tests.browser.conftest import log_in
from tests.browser.test_dashboards import Demo, demo, plotted  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_chart_told_to_come_back_is_drawn_once_the_team_has_room(
    page,
    live_web,
    demo: Demo,  # noqa: F811 - the fixture
):
    log_in(page, live_web, demo.member)
    answers: list[int] = []
    page.on("response", lambda r: answers.append(r.status) if "/percentiles/" in r.url else None)

    # given another read of the team holds its one heavy-read slot
    slot = heavy_read_lock.key(0, demo.fraud.team_id)
    with connection.cursor() as cursor:
        assert heavy_read_lock.try_take(cursor, slot)
        try:
            # when the member opens the pipeline page, and its series is told to come back
            page.goto(f"{live_web.url}/pipelines/{demo.fraud.pk}/")
            deadline = time.monotonic() + 60
            while 429 not in answers:
                assert time.monotonic() < deadline, f"no 429 within 60 s: {answers}"
                page.wait_for_timeout(200)
        finally:
            # and the other read ends
            heavy_read_lock.release(cursor, slot)

    # then the chart asks again and draws the series, with no error shown
    page.wait_for_selector("body[data-loaded]:not(.loading)")
    assert any(trace["y"] for trace in plotted(page, "chart-percentiles"))
    assert answers[0] == 429
    assert 200 in answers
    assert "Could not load" not in page.inner_text("#chart-percentiles")
