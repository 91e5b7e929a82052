"""An auditor finds the reports and the audit log from the menu, under the CSP."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from audits import services
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role
from tests.browser.conftest import log_in, screenshot
from tests.browser.test_content_security_policy import watch
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_auditor_opens_a_finished_report_and_the_audit_log(page, live_web):
    # given an auditor of a team with a finished report
    team = make_team("audited")
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    auditor = cast(User, make_user(team, Role.AUDITOR, password="a-browser-test-password-9"))
    report = services.request_report(None, team, 2026, 3, None, auditor, timezone.now())
    services.build_report(report.pk)
    problems = watch(page)
    log_in(page, live_web, auditor.get_username(), "a-browser-test-password-9")

    # when they open Audits from the menu, then the report, then the audit log
    page.click("nav >> text=Audits")
    page.wait_for_selector(f"text=#{report.pk}")
    screenshot(page, "audit-reports")
    page.click(f"text=#{report.pk}")
    page.wait_for_selector("text=manifest.json")
    screenshot(page, "audit-report")
    files = page.locator("table.grid tbody tr").count()
    page.goto(f"{live_web.url}/audits/log/")
    page.wait_for_selector("text=report.requested")
    screenshot(page, "audit-log")

    # then the report lists its eleven files (8 CSVs, the PDF, the manifest and its signature),
    # the log its request, and nothing was refused
    assert files == 11
    assert page.evaluate("window.__violations") == []
    assert problems == []
