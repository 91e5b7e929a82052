"""The alerts of a report's pipelines and their handling, read from the alerts' append-only
history (Django reads, returning the plain rows of ``handling``).

Read as of the report's ``requested_at``: alerts started later and transitions made later are
left out, so an alert still open then stays open in every rebuild, and a rule's name and
severity are the last the audit log recorded by then (its current ones when it recorded none).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.db.models import F

from audits.models import AuditEvent
from audits.reporting.handling import ACKNOWLEDGED, RESOLVED, HandledAlert, Transition, first_step
from audits.reporting.periods import Period
from latencyboard.alerts.models import Alert, AlertEvent, Rule

_RULE_FIELDS = ("name", "severity")


def _rules_as_of(team_id: int, alerts: Sequence[Alert], at: dt.datetime) -> None:
    """Set the alerts' rules' names and severities (in memory, never saved) to the last values
    recorded in the audit log by ``at``: editing a rule later must not rewrite the report."""
    by_id: dict[str, list[Rule]] = {}
    for alert in alerts:
        by_id.setdefault(str(alert.rule_id), []).append(alert.rule)
    recorded = AuditEvent.objects.filter(
        team_id=team_id,
        subject_type="alert_rule",
        subject_id__in=list(by_id),
        action__in=["alert_rule.created", "alert_rule.changed"],
        at__lte=at,
    ).order_by("at", "id")
    for event in recorded:
        for field in _RULE_FIELDS:
            if field in event.detail:
                for rule in by_id[event.subject_id]:
                    setattr(rule, field, event.detail[field])


def collect(
    team_id: int, pipeline_ids: Sequence[int], quarter: Period, at: dt.datetime
) -> tuple[HandledAlert, ...]:
    """Every alert of ``team_id``'s ``pipeline_ids`` that started in ``quarter`` by ``at``,
    oldest first."""
    alerts = list(
        Alert.objects.filter(
            pipeline__team_id=team_id,
            pipeline_id__in=pipeline_ids,
            started_at__gte=quarter.start,
            started_at__lt=quarter.end,
        )
        .filter(started_at__lte=at)
        .select_related("pipeline", "stage", "rule")
        .order_by("started_at", "id")
    )
    _rules_as_of(team_id, alerts, at)
    # A silence is noted in the history without changing the status: not a transition.
    events = (
        AlertEvent.objects.filter(alert__in=[a.pk for a in alerts], at__lte=at)
        .exclude(from_status=F("to_status"))
        .select_related("who")
        .order_by("at", "id")
    )
    history: dict[int, list[Transition]] = {}
    for event in events:
        who = None if event.who is None else event.who.get_username()
        history.setdefault(event.alert_id, []).append(Transition(event.to_status, event.at, who))
    return tuple(
        HandledAlert(
            alert.pk,
            alert.pipeline.service_name,
            alert.stage_name,
            alert.rule.name,
            alert.severity,
            alert.started_at,
            first_step(history.get(alert.pk, []), ACKNOWLEDGED),
            first_step(history.get(alert.pk, []), RESOLVED),
            alert.summary,
        )
        for alert in alerts
    )
