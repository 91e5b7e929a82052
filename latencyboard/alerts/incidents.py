"""Incidents: the alerts of one pipeline that overlap in time, told to receivers as one.

An alert that fires while its pipeline has an open incident joins it; otherwise it opens one.
The incident resolves when its last open alert does. Lock order, everywhere: alert rows
first, then the incident's row, so that evaluators and people acting never deadlock.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from latencyboard.alerts.models import OPEN_STATUSES, Alert, AlertStatus, Channel, Incident
from latencyboard.live.groups import team_group
from latencyboard.live.services import publish
from latencyboard.pipelines.mapping import END_TO_END


@dataclass(frozen=True)
class Member:
    """What titling an incident reads of one of its alerts."""

    stage: str
    summary: str
    effect_ms: float | None


def title_of(members: Iterable[Member]) -> str:
    """The summary of the member whose stage grew most (ms at its strongest quantile); end to
    end only when no stage of its own fired, since it contains every stage's growth."""
    ranked = sorted(
        members,
        key=lambda m: (m.stage != END_TO_END, m.effect_ms is not None, m.effect_ms or 0.0),
    )
    return ranked[-1].summary if ranked else ""


def _member(alert: Alert) -> Member:
    found = alert.evidence.get("regression") or {}
    return Member(alert.stage_name, alert.summary, found.get("effect_ms"))


def open_for(pipeline_id: int, summary: str, now: dt.datetime) -> tuple[Incident, bool]:
    """The pipeline's open incident, locked, or a new one (``True``). Call in a transaction."""
    found = (
        Incident.objects.select_for_update()
        .filter(pipeline=pipeline_id, status__in=OPEN_STATUSES)
        .first()
    )
    if found is not None:
        return found, False
    try:
        with transaction.atomic():
            created = Incident.objects.create(
                pipeline_id=pipeline_id,
                status=AlertStatus.FIRING,
                title=summary[:500],
                opened_at=now,
            )
    except IntegrityError:
        # Another rule's evaluator opened it in the meantime: join that one.
        return (
            Incident.objects.select_for_update().get(
                pipeline=pipeline_id, status__in=OPEN_STATUSES
            ),
            False,
        )
    return created, True


def retitle(incident: Incident) -> None:
    """Name the incident after the member stage that grew most."""
    title = title_of(_member(alert) for alert in incident.alerts.select_related("stage"))[:500]
    if title and title != incident.title:
        incident.title = title
        Incident.objects.filter(pk=incident.pk).update(title=title)


def settle(incident_id: int, now: dt.datetime) -> bool:
    """Resolve the incident when none of its alerts is open any more; ``True`` when this call
    resolved it. Call in the transaction that resolved one of its alerts."""
    incident = Incident.objects.select_for_update().get(pk=incident_id)
    if (
        incident.status not in OPEN_STATUSES
        or incident.alerts.filter(status__in=OPEN_STATUSES).exists()
    ):
        return False
    Incident.objects.filter(pk=incident_id).update(status=AlertStatus.RESOLVED, resolved_at=now)
    return True


def acknowledge(incident_id: int) -> bool:
    """Firing → acknowledged; ``True`` when this call changed it."""
    changed = Incident.objects.filter(pk=incident_id, status=AlertStatus.FIRING).update(
        status=AlertStatus.ACKNOWLEDGED
    )
    return bool(changed)


def told_channels(incident_id: int) -> QuerySet[Channel]:
    """The enabled channels that were sent (or are sending) one of the incident's triggers:
    its acknowledge and resolve go to them, and only to them."""
    return Channel.objects.filter(
        enabled=True, deliveries__event__alert__incident=incident_id
    ).distinct()


def announce(incident_id: int) -> None:
    """After commit, tell the on-call pages of the incident's team that it changed."""
    incident = Incident.objects.select_related("pipeline").get(pk=incident_id)
    event: dict[str, Any] = {
        "type": "incident",
        "incident": incident.pk,
        "pipeline": incident.pipeline_id,
        "state": incident.status,
    }
    group = team_group(incident.pipeline.team_id)
    transaction.on_commit(lambda: publish(group, event))
