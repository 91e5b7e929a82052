"""Plain builders for the objects tests need (no mocks: these are real rows)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser

from latencyboard.teams.models import Role, Team
from latencyboard.teams.services import add_member, issue_ingest_token

_counter = itertools.count(1)


@dataclass
class TeamWithToken:
    team: Team
    token: str


def make_team(name: str | None = None) -> Team:
    n = next(_counter)
    name = name or f"team-{n}"
    return Team.objects.create(name=f"{name}-{n}", slug=f"{name}-{n}")


def make_team_with_token(name: str | None = None, rate_limit: int | None = None) -> TeamWithToken:
    team = make_team(name)
    return TeamWithToken(team, issue_ingest_token(team, "tests", rate_limit=rate_limit).plaintext)


def make_user(
    team: Team | None = None,
    role: Role = Role.VIEWER,
    password: str = "pw-for-tests-1",  # noqa: S107
) -> AbstractBaseUser:
    user = get_user_model().objects.create_user(f"user{next(_counter)}", password=password)
    if team is not None:
        add_member(team, user, role)
    return user
