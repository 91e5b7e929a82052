"""The reports pages: who sees and downloads which report, and what is recorded."""

from __future__ import annotations

from typing import cast

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from audits import services
from audits.models import AuditEvent, Report
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role, Team
from tests.factories import make_team
from tests.factories import make_user as make_any_user

pytestmark = pytest.mark.django_db


def make_user(team: Team | None = None, role: Role = Role.VIEWER) -> User:
    """A user with ``role`` in ``team``, typed as the ``User`` the services take."""
    return cast(User, make_any_user(team, role))


def _report(team: Team) -> Report:
    """A finished report of ``team``'s last quarter (no traffic: every table but the header
    empty), built synchronously as the worker would."""
    Pipeline.objects.get_or_create(team=team, service_name="fraud-scorer")
    requester = make_user(team, Role.AUDITOR)
    report = services.request_report(None, team, 2026, 3, None, requester, timezone.now())
    services.build_report(report.pk)
    return report


def test_auditor_lists_and_downloads_their_teams_report_and_the_download_is_recorded(client):
    # given a finished report of an auditor's team
    team = make_team()
    report = _report(team)
    auditor = make_user(team, Role.AUDITOR)
    client.force_login(auditor)

    # when they open the list, the report and download its manifest
    listing = client.get("/audits/reports/")
    detail = client.get(f"/audits/reports/{report.pk}/")
    download = client.get(f"/audits/reports/{report.pk}/files/manifest.json")

    # then they see it and get the stored bytes, and the download is in the team's log
    stored = report.files.get(name="manifest.json")
    assert (listing.status_code, detail.status_code, download.status_code) == (200, 200, 200)
    assert f"/audits/reports/{report.pk}/".encode() in listing.content
    assert stored.sha256.encode() in detail.content
    assert download.content == bytes(stored.content)
    assert download["Content-Type"] == "application/json"
    assert list(
        AuditEvent.objects.filter(team=team, action="report.downloaded").values_list(
            "actor_id", "subject_id", "detail"
        )
    ) == [(auditor.pk, str(report.pk), {"file": "manifest.json"})]


@pytest.mark.parametrize(
    "role", [None, Role.VIEWER, Role.ONCALL], ids=["outsider", "viewer", "oncall"]
)
def test_others_cannot_list_or_download_a_teams_report(client, role):
    # given a finished report of a team, and a user outside it or in it without the role
    team = make_team()
    report = _report(team)
    user = make_user(make_team() if role is None else team, role or Role.ADMIN)
    client.force_login(user)

    # when they list reports and ask for this one and its files
    listing = client.get("/audits/reports/")
    detail = client.get(f"/audits/reports/{report.pk}/")
    download = client.get(f"/audits/reports/{report.pk}/files/report.pdf")

    # then it does not exist for them, and nothing of it leaked or was recorded
    assert listing.status_code == 200
    assert f"/audits/reports/{report.pk}/".encode() not in listing.content
    assert (detail.status_code, download.status_code) == (404, 404)
    assert not AuditEvent.objects.filter(action="report.downloaded").exists()


def test_auditor_requests_a_report_and_it_is_queued_and_recorded(
    client, django_capture_on_commit_callbacks
):
    # given an auditor of a team with a pipeline
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="recommender")
    auditor = make_user(team, Role.AUDITOR)
    client.force_login(auditor)

    # when they ask for its 2026 Q3 report
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post("/audits/reports/", {"team": team.pk, "year": 2026, "quarter": 3})

    # then a queued report of every pipeline exists, its build is enqueued after commit,
    # and the request is in the log
    report = Report.objects.get(team=team)
    assert response.status_code == 302
    assert (report.status, report.pipeline_ids, report.requested_by) == (
        "queued",
        [pipeline.pk],
        auditor,
    )
    assert len(callbacks) == 1
    assert list(
        AuditEvent.objects.filter(team=team).values_list("action", "actor_id", "subject_id")
    ) == [("report.requested", auditor.pk, str(report.pk))]


def test_report_of_a_quarter_not_begun_is_refused(client):
    # given an admin of a team
    team = make_team()
    client.force_login(make_user(team, Role.ADMIN))
    next_year = timezone.now().year + 1

    # when they ask for a report of next year's first quarter
    response = client.post("/audits/reports/", {"team": team.pk, "year": next_year, "quarter": 1})

    # then it is refused with the reason, and nothing is queued
    assert response.status_code == 400
    assert b"That quarter has not begun." in response.content
    assert not Report.objects.exists()


def test_outsider_cannot_request_a_report_of_another_team(client):
    # given a team and a user who is an auditor elsewhere
    team = make_team()
    client.force_login(make_user(make_team(), Role.AUDITOR))

    # when they ask for a report of that team
    response = client.post("/audits/reports/", {"team": team.pk, "year": 2026, "quarter": 3})

    # then the team is not a choice, and nothing is queued
    assert response.status_code == 400
    assert not Report.objects.exists()


def test_finished_report_is_not_rebuilt(client):
    # given a finished report and its stored hashes
    report = _report(make_team())
    hashes = list(report.files.order_by("name").values_list("name", "sha256"))
    finished_at = Report.objects.get(pk=report.pk).finished_at

    # when the worker is asked to build it again (a redelivered task)
    built = services.build_report(report.pk)

    # then nothing changes
    assert built is False
    assert list(report.files.order_by("name").values_list("name", "sha256")) == hashes
    assert Report.objects.get(pk=report.pk).finished_at == finished_at
    assert finished_at is not None


def test_a_full_report_queue_refuses_the_page_with_when_to_come_back(client, settings):
    # given a team allowed one waiting report, which has one queued (no worker builds it)
    settings.AUDIT_MAX_PENDING_REPORTS = 1
    team = make_team()
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    auditor = make_user(team, Role.AUDITOR)
    services.request_report(None, team, 2026, 3, None, auditor, timezone.now())
    client.force_login(auditor)

    # when the auditor requests another on the page
    asked = {"team": team.pk, "year": 2026, "quarter": 3}
    refused = client.post("/audits/reports/", asked)

    # then the page says why, with the status and header that say when to retry
    assert refused.status_code == 429
    assert refused["Retry-After"] == str(settings.AUDIT_REPORT_RETRY_AFTER_SECONDS)
    assert "1 reports queued or being built" in refused.content.decode()
    assert Report.objects.filter(team=team).count() == 1
