"""Writes for personal API tokens: issue, revoke, and authenticate (which records use)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from latencyboard.apitokens.models import DISPLAY_LENGTH, PREFIX, ApiToken, Scope
from latencyboard.audit_trail import Subject
from latencyboard.teams import tokens

# last_used_at is a hint for people tidying their tokens, not an audit log: one write a
# minute per token keeps a polling dashboard from writing on every request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedApiToken:
    token: ApiToken
    plaintext: str


def issue_api_token(user: User, name: str, scope: Scope | str) -> IssuedApiToken:
    """Create a token acting as ``user``; the plaintext exists only in the returned value."""
    plaintext = tokens.generate(PREFIX)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        scope=scope,
        prefix=tokens.display_prefix(plaintext, DISPLAY_LENGTH),
        digest=tokens.digest(plaintext),
    )
    return IssuedApiToken(token=token, plaintext=plaintext)


def audit_subject(token: ApiToken) -> Subject:
    """The token as the audit log names it (no team: a token is its user's)."""
    return Subject("api_token", token.pk, token.name, None)


def revoke_api_tokens(queryset: QuerySet[ApiToken], now: datetime) -> int:
    """Revoke the still-active tokens in ``queryset``; returns how many changed."""
    return queryset.filter(revoked_at__isnull=True).update(revoked_at=now)


def authenticate(plaintext: str, now: datetime) -> ApiToken | None:
    """The active token of an active user that ``plaintext`` is, with its user; else None."""
    token = (
        ApiToken.objects.select_related("user")
        .filter(digest=tokens.digest(plaintext), revoked_at__isnull=True, user__is_active=True)
        .first()
    )
    if token is None:
        return None
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    if ApiToken.objects.filter(stale, pk=token.pk).update(last_used_at=now):
        token.last_used_at = now
    return token
