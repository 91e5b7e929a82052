"""The application role after the owner's hand-over (what `make run`, Docker Compose and any
DATABASE_MIGRATION_URL set up): it reads and appends to the audit log and can change nothing
of it, while it keeps the span partitions it manages. Checked as that role (SET ROLE), inside
the test's transaction, which undoes the hand-over."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction

from audits.log import record
from audits.models import AuditEvent
from latencyboard.audit_trail import Subject
from latencyboard.spans.services import drop_expired_partitions, ensure_partitions
from latencyboard.storage import roles

pytestmark = pytest.mark.django_db

APP = "latencyboard_test_app"
INSUFFICIENT_PRIVILEGE = "42501"


@pytest.fixture
def as_app_role() -> Iterator[None]:
    with connection.cursor() as cursor:
        roles.ensure_role(cursor.cursor, APP, None)
        roles.hand_over(cursor.cursor, APP)
        cursor.execute(f"SET ROLE {APP}")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET ROLE")


def _refused(statement: str) -> str | None:
    """The SQLSTATE ``statement`` fails with (None if it succeeds), undone either way."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement)
            transaction.set_rollback(True)
    except DatabaseError as exc:
        return getattr(exc.__cause__, "sqlstate", None)
    return None


@pytest.mark.parametrize(
    "statement",
    [
        "DROP TRIGGER audit_log_no_update_delete ON audits_auditevent",
        "ALTER TABLE audits_auditevent DISABLE TRIGGER ALL",
        "DROP FUNCTION audit_log_refuse_change() CASCADE",
        "TRUNCATE audits_auditevent",
        "DELETE FROM audits_auditevent",
        "UPDATE audits_auditevent SET action = 'nothing.happened'",
        "ALTER TABLE audits_auditevent OWNER TO CURRENT_USER",
    ],
    ids=[
        "drop-trigger",
        "disable-triggers",
        "drop-guard-function",
        "truncate",
        "delete",
        "update",
        "take-ownership",
    ],
)
def test_the_application_role_cannot_change_the_audit_log(as_app_role: None, statement: str):
    # given an event in the log, written by the application role
    record(None, "objective.created", Subject("objective", 1, "fast", None))

    # when it tries to remove the guard or the events, then PostgreSQL refuses it
    assert _refused(statement) == INSUFFICIENT_PRIVILEGE
    assert AuditEvent.objects.count() == 1


def test_the_application_role_is_no_superuser_and_manages_its_partitions(as_app_role: None):
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (APP, False)

    far = dt.datetime(2031, 5, 5, tzinfo=dt.UTC)
    created = ensure_partitions(far, ahead_days=0)
    assert created
    assert drop_expired_partitions(far + dt.timedelta(days=400), retention_days=1)


def test_a_superuser_is_refused_as_the_application_role():
    with connection.cursor() as cursor, pytest.raises(roles.SuperuserRoleError):
        roles.ensure_role(cursor.cursor, "postgres", None)
