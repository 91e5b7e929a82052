"""Reads of incidents, alerts, rules and channels, scoped to the user's teams (others do not
exist)."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Prefetch, QuerySet

from latencyboard.alerts.models import OPEN_STATUSES, Alert, Channel, Delivery, Incident, Rule
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Role, Team
from latencyboard.teams.queries import teams_of

RECENT = dt.timedelta(days=7)


def pipelines_of(user: User | AnonymousUser) -> QuerySet[Pipeline]:
    return Pipeline.objects.visible_to(user)


def alerts_of(user: User | AnonymousUser) -> QuerySet[Alert]:
    return Alert.objects.filter(pipeline__in=pipelines_of(user)).select_related(
        "rule", "pipeline__team", "stage"
    )


def incidents_of(user: User | AnonymousUser) -> QuerySet[Incident]:
    return Incident.objects.filter(pipeline__in=pipelines_of(user)).select_related("pipeline__team")


def open_incidents(user: User | AnonymousUser) -> QuerySet[Incident]:
    """Firing or acknowledged, with their member alerts (newest first)."""
    return incidents_of(user).filter(status__in=OPEN_STATUSES).prefetch_related(_members())


def recent_incidents(user: User | AnonymousUser, now: dt.datetime) -> QuerySet[Incident]:
    """Resolved ones opened in the last week, newest first."""
    return (
        incidents_of(user)
        .exclude(status__in=OPEN_STATUSES)
        .filter(opened_at__gte=now - RECENT)
        .prefetch_related(_members())
    )


def _members() -> Prefetch[str, QuerySet[Alert], str]:
    return Prefetch(
        "alerts",
        Alert.objects.select_related("rule", "stage", "pipeline"),
        to_attr="members",
    )


def open_alerts(user: User | AnonymousUser) -> QuerySet[Alert]:
    return alerts_of(user).filter(status__in=OPEN_STATUSES)


def rules_of(user: User | AnonymousUser) -> QuerySet[Rule]:
    return (
        Rule.objects.filter(pipeline__in=pipelines_of(user))
        .select_related("pipeline__team")
        .prefetch_related("stages", "channels")
    )


def channels_of(user: User | AnonymousUser) -> QuerySet[Channel]:
    return Channel.objects.visible_to(user).select_related("team")


def deliveries_of(user: User | AnonymousUser) -> QuerySet[Delivery]:
    """The delivery log of the user's teams' channels (alert notifications and tests),
    newest first."""
    return (
        Delivery.objects.filter(channel__in=Channel.objects.visible_to(user))
        .select_related("channel", "event__alert", "requested_by")
        .order_by("-queued_at", "-id")
    )


def admin_teams(user: User | AnonymousUser) -> QuerySet[Team]:
    """The teams whose rules and channels ``user`` may change."""
    return teams_of(user, Role.ADMIN)
