"""Reads of the audits app, scoped to the teams where the user is an auditor or an admin."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Q, QuerySet

from audits.models import AuditEvent, Report
from latencyboard.teams.models import Membership, Role, Team

AUDIT_ROLES = (Role.AUDITOR, Role.ADMIN)


def audited_teams(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams whose reports and audit log ``user`` may read."""
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user, memberships__role__in=AUDIT_ROLES).order_by(
        "name"
    )


def reports_of(user: User | AnonymousUser) -> QuerySet[Report]:
    return (
        Report.objects.filter(team__in=audited_teams(user))
        .select_related("team", "requested_by")
        .order_by("-requested_at", "-id")
    )


def events_of(user: User | AnonymousUser) -> QuerySet[AuditEvent]:
    """The audit events of ``user``'s audited teams, and those of no team (refused changes,
    personal API tokens) by members of those teams; oldest first."""
    teams = audited_teams(user)
    members = Membership.objects.filter(team__in=teams).values("user_id")
    return AuditEvent.objects.filter(
        Q(team__in=teams) | Q(team__isnull=True, actor_id__in=members)
    ).order_by("at", "id")
