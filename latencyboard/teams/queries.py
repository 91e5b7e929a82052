"""Reads scoped to the teams a user belongs to."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, QuerySet

from latencyboard.teams.models import IngestToken, Membership, Role, Team


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


def memberships_of(user: User | AnonymousUser) -> QuerySet[Membership]:
    """``user``'s own memberships, with their teams, by team name."""
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("team").order_by("team__name")


def members_of(user: User | AnonymousUser, *roles: Role) -> QuerySet[Membership]:
    """The memberships of the teams :func:`teams_of` ``user`` (with ``roles``)."""
    return Membership.objects.filter(team__in=teams_of(user, *roles))


def ingest_tokens_of(user: User | AnonymousUser, *roles: Role) -> QuerySet[IngestToken]:
    """The ingest tokens of the teams :func:`teams_of` ``user`` (with ``roles``)."""
    return IngestToken.objects.filter(team__in=teams_of(user, *roles))


def has_role(user: User | AnonymousUser, team: Team, *roles: Role) -> bool:
    """Whether ``user`` is in ``team`` with one of ``roles`` (any role when none given)."""
    if not user.is_authenticated:
        return False
    memberships = team.memberships.filter(user=user)
    if roles:
        memberships = memberships.filter(role__in=roles)
    return memberships.exists()


@dataclass(frozen=True, slots=True)
class TeamLimits:
    """How many pipelines a team has against its cap (shown to its admins)."""

    team: str
    pipelines: int
    max_pipelines: int

    @property
    def full(self) -> bool:
        return self.pipelines >= self.max_pipelines


def limits_of(user: User | AnonymousUser, max_pipelines: int) -> list[TeamLimits]:
    """The pipeline count of each team ``user`` administers, against ``max_pipelines``."""
    teams = teams_of(user, Role.ADMIN).annotate(pipeline_count=Count("pipelines"))
    return [TeamLimits(team.name, team.pipeline_count, max_pipelines) for team in teams]
