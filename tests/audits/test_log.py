"""The audit log: append-only at the database, and what the SLA, token and admin paths record."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse

from audits.log import record
from audits.models import AuditEvent
from latencyboard.alerts.models import Alert, AlertStatus
from latencyboard.audit_trail import Subject
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.sla.models import Objective
from latencyboard.teams.models import Membership, Role, Team
from tests.factories import incident_for, make_team
from tests.factories import make_user as make_any_user
from tests.latencyboard.alerts.scenes import NOW, make_scene

pytestmark = pytest.mark.django_db


def make_user(team: Team | None = None, role: Role = Role.VIEWER) -> User:
    """A user with ``role`` in ``team``, typed as the ``User`` the services take."""
    return cast(User, make_any_user(team, role))


AGENT = "audit-tests/1.0"


def _objective(team: Team) -> Objective:
    pipeline = Pipeline.objects.create(team=team, service_name=f"svc-{team.pk}")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    return Objective.objects.create(
        team=team,
        pipeline=pipeline,
        stage=stage,
        name="forward under 250 ms",
        threshold_ms=250.0,
        target_percent=Decimal("99.000"),
    )


def _event() -> AuditEvent:
    team = make_team()
    return record(None, "objective.created", Subject("objective", 1, "x", team.pk), {"a": 1})


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE audits_auditevent SET action = 'objective.nothing' WHERE id = %s",
        "DELETE FROM audits_auditevent WHERE id = %s",
    ],
    ids=["update", "delete"],
)
def test_database_refuses_to_change_or_delete_an_event(sql):
    # given a recorded event
    event = _event()

    # when it is updated or deleted with plain SQL, then PostgreSQL refuses
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, [event.pk])

    # and the event is as recorded
    assert AuditEvent.objects.get(pk=event.pk).action == "objective.created"


def test_database_refuses_truncate_without_the_test_flush_setting():
    # given a recorded event, and a session that does not allow truncating (as the app's)
    event = _event()

    # when the table is truncated, then PostgreSQL refuses
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL latencyboard.audit_log_truncate = ''")
        with pytest.raises(DatabaseError, match="TRUNCATE refused"), transaction.atomic():
            cursor.execute("TRUNCATE audits_auditevent")
    assert AuditEvent.objects.filter(pk=event.pk).exists()


def test_admin_creates_edits_and_deletes_an_objective_and_each_is_recorded(client):
    # given a team admin, a pipeline and a stage
    team = make_team()
    admin = make_user(team, Role.ADMIN)
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    client.force_login(admin)
    headers = {"HTTP_USER_AGENT": AGENT, "REMOTE_ADDR": "203.0.113.7"}

    # when they create, edit and delete an objective through the API
    created = client.post(
        "/api/slas/",
        {
            "pipeline": pipeline.pk,
            "stage": stage.pk,
            "name": "fast",
            "threshold_ms": "250",
            "target_percent": "99.5",
        },
        content_type="application/json",
        **headers,
    )
    pk = created.json()["id"]
    edited = client.patch(
        f"/api/slas/{pk}/", {"threshold_ms": "300"}, content_type="application/json", **headers
    )
    deleted = client.delete(f"/api/slas/{pk}/", **headers)

    # then each step succeeded and is in the log: who, what, the subject, details, from where
    assert (created.status_code, edited.status_code, deleted.status_code) == (201, 200, 204)
    events = AuditEvent.objects.filter(team=team).order_by("id")
    assert [
        (
            e.actor_id,
            e.actor_username,
            e.action,
            e.subject_type,
            e.subject_id,
            e.subject_label,
            e.ip,
            e.user_agent,
        )
        for e in events
    ] == [
        (admin.pk, admin.username, action, "objective", str(pk), "fast", "203.0.113.7", AGENT)
        for action in ("objective.created", "objective.edited", "objective.deleted")
    ]
    assert [(e.detail["threshold_ms"], e.detail.get("version")) for e in events] == [
        ("250.0", None),
        ("300.0", 2),
        ("300.0", None),
    ]
    # and the edit says what it changed, before and after
    assert events[1].detail["before"] == {"threshold_ms": "250.0", "version": 1}


@pytest.mark.parametrize(
    ("method", "body"),
    [("patch", {"threshold_ms": "1"}), ("delete", None)],
    ids=["edit", "delete"],
)
def test_auditor_cannot_change_an_objective_and_the_attempt_is_recorded(client, method, body):
    # given an auditor of the objective's team
    team = make_team()
    objective = _objective(team)
    auditor = make_user(team, Role.AUDITOR)
    client.force_login(auditor)

    # when they try to edit or delete it
    response = getattr(client, method)(
        f"/api/slas/{objective.pk}/", body, content_type="application/json"
    )

    # then they are refused, nothing changed, and the attempt is in the log
    assert response.status_code == 403
    assert Objective.objects.get(pk=objective.pk).threshold_ms == 250.0
    assert list(
        AuditEvent.objects.values_list("actor_id", "action", "subject_type", "subject_id")
    ) == [(auditor.pk, "change.refused", "path", f"/api/slas/{objective.pk}/")]


def test_auditor_cannot_create_an_objective_and_the_attempt_is_recorded(client):
    # given an auditor of a team with a pipeline
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="svc")
    auditor = make_user(team, Role.AUDITOR)
    client.force_login(auditor)

    # when they try to create an objective
    response = client.post(
        "/api/slas/",
        {"pipeline": pipeline.pk, "name": "x", "threshold_ms": "1", "target_percent": "99"},
        content_type="application/json",
    )

    # then they are refused and the attempt is recorded
    assert response.status_code == 403
    assert not Objective.objects.exists()
    assert list(AuditEvent.objects.values_list("action", "subject_id")) == [
        ("change.refused", "/api/slas/")
    ]


def test_api_token_creation_and_revocation_are_recorded(client):
    # given a signed-in user
    user = make_user(make_team())
    client.force_login(user)

    # when they create an API token and revoke it
    client.post("/account/api-tokens/", {"name": "grafana", "scope": "read"})
    token = user.api_tokens.get()
    client.post(f"/account/api-tokens/{token.pk}/revoke/")

    # then both are in the log, naming the token
    assert list(
        AuditEvent.objects.order_by("id").values_list("actor_id", "action", "subject_label")
    ) == [(user.pk, "api_token.created", "grafana"), (user.pk, "api_token.revoked", "grafana")]


def test_ingest_token_issue_and_revoke_in_the_admin_are_recorded(client):
    # given a staff superuser and a team
    team = make_team()
    staff = make_user()
    staff.is_staff = staff.is_superuser = True
    staff.save()
    client.force_login(staff)

    # when they issue an ingest token, then revoke it with the admin action
    client.post(
        "/admin/teams/ingesttoken/add/", {"team": team.pk, "name": "collector", "rate_limit": ""}
    )
    token = team.ingest_tokens.get()
    client.post(
        "/admin/teams/ingesttoken/",
        {"action": "revoke", "_selected_action": [token.pk]},
    )

    # then both are in the team's log, besides the admin's own record of the form it saved
    assert list(
        AuditEvent.objects.filter(team=team).order_by("id").values_list("action", "subject_id")
    ) == [
        ("ingest_token.created", str(token.pk)),
        ("admin.added", str(token.pk)),
        ("ingest_token.revoked", str(token.pk)),
    ]


def test_role_change_in_the_admin_is_recorded(client):
    # given a staff superuser and a team with a viewer
    team = make_team()
    viewer = make_user(team, Role.VIEWER)
    membership = Membership.objects.get(team=team, user=viewer)
    staff = make_user()
    staff.is_staff = staff.is_superuser = True
    staff.save()
    client.force_login(staff)

    # when they make the viewer an admin on the team's admin page
    response = client.post(
        f"/admin/teams/team/{team.pk}/change/",
        {
            "name": team.name,
            "slug": team.slug,
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-MIN_NUM_FORMS": "0",
            "memberships-MAX_NUM_FORMS": "1000",
            "memberships-0-id": membership.pk,
            "memberships-0-team": team.pk,
            "memberships-0-user": viewer.pk,
            "memberships-0-role": "admin",
        },
    )

    # then the role changed and the change is in the team's log
    assert response.status_code == 302
    assert list(
        AuditEvent.objects.filter(team=team)
        .exclude(action="admin.changed")
        .values_list("action", "subject_label", "detail")
    ) == [
        (
            "membership.role_changed",
            viewer.username,
            {"role": "admin", "before": {"role": "viewer"}},
        )
    ]


def test_auditor_exports_the_log_of_their_team_only(client):
    # given events of two teams and an auditor of the first
    mine, other = make_team(), make_team()
    record(None, "objective.created", Subject("objective", 1, "mine", mine.pk))
    record(None, "objective.created", Subject("objective", 2, "theirs", other.pk))
    auditor = make_user(mine, Role.AUDITOR)
    client.force_login(auditor)

    # when they export the log
    response = client.get("/audits/log.csv")

    # then it lists their team's event only, and the export itself is recorded
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert response.status_code == 200
    assert [(r["action"], r["subject"]) for r in rows] == [("objective.created", "mine")]
    assert AuditEvent.objects.filter(
        team=mine, action="audit_log.exported", actor_id=auditor.pk
    ).exists()
    assert not AuditEvent.objects.filter(team=other, action="audit_log.exported").exists()


def test_exported_log_quotes_cells_a_spreadsheet_would_run(client):
    # given an event whose subject someone named as a formula
    team = make_team()
    record(None, "objective.created", Subject("objective", 1, '=HYPERLINK("http://x")', team.pk))
    client.force_login(make_user(team, Role.AUDITOR))

    # when the log is exported
    response = client.get("/audits/log.csv")

    # then the spreadsheet reads the name as text
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["subject"] for r in rows if r["action"] == "objective.created"] == [
        '\'=HYPERLINK("http://x")'
    ]


def test_viewer_sees_no_audit_log(client):
    # given an event of a team and a viewer of it
    team = make_team()
    record(None, "objective.created", Subject("objective", 1, "mine", team.pk))
    client.force_login(make_user(team, Role.VIEWER))

    # when they open the log and export it
    page = client.get("/audits/log/")
    export = client.get("/audits/log.csv")

    # then neither shows the event
    assert page.status_code == 200
    assert b"objective.created" not in page.content
    assert export.content.decode().splitlines()[1:] == []


def test_maintenance_window_added_and_deleted_is_recorded(client):
    # given a team admin and an objective
    team = make_team()
    objective = _objective(team)
    admin = make_user(team, Role.ADMIN)
    client.force_login(admin)

    # when they add a maintenance window through the API, then delete it
    added = client.post(
        f"/api/slas/{objective.pk}/maintenance/",
        {
            "covers": "objective",
            "start": "2026-08-10T06:00:00Z",
            "end": "2026-08-10T07:00:00Z",
            "reason": "failover drill",
        },
        content_type="application/json",
    )
    window = added.json()["id"]
    client.delete(f"/api/slas/{objective.pk}/maintenance/{window}/")

    # then both are in the team's log with the window's details
    assert list(
        AuditEvent.objects.filter(team=team)
        .order_by("id")
        .values_list("action", "subject_id", "detail__maintenance_window", "detail__reason")
    ) == [
        ("maintenance.added", str(objective.pk), window, "failover drill"),
        ("maintenance.deleted", str(objective.pk), window, "failover drill"),
    ]


def test_alert_handling_and_rule_and_channel_changes_are_recorded(client):
    # given an on-call member and an admin of a team with a firing alert
    scene = make_scene()
    alert = Alert.objects.create(
        rule=scene.rule,
        pipeline=scene.pipeline,
        stage=scene.stage,
        incident=incident_for(scene.pipeline, AlertStatus.FIRING, NOW),
        dedup_key="k-audit",
        status=AlertStatus.FIRING,
        summary="fraud-scorer · model_forward slower",
        started_at=NOW,
    )
    oncall, admin = make_user(scene.team, Role.ONCALL), make_user(scene.team, Role.ADMIN)

    # when on-call acknowledges it on the page, then silences it through the page too
    client.force_login(oncall)
    client.post(reverse("alerts:ack", kwargs={"alert_id": alert.pk}), HTTP_USER_AGENT=AGENT)
    client.post(
        reverse("alerts:silence", kwargs={"alert_id": alert.pk}),
        {"minutes": "30", "reason": "deploy in progress"},
    )
    # and the admin creates a rule and a channel through the API, and deletes the channel
    client.force_login(admin)
    rule = client.post(
        "/api/alert-rules/",
        {"pipeline": scene.pipeline.pk, "name": "e2e p99", "min_effect_percent": 30},
        content_type="application/json",
    )
    channel = client.post(
        "/api/alert-channels/",
        {
            "team": scene.team.pk,
            "name": "pager",
            "kind": "slack",
            "target": "https://hooks.slack.com/services/T0/B0/secretpart",
        },
        content_type="application/json",
    )
    client.delete(f"/api/alert-channels/{channel.json()['id']}/")

    # then each act is in the audit log with who did it, and no channel target or secret
    events = list(
        AuditEvent.objects.filter(team=scene.team)
        .order_by("id")
        .values_list("action", "actor_username", "subject_type", "subject_label")
    )
    assert (rule.status_code, channel.status_code) == (201, 201)
    assert events == [
        ("alert.acknowledged", oncall.username, "alert", "fraud-scorer model_forward"),
        ("alert.silenced", oncall.username, "alert", "fraud-scorer model_forward"),
        ("alert_rule.created", admin.username, "alert_rule", "e2e p99"),
        ("alert_channel.created", admin.username, "alert_channel", "pager"),
        ("alert_channel.deleted", admin.username, "alert_channel", "pager"),
    ]
    acknowledged = AuditEvent.objects.get(action="alert.acknowledged")
    assert acknowledged.user_agent == AGENT
    created_rule = AuditEvent.objects.get(action="alert_rule.created")
    assert created_rule.detail["min_effect_percent"] == 30
    logged = str(list(AuditEvent.objects.values_list("detail", flat=True)))
    assert "hooks.slack.com" not in logged
    assert "secretpart" not in logged


def test_log_page_filters_pages_and_shows_the_detail_and_its_csv_is_the_filtered_set(client):
    # given 120 threshold changes by an admin and one rule created by another member
    team = make_team()
    admin, oncall = make_user(team, Role.ADMIN), make_user(team, Role.ONCALL)
    start = dt.datetime(2026, 8, 1, tzinfo=dt.UTC)
    for n in range(120):
        record(
            None,
            "objective.changed",
            Subject("objective", 7, "fast", team.pk),
            {"threshold_ms": {"before": str(n), "after": str(n + 1)}},
            actor=admin,
            now=start + dt.timedelta(minutes=n),
        )
    record(None, "alert_rule.created", Subject("alert_rule", 3, "tail", team.pk), actor=oncall)
    client.force_login(make_user(team, Role.AUDITOR))
    wanted = {"actor": admin.username, "action": "objective.", "since": "2026-08-01T00:10:00Z"}

    # when the auditor filters the log, opens the second page and exports the filtered set
    first = client.get("/audits/log/", wanted)
    second = client.get("/audits/log/", {**wanted, "page": 2})
    export = client.get("/audits/log.csv", wanted)
    refused = client.get("/audits/log/", {"since": "not a time"})

    # then the pages hold the 110 matching events, newest first, with their before and after,
    # and the CSV holds exactly those
    assert (first.status_code, second.status_code, refused.status_code) == (200, 200, 400)
    assert [e.detail["threshold_ms"]["after"] for e in first.context["page"]][:2] == ["120", "119"]
    assert len(second.context["page"].object_list) == 10
    assert b"&quot;before&quot;: &quot;119&quot;" in first.content
    assert b"alert_rule.created" not in first.content + second.content
    rows = list(csv.DictReader(io.StringIO(export.content.decode())))
    assert [r["action"] for r in rows] == ["objective.changed"] * 110
    assert rows[0]["detail"] == '{"threshold_ms": {"after": "11", "before": "10"}}'


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_ORIGIN": "https://evil.example", "HTTP_SEC_FETCH_SITE": "cross-site"},
        {"HTTP_ORIGIN": "https://evil.example"},
        {"HTTP_SEC_FETCH_SITE": "same-site"},
    ],
    ids=["fetch-metadata-and-origin", "origin-only", "sibling-subdomain"],
)
def test_a_cross_site_post_writes_no_refusal_in_the_victims_name(headers):
    # given an auditor signed in, whose browser another site makes post to the API
    team = make_team()
    objective = _objective(team)
    victim = Client(enforce_csrf_checks=True)
    victim.force_login(make_user(team, Role.AUDITOR))

    # when the forged requests arrive, with the session cookie and without the CSRF token
    deleted = victim.delete(f"/api/slas/{objective.pk}/", **headers)
    created = victim.post("/api/slas/", {"name": "x"}, **headers)
    page_form = victim.post(reverse("alerts:channel-new"), {"name": "x"}, **headers)

    # then they are refused and nothing is written in the victim's name
    assert [deleted.status_code, created.status_code, page_form.status_code] == [403, 403, 403]
    assert not AuditEvent.objects.exists()


def test_a_refused_change_from_this_site_is_still_recorded():
    # given an auditor on this site's page, with its CSRF token
    team = make_team()
    objective = _objective(team)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(make_user(team, Role.AUDITOR))
    browser.get("/")
    token = browser.cookies["csrftoken"].value

    # when the page's script tries to delete the objective
    response = browser.delete(
        f"/api/slas/{objective.pk}/",
        HTTP_X_CSRFTOKEN=token,
        HTTP_ORIGIN="http://testserver",
        HTTP_SEC_FETCH_SITE="same-origin",
    )

    # then it is refused by the role check, and recorded
    assert response.status_code == 403
    assert list(AuditEvent.objects.values_list("action", "subject_id")) == [
        ("change.refused", f"/api/slas/{objective.pk}/")
    ]


@pytest.mark.parametrize(
    ("proxies", "recorded"),
    [(0, "198.51.100.4"), (1, "203.0.113.50")],
    ids=["no-proxy-declared", "one-proxy"],
)
def test_the_recorded_address_trusts_x_forwarded_for_only_from_declared_proxies(
    client, settings, proxies, recorded
):
    # given TRUSTED_PROXY_COUNT=0 (the default) or 1, as the settings module turns it into
    if proxies:
        settings.AXES_IPWARE_PROXY_COUNT = proxies - 1
        settings.AXES_IPWARE_META_PRECEDENCE_ORDER = ("HTTP_X_FORWARDED_FOR", "REMOTE_ADDR")
    team = make_team()
    objective = _objective(team)
    client.force_login(make_user(team, Role.AUDITOR))

    # when a change is refused, the request claiming another client
    client.delete(
        f"/api/slas/{objective.pk}/",
        content_type="application/json",
        REMOTE_ADDR="198.51.100.4",
        HTTP_X_FORWARDED_FOR="203.0.113.50",
    )

    # then the address in the log is the peer's unless a proxy was declared
    assert list(AuditEvent.objects.values_list("action", "ip")) == [("change.refused", recorded)]
