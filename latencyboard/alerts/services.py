"""Alert transitions and what people do to alerts: every change appended as an event and,
unless silenced, put in the outbox for the rule's channels."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from latencyboard.alerts import incidents
from latencyboard.alerts.models import (
    OPEN_STATUSES,
    Alert,
    AlertEvent,
    AlertStatus,
    Channel,
    Delivery,
    Rule,
    Silence,
)
from latencyboard.audit_trail import Subject, act
from latencyboard.celery import app
from latencyboard.detectors import lifecycle
from latencyboard.sla import queries as sla_queries
from latencyboard.teams.models import Role
from latencyboard.teams.queries import has_role

logger = logging.getLogger(__name__)

SEND_DELIVERIES_TASK = "alerts.send_deliveries"

RESPONDERS = (Role.ONCALL, Role.ADMIN)
ADMINS = (Role.ADMIN,)
SILENCE_REASON_MAX_LENGTH = 500


def dedup_key(rule: Rule, stage_id: int | None) -> str:
    """Stable for a (rule, pipeline, stage): every incident of it, on every receiver."""
    return f"latencyboard-rule{rule.pk}-pipeline{rule.pipeline_id}-stage{stage_id or 'e2e'}"


def suppressed_by(alert: Alert, now: dt.datetime) -> str | None:
    """Why notifications of ``alert`` are held back now (a silence or an SLA maintenance
    window of its pipeline), or ``None``."""
    silence = (
        Silence.objects.filter(until__gt=now)
        .filter(
            Q(rule=alert.rule_id)
            | Q(pipeline=alert.pipeline_id, stage__isnull=True)
            | Q(pipeline=alert.pipeline_id, stage=alert.stage_id)
        )
        .order_by("-until")
        .first()
    )
    if silence is not None:
        return f"silenced until {silence.until:%Y-%m-%d %H:%M} UTC: {silence.reason}"
    maintenance = sla_queries.maintenance_now(alert.pipeline_id, now)
    if maintenance is not None:
        return f"maintenance: {maintenance}"
    return None


def _send_deliveries() -> None:
    # Sent by name: the tasks module imports this one, never the other way round.
    app.send_task(SEND_DELIVERIES_TASK)


def _send_after_commit() -> None:
    # Robust: with Redis down the change stands and the enqueue is only logged; beat's
    # alerts.send-deliveries picks the deliveries up within seconds of Redis returning.
    transaction.on_commit(_send_deliveries, robust=True)


def send_test(channel: Channel, user: User | AnonymousUser, now: dt.datetime) -> Delivery:
    """Queue a "send test" of ``channel`` (team admins): it goes through the outbox like an
    alert's notification, so its outcome shows in the delivery log."""
    if not isinstance(user, User) or not has_role(user, channel.team, *ADMINS):
        raise PermissionDenied("Only team admins test channels.")
    with transaction.atomic():
        delivery = Delivery.objects.create(
            channel=channel, requested_by=user, queued_at=now, next_attempt_at=now, updated_at=now
        )
        _send_after_commit()
    logger.info("alerts.channel_test", extra={"channel_id": channel.pk, "user_id": user.pk})
    return delivery


def record_event(
    alert: Alert,
    from_status: str,
    to_status: str,
    now: dt.datetime,
    who: User | None = None,
    note: str = "",
    evidence: dict[str, Any] | None = None,
    notify: bool = True,
) -> AlertEvent:
    """Append the transition and, when it changes what receivers know of the alert's
    incident (``notify``) and nothing silences it, queue it: a trigger for the rule's
    enabled channels not yet told of the incident, an acknowledge or resolve for those that
    were. Call inside the transaction that changed the alert: the outbox is sent after
    commit."""
    held = suppressed_by(alert, now) if notify else None
    if held:
        note = f"{note} (notifications held: {held})" if note else f"notifications held: {held}"
    event = AlertEvent.objects.create(
        alert=alert,
        from_status=from_status,
        to_status=to_status,
        who=who,
        at=now,
        note=note[:500],
        evidence=evidence or {},
    )
    if notify and held is None:
        told = incidents.told_channels(alert.incident_id)
        channels: QuerySet[Channel]
        if to_status == AlertStatus.FIRING:
            channels = alert.rule.channels.filter(enabled=True).exclude(pk__in=told)
        else:
            channels = told
        Delivery.objects.bulk_create(
            Delivery(
                event=event, channel=channel, queued_at=now, next_attempt_at=now, updated_at=now
            )
            for channel in list(channels)
        )
        _send_after_commit()
    logger.info(
        "alerts.transition",
        extra={"alert_id": alert.pk, "from": from_status, "to": to_status, "held": bool(held)},
    )
    return event


def advance(
    rule: Rule,
    stage_id: int | None,
    outcome: lifecycle.Outcome,
    evidence: dict[str, Any],
    summary: str,
    now: dt.datetime,
    clean_needed: int,
    current: dict[str, Any] | None = None,
) -> lifecycle.Transition | None:
    """Step the (rule, stage)'s alert by one evaluation: fire a new alert (opening or joining
    its pipeline's incident), resolve the open one after ``clean_needed`` clean evaluations
    (and its incident with its last open alert), or just count; an open alert keeps the
    evaluation's ``current`` figures. Call in a transaction that holds the rule's row lock
    (so one evaluator at a time steps its alerts)."""
    key = dedup_key(rule, stage_id)
    alert = (
        Alert.objects.select_for_update().filter(dedup_key=key, status__in=OPEN_STATUSES).first()
    )
    state = lifecycle.AlertState()
    if alert is not None:
        state = lifecycle.AlertState(lifecycle.Status(alert.status), alert.clean_streak)
    new, transition = lifecycle.step(state, outcome, clean_needed)
    if transition is lifecycle.Transition.FIRED:
        incident, opened = incidents.open_for(rule.pipeline_id, summary, now)
        alert = Alert.objects.create(
            rule=rule,
            pipeline_id=rule.pipeline_id,
            stage_id=stage_id,
            incident=incident,
            dedup_key=key,
            status=AlertStatus.FIRING,
            evidence=evidence,
            current=current or {},
            current_at=now if current else None,
            summary=summary[:500],
            started_at=now,
        )
        incidents.retitle(incident)
        note = summary if opened else f"{summary} (joins incident “{incident.title}”)"
        record_event(alert, "", AlertStatus.FIRING, now, note=note, evidence=evidence)
        incidents.announce(incident.pk)
    elif alert is not None and transition is lifecycle.Transition.RESOLVED:
        old = alert.status
        alert.status, alert.resolved_at, alert.clean_streak = AlertStatus.RESOLVED, now, 0
        alert.save(update_fields=["status", "resolved_at", "clean_streak"])
        closed = incidents.settle(alert.incident_id, now)
        note = f"{clean_needed} clean evaluations in a row"
        record_event(alert, old, AlertStatus.RESOLVED, now, note=note, notify=closed)
        incidents.announce(alert.incident_id)
    elif alert is not None:
        changes: dict[str, Any] = {"clean_streak": new.clean_streak}
        if current:
            changes.update(current=current, current_at=now)
        Alert.objects.filter(pk=alert.pk).update(**changes)
    return transition


def _require_responder(user: User | AnonymousUser, alert: Alert) -> User:
    if not isinstance(user, User) or not has_role(user, alert.pipeline.team, *RESPONDERS):
        raise PermissionDenied("Only on-call and admin members of the team act on its alerts.")
    return user


_UNRECORDED: Final = frozenset({"secret", "target"})
"""Settings kept out of the audit log: a channel's secret, and its target (a Slack webhook
URL is itself a credential)."""


def record_setting(
    request: HttpRequest,
    setting: Rule | Channel,
    verb: str,
    values: Mapping[str, Any],
    before: Mapping[str, Any] | None = None,
) -> None:
    """Put a rule's or channel's creation, change or deletion (``verb``) in the audit log,
    with the values it was given and, for a change, under ``before`` the old values of those
    that changed (``before``: :func:`setting_values` read before the change)."""
    if isinstance(setting, Rule):
        subject = Subject("alert_rule", setting.pk, setting.name, setting.pipeline.team_id)
    else:
        subject = Subject("alert_channel", setting.pk, setting.name, setting.team_id)
    detail = {name: _plain(value) for name, value in values.items() if name not in _UNRECORDED}
    if before is not None:
        old = {name: _plain(before[name]) for name in detail if name in before}
        detail["before"] = {name: value for name, value in old.items() if value != detail[name]}
    act(request, f"{subject.type}.{verb}", subject, detail)


def setting_values(setting: Rule | Channel, names: Iterable[str]) -> dict[str, Any]:
    """The current values of a rule's or channel's ``names`` (many-to-many ones as lists), to
    pass as ``before`` to :func:`record_setting`."""
    values: dict[str, Any] = {}
    for name in names:
        value: Any = getattr(setting, name, None)
        values[name] = list(value.all()) if hasattr(value, "all") else value
    return values


def _plain(value: Any) -> Any:
    """A form or serializer value as JSON: objects by their names, many of them sorted."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if isinstance(value, Iterable):
        return sorted(str(item) for item in value)
    return str(value)


def alert_subject(alert: Alert) -> Subject:
    return Subject(
        "alert", alert.pk, f"{alert.pipeline} {alert.stage_name}", alert.pipeline.team_id
    )


def acknowledge(
    alert: Alert,
    user: User | AnonymousUser,
    now: dt.datetime,
    request: HttpRequest | None = None,
    note: str = "",
) -> bool:
    """On-call took the alert's incident: its firing alerts become acknowledged, and
    receivers hear the incident acknowledged once. ``False`` when the alert was no longer
    firing. Recorded in the audit log with ``request``'s address and the ``note``."""
    who = _require_responder(user, alert)
    with transaction.atomic():
        members = list(
            Alert.objects.select_for_update(of=("self",))
            .filter(incident=alert.incident_id, status=AlertStatus.FIRING)
            .select_related("rule", "pipeline", "stage")
            .order_by("pk")
        )
        if alert.pk not in {member.pk for member in members}:
            return False
        Alert.objects.filter(pk__in=[member.pk for member in members]).update(
            status=AlertStatus.ACKNOWLEDGED
        )
        first = incidents.acknowledge(alert.incident_id)
        for member in members:
            member.status = AlertStatus.ACKNOWLEDGED
            told = first and member.pk == alert.pk
            record_event(
                member, AlertStatus.FIRING, AlertStatus.ACKNOWLEDGED, now, who, note, notify=told
            )
        alert.status = AlertStatus.ACKNOWLEDGED
        act(request, "alert.acknowledged", alert_subject(alert), {"note": note}, actor=who)
        incidents.announce(alert.incident_id)
    return True


def resolve(
    alert: Alert,
    user: User | AnonymousUser,
    now: dt.datetime,
    note: str = "",
    request: HttpRequest | None = None,
) -> bool:
    """Closed by hand (firing or acknowledged → resolved), and its incident with its last
    open alert. ``False`` when already resolved. Should the detector still see the
    regression, its next evaluation fires a new alert."""
    who = _require_responder(user, alert)
    with transaction.atomic():
        old = Alert.objects.select_for_update().get(pk=alert.pk).status
        if old not in OPEN_STATUSES:
            return False
        Alert.objects.filter(pk=alert.pk).update(
            status=AlertStatus.RESOLVED, resolved_at=now, clean_streak=0
        )
        alert.status, alert.resolved_at = AlertStatus.RESOLVED, now
        closed = incidents.settle(alert.incident_id, now)
        record_event(alert, old, AlertStatus.RESOLVED, now, who=who, note=note, notify=closed)
        act(request, "alert.resolved", alert_subject(alert), {"note": note}, actor=who)
        incidents.announce(alert.incident_id)
    return True


def silence(
    alert: Alert,
    user: User | AnonymousUser,
    until: dt.datetime,
    reason: str,
    now: dt.datetime,
    request: HttpRequest | None = None,
) -> Silence:
    """Hold back notifications of the alert's pipeline stage until ``until``; noted in the
    alert's history."""
    who = _require_responder(user, alert)
    with transaction.atomic():
        created = Silence.objects.create(
            pipeline_id=alert.pipeline_id,
            stage_id=alert.stage_id,
            until=until,
            reason=reason[:SILENCE_REASON_MAX_LENGTH],
            who=who,
            created_at=now,
        )
        AlertEvent.objects.create(
            alert=alert,
            from_status=alert.status,
            to_status=alert.status,
            who=who,
            at=now,
            note=f"silenced {alert.stage_name} until {until:%Y-%m-%d %H:%M} UTC: {reason}"[:500],
        )
        detail = {"until": until.isoformat(), "reason": created.reason}
        act(request, "alert.silenced", alert_subject(alert), detail, actor=who)
    return created
