"""Writes for teams, memberships and ingest tokens."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.utils import timezone

from latencyboard.teams import tokens
from latencyboard.teams.models import IngestToken, Membership, Role, Team


@dataclass(frozen=True)
class IssuedToken:
    token: IngestToken
    plaintext: str


def issue_ingest_token(
    team: Team,
    name: str,
    created_by: User | None = None,
    rate_limit: int | None = None,
) -> IssuedToken:
    """Create a token for ``team``; the plaintext exists only in the returned value."""
    plaintext = tokens.generate()
    token = IngestToken.objects.create(
        team=team,
        name=name,
        prefix=tokens.display_prefix(plaintext),
        digest=tokens.digest(plaintext),
        created_by=created_by,
        rate_limit=rate_limit,
    )
    return IssuedToken(token=token, plaintext=plaintext)


def revoke_ingest_tokens(queryset: QuerySet[IngestToken]) -> int:
    """Revoke the still-active tokens in ``queryset``; returns how many changed."""
    return queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def add_member(team: Team, user: User, role: Role = Role.VIEWER) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        team=team, user=user, defaults={"role": role}
    )
    return membership
