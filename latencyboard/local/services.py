"""First-start set-up of a local stack: an admin login, a demo team and its ingest token, and
(with the demo) the demo's pipelines with an SLA objective each."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction

from latencyboard.audit_trail import Subject, act
from latencyboard.demo import profiles
from latencyboard.local.secret_files import write_secret
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import versions
from latencyboard.sla.models import Window
from latencyboard.sla.services import create_objective
from latencyboard.teams import services as team_services
from latencyboard.teams import tokens
from latencyboard.teams.models import IngestToken, Membership, Role, Team

ADMIN_USERNAME = "admin"
DEMO_TEAM = "Demo"
DEMO_SLA_TARGET = Decimal("99.000")
BOOTSTRAP_COMMAND = "bootstrap_local"
"""The actor of what the first start creates, in the audit log."""
# End to end, about each pipeline's p99.4 on its baseline model: the slower candidate models
# burn part of the error budget whenever they are rolled out.
DEMO_SLA_THRESHOLDS_MS = {"fraud-scorer": 75.0, "recommender": 300.0, "clinical-alerts": 300.0}


@dataclass(frozen=True)
class LocalCredentials:
    username: str
    password: str | None  # None when the admin existed before and its password is not on file
    demo_token: str


def _read_secret(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


@transaction.atomic
def bootstrap(var_dir: Path, *, demo: bool = False) -> LocalCredentials:
    """Create what a first local start needs, reusing what an earlier start created.

    The admin password is generated on first start and kept (mode 0600) in ``var_dir``, so
    each start can print it again; nothing here is a fixed, guessable credential. With
    ``demo``, the demo's pipelines are created too, each with an end-to-end SLA objective;
    a pipeline that exists already is left as it is (its objectives are the team's to edit).
    """
    password_file = var_dir / "admin-password"
    token_file = var_dir / "demo-token"
    user_model = get_user_model()
    admin = user_model.objects.filter(username=ADMIN_USERNAME).first()
    if admin is None:
        password = secrets.token_urlsafe(12)
        admin = user_model.objects.create_superuser(ADMIN_USERNAME, "", password)
        write_secret(password_file, password)
    team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": DEMO_TEAM})
    before = Membership.objects.filter(team=team, user=admin).values_list("role", flat=True).first()
    if before != Role.ADMIN:
        team_services.add_member(team, admin, Role.ADMIN)
        act(
            None,
            "membership.added" if before is None else "membership.role_changed",
            Subject("membership", admin.pk, admin.get_username(), team.pk),
            {"role": {"before": before, "after": Role.ADMIN.value}},
            command=BOOTSTRAP_COMMAND,
        )

    demo_token = _read_secret(token_file)
    still_valid = (
        demo_token is not None
        and IngestToken.objects.filter(
            team=team, digest=tokens.digest(demo_token), revoked_at__isnull=True
        ).exists()
    )
    if demo_token is None or not still_valid:
        issued = team_services.issue_ingest_token(team, "demo service", admin)
        demo_token = issued.plaintext
        write_secret(token_file, demo_token)
        act(
            None,
            "ingest_token.created",
            Subject("ingest_token", issued.token.pk, issued.token.name, team.pk),
            {"prefix": issued.token.prefix},
            command=BOOTSTRAP_COMMAND,
        )
    if demo:
        _create_demo_pipelines(team, admin)
    return LocalCredentials(ADMIN_USERNAME, _read_secret(password_file), demo_token)


def _create_demo_pipelines(team: Team, admin: User) -> None:
    for profile in profiles.PIPELINES:
        pipeline, created = Pipeline.objects.get_or_create(
            team=team, service_name=profile.name, environment=profiles.ENVIRONMENT
        )
        if not created:
            continue
        threshold_ms = DEMO_SLA_THRESHOLDS_MS[profile.name]
        objective = create_objective(
            team,
            pipeline,
            None,
            f"{profile.name} end to end under {threshold_ms:g} ms",
            threshold_ms,
            DEMO_SLA_TARGET,
            Window.ROLLING_28D,
            admin,
        )
        act(
            None,
            "objective.created",
            versions.audit_subject(objective),
            versions.audit_detail(objective),
            command=BOOTSTRAP_COMMAND,
        )
