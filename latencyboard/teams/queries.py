"""Reads scoped to the teams a user belongs to."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from latencyboard.teams.models import Role, Team


def teams_of(user: User | AnonymousUser, *roles: Role) -> QuerySet[Team]:
    """The teams ``user`` is a member of (with one of ``roles``, when given); none for
    anonymous users. The root of the access rule: team-owned models scope by it through
    their ``visible_to`` (``Pipeline.objects.visible_to(user)``)."""
    if not user.is_authenticated:
        return Team.objects.none()
    # One filter() call: both conditions hold for the same membership row.
    of_user = Team.objects.filter(
        memberships__user=user, **({"memberships__role__in": roles} if roles else {})
    )
    return of_user.order_by("name")


def has_role(user: User | AnonymousUser, team: Team, *roles: Role) -> bool:
    """Whether ``user`` is in ``team`` with one of ``roles`` (any role when none given)."""
    if not user.is_authenticated:
        return False
    memberships = team.memberships.filter(user=user)
    if roles:
        memberships = memberships.filter(role__in=roles)
    return memberships.exists()
