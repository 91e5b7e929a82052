"""Reads of the audits app, scoped to the teams where the user is an auditor or an admin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from audits.models import AuditEvent, Report
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import teams_of

AUDIT_ROLES = (Role.AUDITOR, Role.ADMIN)


def audited_teams(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams whose reports and audit log ``user`` may read."""
    return teams_of(user, *AUDIT_ROLES)


def reports_of(user: User | AnonymousUser) -> QuerySet[Report]:
    return (
        Report.objects.visible_to(user, *AUDIT_ROLES)
        .select_related("team", "requested_by")
        .order_by("-requested_at", "-id")
    )


def filtered_events(
    events: QuerySet[AuditEvent], filters: Mapping[str, Any]
) -> QuerySet[AuditEvent]:
    """``events`` narrowed by the cleaned :class:`~audits.forms.LogFilterForm` ``filters``."""
    if filters.get("actor"):
        events = events.filter(actor_username=filters["actor"])
    action = filters.get("action")
    if action:
        events = (
            events.filter(action__startswith=action)
            if action.endswith(".")
            else events.filter(action=action)
        )
    subject = filters.get("object")
    if subject:
        kind, _, subject_id = subject.partition(":")
        events = events.filter(subject_type=kind)
        if subject_id:
            events = events.filter(subject_id=subject_id)
    if filters.get("since") is not None:
        events = events.filter(at__gte=filters["since"])
    if filters.get("until") is not None:
        events = events.filter(at__lt=filters["until"])
    return events


def events_of(user: User | AnonymousUser) -> QuerySet[AuditEvent]:
    """The audit events of ``user``'s audited teams, and those of no team (refused changes,
    personal API tokens) by members of those teams; oldest first."""
    return AuditEvent.objects.visible_to(user, *AUDIT_ROLES).order_by("at", "id")
