"""Every page under the Content-Security-Policy in headless Chromium: charts drawn, nothing
refused. A violation shows up both as a ``securitypolicyviolation`` event and as a console
error, so both are collected, with uncaught script errors."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from latencyboard.teams.models import Membership, Role
from tests.browser.conftest import LiveWeb, log_in
from tests.browser.test_dashboards import demo  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)

COLLECT = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI} ${where} ${e.sample}`);
});
"""
# /api/docs/ has a policy of its own (latencyboard/urls.py) and its own offline browser test
# (tests/browser/test_static_weight.py).
CHART = ".main-svg"
OPEN_LIVE_SOCKET = """() => new Promise((done) => {
  const socket = new WebSocket(`ws://${location.host}/ws/live/`);
  socket.onmessage = (event) => { done(event.data); socket.close(); };
  socket.onerror = () => done("error");
})"""


def watch(page: Any) -> list[str]:
    """Console errors and uncaught exceptions of ``page`` from now on."""
    problems: list[str] = []

    def on_console(message: Any) -> None:
        if message.type == "error":
            problems.append(f"{message.text} {message.location['url']}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    page.context.add_init_script(COLLECT)
    return problems


def visit(page: Any, live_web: LiveWeb, path: str, ready: str, problems: list[str]) -> list[str]:
    """What went wrong while ``path`` loaded until ``ready`` showed."""
    problems.clear()
    response = page.goto(f"{live_web.url}{path}")
    assert response.status == 200, path
    assert "script-src 'self'" in response.headers["content-security-policy"], path
    page.wait_for_selector(ready, state="attached")
    page.wait_for_load_state("networkidle")
    return [*problems, *page.evaluate("window.__violations")]


def test_every_page_draws_its_charts_without_a_csp_violation(page, live_web, demo):  # noqa: F811
    # given the demo team's admin, who is also staff
    admin = Membership.objects.get(team=demo.team, role=Role.ADMIN).user
    get_user_model().objects.filter(pk=admin.pk).update(is_staff=True, is_superuser=True)
    problems = watch(page)
    now = timezone.now().replace(second=0, microsecond=0)
    a, b = now - dt.timedelta(hours=4), now - dt.timedelta(hours=2)
    windows = (
        f"pipeline={demo.fraud.pk}&a_start={a:%Y-%m-%dT%H:%MZ}&a_end={b:%Y-%m-%dT%H:%MZ}"
        f"&b_start={b:%Y-%m-%dT%H:%MZ}&b_end={now:%Y-%m-%dT%H:%MZ}"
    )

    # when they open every page, the login page first
    found = {"/login/": visit(page, live_web, "/login/", "#id_password", problems)}
    log_in(page, live_web, admin.username)
    trace_list = f"/traces/?pipeline={demo.fraud.pk}"
    found[trace_list] = visit(page, live_web, trace_list, ".trace-table .dur-bar", problems)
    trace = page.get_attribute("a.trace-link", "href")
    pages = {
        "/": "table.overview",
        f"/pipelines/{demo.fraud.pk}/": f"#chart-percentiles {CHART}",
        trace: ".wf-span",
        f"/compare/?{windows}": f"#chart-compare {CHART}",
        "/slas/": "main h1",
        f"/slas/{demo.objective.pk}/": f"#sla-charts[data-state=ready] {CHART}",
        "/slas/new/": "form",
        "/account/api-tokens/": "form",
        "/api/pipelines/": ".response-info",
        "/admin/": "#content-main",
        "/admin/teams/ingesttoken/add/": "#ingesttoken_form",
        "/admin/apitokens/apitoken/": "#changelist",
    }
    for path, ready in pages.items():
        found[path] = visit(page, live_web, path, ready, problems)
    # and the last page opens the live socket of this host, as live updates do
    first_message = page.evaluate(OPEN_LIVE_SOCKET)

    # then none had a violation or a script error, and the socket spoke
    assert found == {path: [] for path in found}
    assert page.evaluate("window.__violations") == []
    assert '"type": "hello"' in first_message
