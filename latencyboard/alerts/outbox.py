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
from django.db import transaction
from django.urls import reverse

from latencyboard.alerts.backoff import Schedule, next_delay
from latencyboard.alerts.evidence import change_words
from latencyboard.alerts.links import absolute, alert_links
from latencyboard.alerts.models import AlertEvent, AlertStatus, Delivery, DeliveryStatus
from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.message import channel_test_notice
from latencyboard.notifications.notice import Action, Attempt, Notice, Severity, Verdict

logger = logging.getLogger(__name__)

Deliver = Callable[[str, str, str, Notice, float], Attempt]

ACTIONS = {
    AlertStatus.FIRING: Action.TRIGGER,
    AlertStatus.ACKNOWLEDGED: Action.ACKNOWLEDGE,
    AlertStatus.RESOLVED: Action.RESOLVE,
}
DUE = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)


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
    """Send up to ``limit`` due deliveries, one transaction each (its row locked, so no two
    workers send it) through ``send`` (the notifications transport; the retry-schedule
    tests script it); returns how many were attempted. With ``seconds``, no delivery is
    started after that long: the rest wait for the next run, and the task's time limit holds
    however slowly receivers answer."""
    schedule = schedule or Schedule(max_attempts=settings.ALERT_DELIVERY_MAX_ATTEMPTS)
    stop_at = None if seconds is None else time.monotonic() + seconds
    attempted = 0
    while attempted < limit and (stop_at is None or time.monotonic() < stop_at):
        with transaction.atomic():
            delivery = (
                Delivery.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related(
                    "channel__team",
                    "event__who",
                    "event__alert__rule",
                    "event__alert__incident",
                    "event__alert__pipeline__team",
                )
                .select_related("event__alert__stage")
                .filter(status__in=DUE, next_attempt_at__lte=now())
                .order_by("next_attempt_at", "pk")
                .first()
            )
            if delivery is None:
                break
            _attempt(delivery, send, schedule, now)
        attempted += 1
    return attempted


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
    delivery.attempts += 1
    delivery.last_status_code = attempt.status_code
    delivery.detail = attempt.detail[:500]
    delivery.updated_at = now()
    if attempt.verdict is Verdict.DELIVERED:
        delivery.status = DeliveryStatus.DELIVERED
    elif attempt.verdict is Verdict.FAILED:
        delivery.status = DeliveryStatus.FAILED
    else:
        delay = next_delay(delivery.attempts, attempt.retry_after_s, schedule)
        if delay is None:
            delivery.status = DeliveryStatus.FAILED
            delivery.detail = f"gave up after {delivery.attempts} attempts: {attempt.detail}"[:500]
        else:
            delivery.status = DeliveryStatus.RETRYING
            delivery.next_attempt_at = delivery.updated_at + dt.timedelta(seconds=delay)
    delivery.save()
    logger.info(
        "alerts.delivery",
        extra={
            "delivery_id": delivery.pk,
            "channel_kind": channel.kind,
            "status": delivery.status,
            "attempts": delivery.attempts,
            "status_code": attempt.status_code,
        },
    )
