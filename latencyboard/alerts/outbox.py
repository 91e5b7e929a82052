"""Sending the outbox: each due delivery handed to the channel's transport, its attempt
recorded, and a retry scheduled (with backoff, later when the receiver says Retry-After) or
the delivery given up (a permanent failure, or too many attempts)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Case, Count, F, Value, When
from django.urls import reverse

from latencyboard.alerts.backoff import Schedule, next_delay
from latencyboard.alerts.links import absolute, alert_links
from latencyboard.alerts.models import AlertEvent, AlertStatus, Delivery, DeliveryStatus
from latencyboard.alerts.services import SEND_DELIVERIES_TASK
from latencyboard.detectors.evidence import change_words
from latencyboard.fairness.delivery_slots import Head, Urgency, next_delivery
from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.message import channel_test_notice
from latencyboard.notifications.notice import Action, Attempt, Notice, Severity, Verdict
from latencyboard.storage import locks

logger = logging.getLogger(__name__)

Deliver = Callable[[str, str, str, Notice, float], Attempt]

ACTIONS = {
    AlertStatus.FIRING: Action.TRIGGER,
    AlertStatus.ACKNOWLEDGED: Action.ACKNOWLEDGE,
    AlertStatus.RESOLVED: Action.RESOLVE,
}
# A delivery still "sending" past its claim lost its worker: it is due again.
CLAIMABLE = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING, DeliveryStatus.SENDING)


def _text(value: Any) -> str:
    return "-" if value is None else f"{value:.1f} ms" if isinstance(value, float) else str(value)


def figures(evidence: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """An alert's evidence as label → text for receivers."""
    found = evidence.get("regression")
    rows: list[tuple[str, str]] = []
    if found:
        q = found["quantile"]
        rows += [
            (f"baseline {q}", _text(found["baseline"]["estimate"])),
            (f"current {q}", _text(found["current"]["estimate"])),
            ("change", f"{change_words(found)}, {change_words(found, ' ms')}"),
            ("window", f"{found['k']} of {found['n']} above the baseline {q}"),
            ("p-value", f"{found['p_value']:.2g}"),
        ]
        if found.get("grew_most"):
            rows.append(("grew most", found["grew_most"]))
        mix = found.get("mix")
        rows.append(
            (f"mix by {mix['attribute']}", mix["message"]) if mix else ("mix", "not assessed")
        )
    burn = evidence.get("burn_rate")
    if burn:
        for condition in burn["conditions"]:
            if condition["firing"]:
                rows.append(
                    (
                        f"burn rate over {condition['long_minutes']} min",
                        f"{condition['long_burn_rate']:.1f}x (≥ {condition['factor']:g}x)",
                    )
                )
    return tuple(rows)


def numbers(evidence: dict[str, Any]) -> tuple[tuple[str, float | int | None], ...]:
    """An alert's regression evidence as numbers receivers can route on (none for a
    burn-rate alert: its figures say it)."""
    found = evidence.get("regression")
    if not found:
        return ()
    # Evidence stored before it held the change's interval has none: its bounds are null.
    interval = found.get("change_interval") or {}
    return (
        ("baseline_ms", found["baseline"]["estimate"]),
        ("current_ms", found["current"]["estimate"]),
        ("effect_pct", found["effect_percent"]),
        ("effect_pct_low", interval.get("low_percent")),
        ("effect_pct_high", interval.get("high_percent")),
        ("p_value", found["p_value"]),
        ("n", found["n"]),
        ("k", found["k"]),
    )


def notice_of(delivery: Delivery) -> Notice:
    """What the receivers are told: one transition, or a channel's "send test"."""
    if delivery.event is None:
        settings_page = absolute(reverse("alerts:settings"))
        return channel_test_notice(delivery.channel.team.name, settings_page, delivery.queued_at)
    return event_notice(delivery.event)


def event_notice(event: AlertEvent) -> Notice:
    """What the receivers are told of one transition: its alert's incident, under the
    incident's key and title."""
    alert = event.alert
    incident = alert.incident
    path = reverse("alerts:detail", kwargs={"alert_id": alert.pk})
    return Notice(
        dedup_key=incident.dedup_key,
        action=ACTIONS[AlertStatus(event.to_status)],
        severity=Severity(alert.severity),
        team=alert.pipeline.team.name,
        pipeline=str(alert.pipeline),
        stage=alert.stage_name,
        title=incident.title,
        summary=event.note or alert.summary,
        url=absolute(path),
        at=event.at,
        figures=figures(alert.evidence),
        actor=event.who.get_username() if event.who else "",
        started_at=incident.opened_at,
        numbers=numbers(alert.evidence),
        links=tuple((name, absolute(href)) for name, href in alert_links(alert).items()),
    )


def send_due(
    now: Callable[[], dt.datetime],
    send: Deliver = deliver,
    schedule: Schedule | None = None,
    limit: int = 100,
    seconds: float | None = None,
) -> int:
    """Send up to ``limit`` due deliveries through ``send`` (the notifications transport; the
    retry-schedule tests script it), one at a time, each claimed first so no other worker
    sends it (see :func:`claim`); returns how many were attempted. With ``seconds``, no
    delivery is started after that long: the rest wait for the next run, and the task's time
    limit holds however slowly receivers answer."""
    schedule = schedule or Schedule(max_attempts=settings.ALERT_DELIVERY_MAX_ATTEMPTS)
    stop_at = None if seconds is None else time.monotonic() + seconds
    attempted = 0
    while attempted < limit and (stop_at is None or time.monotonic() < stop_at):
        claimed = claim(now())
        if claimed is None:
            break
        delivery = Delivery.objects.select_related(
            "channel__team",
            "event__who",
            "event__alert__rule",
            "event__alert__incident",
            "event__alert__pipeline__team",
            "event__alert__stage",
        ).get(pk=claimed)
        _attempt(delivery, send, schedule, now)
        attempted += 1
    return attempted


_URGENCY = Case(
    When(attempts=0, event__to_status=AlertStatus.FIRING, then=Value(Urgency.PAGE)),
    When(attempts=0, event__isnull=False, then=Value(Urgency.NOTICE)),
    default=Value(Urgency.LATER),
)


def claim(now: dt.datetime) -> int | None:
    """Claim the delivery to send next (by
    :func:`latencyboard.fairness.delivery_slots.next_delivery` over the
    ``NOTIFICATION_SLOTS``) and return its id, or None while none may start.

    The claim marks it ``sending`` until the send task's hard time limit from now, when its
    worker is surely gone: a worker killed mid-attempt leaves it due again then, never lost.
    Claims take turns on an advisory lock, so the deliveries in flight they count are the
    ones there are."""
    lease = dt.timedelta(seconds=settings.TASK_TIME_LIMITS[SEND_DELIVERIES_TASK].hard)
    with transaction.atomic():
        with connection.cursor() as cursor:
            locks.hold(cursor, locks.OUTBOX_CLAIMS)
        in_flight = Delivery.objects.filter(status=DeliveryStatus.SENDING, next_attempt_at__gt=now)
        held = dict(
            in_flight.order_by()
            .values("channel__team")
            .annotate(n=Count("pk"))
            .values_list("channel__team", "n")
        )
        heads = [
            Head(team_id, Urgency(urgency), due_at, pk)
            for team_id, urgency, due_at, pk in Delivery.objects.filter(
                status__in=CLAIMABLE, next_attempt_at__lte=now
            )
            .annotate(urgency=_URGENCY)
            .order_by("channel__team", "urgency", "next_attempt_at", "pk")
            .distinct("channel__team")
            .values_list("channel__team", "urgency", "next_attempt_at", "pk")
        ]
        chosen = next_delivery(heads, held, settings.NOTIFICATION_SLOTS)
        if chosen is None:
            return None
        claimed = Delivery.objects.filter(
            pk=chosen.delivery_id, status__in=CLAIMABLE, next_attempt_at__lte=now
        ).update(
            status=DeliveryStatus.SENDING,
            attempts=F("attempts") + 1,
            next_attempt_at=now + lease,
            updated_at=now,
        )
    return chosen.delivery_id if claimed else None


def _attempt(
    delivery: Delivery, send: Deliver, schedule: Schedule, now: Callable[[], dt.datetime]
) -> None:
    channel = delivery.channel
    if channel.enabled:
        attempt = send(
            channel.kind,
            channel.target,
            channel.secret,
            notice_of(delivery),
            settings.ALERT_DELIVERY_TIMEOUT_SECONDS,
        )
    else:
        attempt = Attempt(Verdict.FAILED, None, "channel disabled")
    at = now()
    status, detail, next_attempt_at = DeliveryStatus.FAILED, attempt.detail, at
    if attempt.verdict is Verdict.DELIVERED:
        status = DeliveryStatus.DELIVERED
    elif attempt.verdict is Verdict.RETRY:
        delay = next_delay(delivery.attempts, attempt.retry_after_s, schedule)
        if delay is None:
            detail = f"gave up after {delivery.attempts} attempts: {attempt.detail}"
        else:
            status = DeliveryStatus.RETRYING
            next_attempt_at = at + dt.timedelta(seconds=delay)
    # Guarded by the claim: a worker whose claim lapsed (and was taken again) records nothing.
    recorded = Delivery.objects.filter(
        pk=delivery.pk, status=DeliveryStatus.SENDING, next_attempt_at=delivery.next_attempt_at
    ).update(
        status=status,
        last_status_code=attempt.status_code,
        detail=detail[:500],
        updated_at=at,
        next_attempt_at=next_attempt_at,
    )
    logger.info(
        "alerts.delivery",
        extra={
            "delivery_id": delivery.pk,
            "team_id": channel.team_id,
            "channel_kind": channel.kind,
            "status": status,
            "attempts": delivery.attempts,
            "status_code": attempt.status_code,
            "recorded": bool(recorded),
        },
    )
