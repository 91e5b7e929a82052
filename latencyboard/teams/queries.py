"""Reads scoped to the teams a user belongs to."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from latencyboard.teams.models import Role, Team


def teams_of(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams ``user`` is a member of; none for anonymous users."""
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user).order_by("name")


def has_role(user: User | AnonymousUser, team: Team, *roles: Role) -> bool:
    """Whether ``user`` is in ``team`` with one of ``roles`` (any role when none given)."""
    if not user.is_authenticated:
        return False
    memberships = team.memberships.filter(user=user)
    if roles:
        memberships = memberships.filter(role__in=roles)
    return memberships.exists()
