"""Reads of personal API tokens."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from latencyboard.apitokens.models import ApiToken


def tokens_of(user: User | AnonymousUser) -> QuerySet[ApiToken]:
    """``user``'s own tokens, active first, newest first; none for anonymous users."""
    if not user.is_authenticated:
        return ApiToken.objects.none()
    return ApiToken.objects.filter(user=user).order_by("revoked_at", "-created_at")
