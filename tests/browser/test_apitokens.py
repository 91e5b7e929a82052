"""A user makes an API token in the browser and a script reads the API with it over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from latencyboard.pipelines.models import Pipeline
from tests.browser.conftest import LiveWeb, log_in, screenshot
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def get_json(live_web: LiveWeb, path: str, token: str) -> tuple[int, object]:
    """GET ``path`` as curl would: the Authorization header and nothing else."""
    request = urllib.request.Request(  # noqa: S310 - our own test server
        f"{live_web.url}{path}", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_a_token_made_in_the_browser_reads_the_api_until_revoked(page, live_web):
    # given a member of a team with a pipeline
    team = make_team("ours")
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    member = make_user(team, password="a-browser-test-password-9")
    log_in(page, live_web, member.get_username())

    # when they create a read-only token from the API tokens link
    page.click("text=API tokens")
    page.fill("#id_name", "grafana")
    page.check("input[name=scope][value=read]")
    page.click("button:text('Create token')")
    token = page.inner_text("#issued-token")
    screenshot(page, "api-token-created")

    # then a script with only that header lists the team's pipeline
    status, body = get_json(live_web, "/api/pipelines/", token)
    assert status == 200
    assert [row["service_name"] for row in body] == ["fraud-scorer"]  # type: ignore[attr-defined]
    # and the page, opened again, no longer shows the token but lists its use
    page.goto(f"{live_web.url}/account/api-tokens/")
    assert token not in page.content()
    assert "never" not in page.inner_text("table.grid tbody")

    # when they revoke it
    page.click("button:text('Revoke')")

    # then the script is refused
    assert get_json(live_web, "/api/pipelines/", token)[0] == 401
    screenshot(page, "api-token-revoked")


def test_a_login_locked_out_in_the_browser_says_so(page, live_web, settings):
    # given a user whose password was guessed wrong up to the limit
    member = make_user(make_team(), password="a-browser-test-password-9")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        page.goto(f"{live_web.url}/login/")
        page.fill("#id_username", member.get_username())
        page.fill("#id_password", "a-wrong-guess")
        page.click("button[type=submit]")

    # when the right password comes next
    page.goto(f"{live_web.url}/login/")
    page.fill("#id_username", member.get_username())
    page.fill("#id_password", "a-browser-test-password-9")
    with page.expect_response(f"{live_web.url}/login/") as answer:
        page.click("button[type=submit]")

    # then the lockout page answers, and nobody is logged in
    assert answer.value.status == 429
    assert "Too many failed logins" in page.inner_text("h1")
    assert "15 minutes" in page.inner_text("main")
    screenshot(page, "login-locked-out")
    page.goto(f"{live_web.url}/")
    assert "/login/" in page.url
