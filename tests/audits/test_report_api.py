"""The reports API as a script uses it: an auditor's API token requests a report, waits for it,
downloads its files and verifies them offline; other teams' tokens find nothing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from audits import services
from audits.log import record
from audits.models import Report
from latencyboard.apitokens.models import Scope
from latencyboard.apitokens.services import issue_api_token
from latencyboard.audit_trail import Subject
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role, Team
from tests.audits.offline import verify_offline
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db


def _script(team: Team | None, role: Role = Role.AUDITOR) -> tuple[Client, User]:
    """A client holding a read-write API token of a user with ``role`` in ``team``."""
    user = cast(User, make_user(team, role))
    token = issue_api_token(user, "audit script", Scope.READ_WRITE).plaintext
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}"), user


def _team() -> Team:
    team = make_team()
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    return team


def test_a_script_requests_waits_downloads_and_verifies_offline(tmp_path: Path):
    # given an auditor's API token
    team = _team()
    script, _ = _script(team)

    # when the script requests a report, polls it until the worker has built it, and
    # downloads every file it lists
    created = script.post(
        "/api/audit-reports/",
        {"team": team.pk, "year": 2026, "quarter": 3},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    report_id = created.json()["id"]
    assert created.json()["status"] == "queued"
    states = []
    for _ in range(3):
        answer = script.get(f"/api/audit-reports/{report_id}/").json()
        states.append(answer["status"])
        if answer["status"] == "done":
            break
        services.build_report(report_id)  # the reports worker, between two polls
    folder = tmp_path / "downloaded"
    folder.mkdir()
    for listed in answer["files"]:
        response = script.get(listed["url"])
        assert response.status_code == 200
        (folder / listed["name"]).write_bytes(response.content)

    # then it saw the report queued then done, with its manifest, signature and public key,
    # and the files verify offline with that key
    assert states == ["queued", "done"]
    assert answer["provisional"] is False
    assert answer["manifest"]["report"] == report_id
    assert answer["signature"]["public_key"] == answer["public_key"]
    assert {f["name"] for f in answer["files"]} >= {"manifest.json", "report.pdf"}
    result = verify_offline(folder, answer["public_key"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("who", ["outsider", "viewer"])
def test_other_tokens_get_404_for_a_teams_report_and_cannot_request_one(who):
    # given a finished report of a team, and a token of another team's auditor or of a
    # viewer of the team
    team = _team()
    _, auditor = _script(team)
    report = services.request_report(None, team, 2026, 3, None, auditor, dt.datetime.now(dt.UTC))
    services.build_report(report.pk)
    other, _ = _script(make_team()) if who == "outsider" else _script(team, Role.VIEWER)

    # when it asks for the report, a file of it, and requests one for that team
    detail = other.get(f"/api/audit-reports/{report.pk}/")
    download = other.get(f"/api/audit-reports/{report.pk}/files/manifest.json")
    request = other.post(
        "/api/audit-reports/",
        {"team": team.pk, "year": 2026, "quarter": 3},
        content_type="application/json",
    )
    listing = other.get("/api/audit-reports/")

    # then none of it exists for them, and no report was added
    assert (detail.status_code, download.status_code, request.status_code) == (404, 404, 404)
    assert listing.json() == []
    assert Report.objects.filter(team=team).count() == 1


def test_bad_requests_get_400():
    # given an auditor's token
    team = _team()
    script, _ = _script(team)

    # when it asks for a quarter not begun, a bad quarter, a pipeline of no team, and bad
    # filters of the log
    future = script.post(
        "/api/audit-reports/",
        {"team": team.pk, "year": 2999, "quarter": 1},
        content_type="application/json",
    )
    fifth = script.post(
        "/api/audit-reports/",
        {"team": team.pk, "year": 2026, "quarter": 5},
        content_type="application/json",
    )
    foreign = script.post(
        "/api/audit-reports/",
        {"team": team.pk, "year": 2026, "quarter": 3, "pipelines": [2**62]},
        content_type="application/json",
    )
    log = script.get("/api/audit-log/", {"since": "20260-01-01", "until": "yesterday"})

    # then each is a 400 naming the field
    assert (future.status_code, list(future.json())) == (400, ["quarter"])
    assert (fifth.status_code, list(fifth.json())) == (400, ["quarter"])
    assert (foreign.status_code, list(foreign.json())) == (400, ["pipelines"])
    assert (log.status_code, sorted(log.json())) == (400, ["since", "until"])


def test_the_audit_log_api_filters_and_pages_the_teams_events():
    # given events of two actors on a team, and one of another team
    team = _team()
    script, auditor = _script(team)
    admin = cast(User, make_user(team, Role.ADMIN))
    at = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)
    for n in range(3):
        record(
            None,
            "objective.changed",
            Subject("objective", 7, "fast", team.pk),
            {"threshold_ms": {"before": str(n), "after": str(n + 1)}},
            actor=admin,
            now=at + dt.timedelta(hours=n),
        )
    record(None, "alert_rule.created", Subject("alert_rule", 3, "tail", team.pk), actor=auditor)
    record(None, "objective.changed", Subject("objective", 9, "theirs", make_team().pk))

    # when it reads the log filtered by actor, object and time, one event a page
    page = script.get(
        "/api/audit-log/",
        {
            "actor": admin.username,
            "object": "objective:7",
            "since": "2026-08-01T00:30:00Z",
            "until": "2026-08-02",
            "limit": "1",
        },
    )
    following = script.get(page.json()["next"])

    # then it gets the two later changes, newest first, with their before and after
    assert page.status_code == 200
    assert page.json()["count"] == 2
    assert [e["detail"] for e in page.json()["results"] + following.json()["results"]] == [
        {"threshold_ms": {"before": "2", "after": "3"}},
        {"threshold_ms": {"before": "1", "after": "2"}},
    ]


def test_extreme_values_get_4xx_never_a_server_error():
    # given an auditor's token and a finished report
    team = _team()
    script, auditor = _script(team)
    report = services.request_report(None, team, 2026, 3, None, auditor, dt.datetime.now(dt.UTC))
    services.build_report(report.pk)

    # when it sends a NUL byte in a file name, a team id past bigint and a huge log offset
    nul = script.get(f"/api/audit-reports/{report.pk}/files/a%00.csv")
    huge = script.post(
        "/api/audit-reports/",
        {"team": 2**70, "year": 2026, "quarter": 3},
        content_type="application/json",
    )
    far = script.get("/api/audit-log/", {"offset": str(10**30)})

    # then each answer is a plain 4xx, or an empty page
    assert (nul.status_code, huge.status_code, far.status_code) == (404, 400, 200)
    assert far.json()["results"] == []


def test_a_team_may_have_a_few_reports_waiting_and_no_more(settings):
    # given a team allowed two waiting reports, with two queued (no worker is building them)
    settings.AUDIT_MAX_PENDING_REPORTS = 2
    team = _team()
    script, _ = _script(team)
    asked = {"team": team.pk, "year": 2026, "quarter": 3}
    first = script.post("/api/audit-reports/", asked, content_type="application/json")
    second = script.post("/api/audit-reports/", asked, content_type="application/json")

    # when a script asks for a third, and again once one of the two has finished
    third = script.post("/api/audit-reports/", asked, content_type="application/json")
    Report.objects.filter(pk=first.json()["id"]).update(status="done")
    fourth = script.post("/api/audit-reports/", asked, content_type="application/json")

    # then the third is told to come back when one is done, and stored nothing
    assert (first.status_code, second.status_code) == (201, 201)
    assert third.status_code == 429
    assert "2 reports queued or being built" in third.json()["detail"]
    assert third["Retry-After"] == str(settings.AUDIT_REPORT_RETRY_AFTER_SECONDS)
    assert fourth.status_code == 201
    assert Report.objects.filter(team=team).count() == 3


def test_a_full_queue_says_when_the_oldest_waiting_report_should_be_done(settings):
    # given a team whose last reports each took 10 minutes from request to done, and a full
    # queue whose oldest report was requested 4 minutes ago
    settings.AUDIT_MAX_PENDING_REPORTS = 1
    team = _team()
    script, user = _script(team)
    now = timezone.now()
    for minutes_ago in (60, 30):
        requested = now - dt.timedelta(minutes=minutes_ago)
        Report.objects.create(
            team=team,
            year=2026,
            quarter=3,
            pipeline_ids=[],
            requested_by=user,
            requested_at=requested,
            status="done",
            finished_at=requested + dt.timedelta(minutes=10),
        )
    asked = {"team": team.pk, "year": 2026, "quarter": 3}
    waiting = script.post("/api/audit-reports/", asked, content_type="application/json")
    Report.objects.filter(pk=waiting.json()["id"]).update(
        requested_at=now - dt.timedelta(minutes=4)
    )

    # when the script asks for another
    refused = script.post("/api/audit-reports/", asked, content_type="application/json")

    # then it is told to come back in the 6 minutes the waiting one should still take
    assert refused.status_code == 429
    assert refused["Retry-After"] == "360"


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL], ids=str)
def test_the_service_itself_refuses_a_member_who_neither_audits_nor_administers(role):
    # given a member of the team who is not its auditor or admin
    team = _team()
    member = cast(User, make_user(team, role))

    # when the service is asked for a report in their name, then it refuses and queues nothing
    with pytest.raises(PermissionDenied):
        services.request_report(None, team, 2026, 1, None, member, dt.datetime.now(dt.UTC))
    assert not Report.objects.exists()
