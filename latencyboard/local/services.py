"""First-start set-up of a local stack: an admin login, a demo team and its ingest token."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from latencyboard.teams import services as team_services
from latencyboard.teams import tokens
from latencyboard.teams.models import IngestToken, Role, Team

ADMIN_USERNAME = "admin"
DEMO_TEAM = "Demo"


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
def bootstrap(var_dir: Path) -> LocalCredentials:
    """Create what a first local start needs, reusing what an earlier start created.

    The admin password is generated on first start and kept (mode 0600) in ``var_dir``, so
    each start can print it again; nothing here is a fixed, guessable credential.
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
    return LocalCredentials(ADMIN_USERNAME, _read_secret(password_file), demo_token)
