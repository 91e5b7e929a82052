from __future__ import annotations

import pytest

from latencyboard.pipelines.models import Pipeline
from tests.browser.conftest import PASSWORD, log_in, screenshot
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_log_in_and_see_only_my_teams_pipelines(page, live_web):
    # given a member of one team, and another team's pipeline
    ours, theirs = make_team("ours"), make_team("theirs")
    Pipeline.objects.create(team=ours, service_name="fraud-scorer", environment="production")
    Pipeline.objects.create(team=theirs, service_name="their-secret-service")
    member = make_user(ours, password=PASSWORD)

    # when they log in through the login page
    page.goto(f"{live_web.url}/")
    assert "/login/" in page.url
    screenshot(page, "login")
    log_in(page, live_web, member.get_username())

    # then the overview lists their pipeline and nothing of the other team
    body = page.inner_text("main")
    assert "fraud-scorer" in body
    assert "their-secret-service" not in body
    screenshot(page, "overview-after-login")
