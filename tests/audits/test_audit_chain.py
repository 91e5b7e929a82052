"""The audit log's hash chain: ``verify_audit_log`` and a report's verification name the first
row that was inserted out of order (back-dated, even with a well-computed hash, by the
application role), edited or deleted (by someone who could lift the append-only guard)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import cast

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from audits import chain, services
from audits.log import record
from audits.models import AuditEvent, Report
from latencyboard.audit_trail import Subject
from latencyboard.pipelines.models import Pipeline
from latencyboard.storage import roles
from latencyboard.teams.models import Role, Team
from tests.factories import make_team, make_user
from tests.support import Lines

pytestmark = pytest.mark.django_db

APP = "latencyboard_test_app"


def _changes(team: Team, count: int) -> list[AuditEvent]:
    return [
        record(None, "objective.updated", Subject("objective", n, f"fast {n}", team.pk), {"n": n})
        for n in range(count)
    ]


def _back_dated_insert(events: list[AuditEvent]) -> int:
    """As the application role, append a row dated a month back, its hash chained right."""
    head = AuditEvent.objects.order_by("-seq").first()
    assert head is not None
    at, team_id = timezone.now() - dt.timedelta(days=30), events[0].team_id
    row: dict[str, object] = {
        "at": at,
        "team_id": team_id,
        "actor_id": None,
        "actor_username": "ceo",
        "action": "objective.updated",
        "subject_type": "objective",
        "subject_id": "1",
        "subject_label": "fast 1",
        "detail": {},
        "ip": None,
        "user_agent": "",
    }
    seq = head.seq + 1
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the hand-over alters tables
        roles.ensure_role(cursor.cursor, APP, None)
        roles.hand_over(cursor.cursor, APP)
        cursor.execute(f"SET ROLE {APP}")
        cursor.execute(
            "INSERT INTO audits_auditevent (at, team_id, actor_id, actor_username, action,"
            " subject_type, subject_id, subject_label, detail, ip, user_agent, seq, hash)"
            " VALUES (%s, %s, NULL, 'ceo', 'objective.updated', 'objective', '1', 'fast 1',"
            " '{}', NULL, '', %s, %s)",
            [at, team_id, seq, chain.row_hash(head.hash, seq, row)],
        )
        cursor.execute("RESET ROLE")
    return seq


def _lifting_the_guard(statement: str, event: AuditEvent) -> None:
    """As the table's owner, who can drop the append-only trigger."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE audits_auditevent DISABLE TRIGGER audit_log_no_update_delete")
        cursor.execute(statement, [event.pk])
        cursor.execute("ALTER TABLE audits_auditevent ENABLE TRIGGER audit_log_no_update_delete")


def _edit(events: list[AuditEvent]) -> int:
    _lifting_the_guard(
        "UPDATE audits_auditevent SET actor_username = 'someone else' WHERE id = %s", events[1]
    )
    return events[1].seq


def _delete(events: list[AuditEvent]) -> int:
    _lifting_the_guard("DELETE FROM audits_auditevent WHERE id = %s", events[1])
    return events[2].seq


TAMPERING = [
    pytest.param(_back_dated_insert, id="back-dated-insert-by-the-app-role"),
    pytest.param(_edit, id="edited-row"),
    pytest.param(_delete, id="deleted-row"),
]


def test_an_untouched_log_verifies():
    # given a few recorded changes
    _changes(make_team(), 4)

    # when the log is verified, then every row chains to the one before
    call_command("verify_audit_log", stdout=(out := Lines()))
    assert out.lines[-1].split()[:3] == ["ok", "4", "events"]


@pytest.mark.parametrize("tamper", TAMPERING)
def test_verify_audit_log_names_the_first_bad_row(tamper: Callable[[list[AuditEvent]], int]):
    # given a log of a few changes, then tampered with
    bad = tamper(_changes(make_team(), 4))

    # when the log is verified
    with pytest.raises(CommandError, match="audit log"):
        call_command("verify_audit_log", stdout=(out := Lines()))

    # then the first bad row is named
    assert out.lines[-1].split()[:3] == ["FAILED", "seq", str(bad)]


def test_a_report_carries_the_chain_head_of_its_cut_off():
    # given a built report
    report, _ = _built()

    # then its signed manifest names the last event it saw, as the log holds it now
    manifest = json.loads(bytes(report.files.get(name="manifest.json").content))
    head = AuditEvent.objects.order_by("-seq").first()
    assert head is not None
    assert manifest["audit_log"] == {"seq": head.seq, "sha256": head.hash}


@pytest.mark.parametrize("tamper", TAMPERING)
def test_a_reports_verification_names_the_first_bad_row(tamper: Callable[[list[AuditEvent]], int]):
    # given changes, a report built after them, then the log tampered with
    report, team = _built()
    events = list(AuditEvent.objects.filter(team=team).order_by("seq"))
    bad = tamper(events)

    # when the report is verified
    with pytest.raises(CommandError, match="does not match"):
        call_command("verify_report", report.pk, stdout=(out := Lines()))

    # then the first bad row is named
    broken = [line.split()[:4] for line in out.lines if line.startswith("BROKEN")]
    assert broken == [["BROKEN", "audit_log", "seq", str(bad)]]


def _built() -> tuple[Report, Team]:
    team = make_team()
    Pipeline.objects.create(team=team, service_name="fraud-scorer")
    auditor = cast(User, make_user(team, Role.AUDITOR))
    _changes(team, 3)
    report = services.request_report(None, team, 2026, 3, None, auditor, timezone.now())
    assert services.build_report(report.pk)
    return report, team
