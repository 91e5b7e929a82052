"""Provenance: what the first start and the demo's management commands create is in the
audit log with the command as the actor, and an objective's edit says before and after."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command

from audits.models import AuditEvent
from latencyboard.alerts.models import Rule
from latencyboard.local.services import bootstrap
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla.models import Objective
from latencyboard.sla.versions import versions_of
from latencyboard.teams.models import Role, Team
from latencyboard.windows import floor_minute
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import make_scene

pytestmark = pytest.mark.django_db


def _logged(team: Team) -> list[tuple[str, str, str]]:
    return list(
        AuditEvent.objects.filter(team=team)
        .order_by("id")
        .values_list("actor_username", "action", "subject_type")
    )


def test_the_first_start_logs_what_it_creates_as_the_command_and_a_restart_logs_nothing(
    tmp_path: Path,
):
    # given a first local start with the demo
    bootstrap(tmp_path, demo=True)
    team = Team.objects.get(slug="demo")

    # when the stack starts again
    first = _logged(team)
    bootstrap(tmp_path, demo=True)

    # then the admin's role, the ingest token and each demo objective were logged once, by
    # the command, with what they were created as
    command = "manage.py bootstrap_local"
    objectives = Objective.objects.filter(team=team).count()
    assert objectives == 3
    assert first == [
        (command, "membership.added", "membership"),
        (command, "ingest_token.created", "ingest_token"),
        *[(command, "objective.created", "objective")] * objectives,
    ]
    assert _logged(team) == first
    role = AuditEvent.objects.get(team=team, action="membership.added")
    assert role.detail == {"role": {"before": None, "after": "admin"}}
    created = AuditEvent.objects.filter(team=team, action="objective.created").first()
    assert created is not None
    assert set(created.detail) >= {"threshold_ms", "target_percent"}


def test_the_demo_incident_command_logs_the_rule_it_adds(settings, tmp_path: Path):
    # given the demo team's pipeline without a rule
    settings.VAR_DIR = tmp_path
    team = Team.objects.create(name="Demo", slug="demo")
    Pipeline.objects.create(team=team, service_name="fraud-scorer")

    # when the demo incident starts
    call_command("demo_incident", "fraud-scorer", "model_forward", "--factor", "1.5")

    # then the rule it added is in the team's log, made by the command
    rule = Rule.objects.get(pipeline__team=team)
    assert _logged(team) == [("manage.py demo_incident", "alert_rule.created", "alert_rule")]
    assert AuditEvent.objects.get(team=team).subject_id == str(rule.pk)


def test_every_objective_version_says_when_it_took_effect(tmp_path: Path):
    # given the demo's objectives, created with no spans to count yet
    bootstrap(tmp_path, demo=True)

    # when their versions are read
    objectives = list(Objective.objects.filter(team__slug="demo"))
    first = [versions_of(o)[0] for o in objectives]

    # then each took effect at its creation's minute
    assert [v.effective_from for v in first] == [floor_minute(o.created_at) for o in objectives]


def test_a_rule_change_says_what_it_was_before(client):
    # given a team's alert rule and its admin
    scene = make_scene()
    old_name = scene.rule.name
    client.force_login(make_user(scene.team, Role.ADMIN))

    # when the admin renames it through the API
    response = client.patch(
        f"/api/alert-rules/{scene.rule.pk}/", {"name": "tail p99"}, content_type="application/json"
    )

    # then the log has the new name and, under before, the old one
    assert response.status_code == 200
    event = AuditEvent.objects.get(action="alert_rule.changed", subject_id=str(scene.rule.pk))
    assert (event.detail["name"], event.detail["before"]) == ("tail p99", {"name": old_name})
