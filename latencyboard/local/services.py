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

from latencyboard.demo import profiles
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla.models import Window
from latencyboard.sla.services import create_objective
from latencyboard.teams import services as team_services
from latencyboard.teams import tokens
from latencyboard.teams.models import IngestToken, Role, Team

ADMIN_USERNAME = "admin"
DEMO_TEAM = "Demo"
DEMO_SLA_TARGET = Decimal("99.000")
# End to end, about each pipeline's p99.4 on its baseline model: the slower candidate models
# burn part of the error budget whenever they are rolled out.
DEMO_SLA_THRESHOLDS_MS = {"fraud-scorer": 75.0, "recommender": 300.0, "clinical-alerts": 300.0}


@dataclass(frozen=True)
class LocalCredentials:
    username: str
    password: str | None  # None when the admin existed before and its password is not on file
    demo_token: str


def _write_secret(path: Path, value: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(value + "\n")


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
        _write_secret(password_file, password)
    team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": DEMO_TEAM})
    team_services.add_member(team, admin, Role.ADMIN)

    demo_token = _read_secret(token_file)
    still_valid = (
        demo_token is not None
        and IngestToken.objects.filter(
            team=team, digest=tokens.digest(demo_token), revoked_at__isnull=True
        ).exists()
    )
    if demo_token is None or not still_valid:
        demo_token = team_services.issue_ingest_token(team, "demo service", admin).plaintext
        _write_secret(token_file, demo_token)
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
        create_objective(
            team,
            pipeline,
            None,
            f"{profile.name} end to end under {threshold_ms:g} ms",
            threshold_ms,
            DEMO_SLA_TARGET,
            Window.ROLLING_28D,
            admin,
        )
