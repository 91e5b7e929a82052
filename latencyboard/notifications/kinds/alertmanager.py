"""The Prometheus Alertmanager webhook format (``version: "4"``), one alert per notice.

Receivers written for Alertmanager (ticket bridges, chat relays, custom routers) accept it
as it is. Alertmanager has no acknowledge: an acknowledged alert stays ``firing`` with an
``acknowledged_by`` annotation. A firing alert's ``endsAt`` is Go's zero time, as
Alertmanager itself sends it; a "send test" is a firing alert labelled ``test="true"``.
The target is the receiver's URL; the secret, optional, is sent as ``Authorization: Bearer``.
"""

from __future__ import annotations

import datetime as dt
import hashlib

from latencyboard.notifications.kind import HttpKind
from latencyboard.notifications.message import (
    HttpMessage,
    is_test,
    json_message,
    marked_title,
    rfc3339,
)
from latencyboard.notifications.notice import Action, Notice

VERSION = "4"
RECEIVER = "latencyboard"
ALERT_NAME = "LatencyboardAlert"
ZERO_TIME = "0001-01-01T00:00:00Z"


def fingerprint(notice: Notice) -> str:
    """16 hex digits stable for the alert, like Alertmanager's own label fingerprints."""
    return hashlib.sha256(notice.dedup_key.encode()).hexdigest()[:16]


def alert_labels(notice: Notice) -> dict[str, str]:
    found = {
        "alertname": ALERT_NAME,
        "severity": str(notice.severity),
        "team": notice.team,
        "pipeline": notice.pipeline,
        "stage": notice.stage,
        "dedup_key": notice.dedup_key,
    }
    if is_test(notice):
        found["test"] = "true"
    return {name: value for name, value in found.items() if value}


def alert_annotations(notice: Notice) -> dict[str, str]:
    found = {"summary": marked_title(notice), "description": notice.summary}
    found.update(notice.figures)
    found.update((name, f"{value:g}") for name, value in notice.numbers if value is not None)
    found.update((f"{name}_url", href) for name, href in notice.links)
    if notice.action is Action.ACKNOWLEDGE:
        found["acknowledged_by"] = notice.actor or "latencyboard"
    elif notice.actor:
        found["actor"] = notice.actor
    return found


def document(notice: Notice) -> dict[str, object]:
    status = "resolved" if notice.action is Action.RESOLVE else "firing"
    labels = alert_labels(notice)
    annotations = alert_annotations(notice)
    alert = {
        "status": status,
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339(notice.started_at or notice.at),
        "endsAt": rfc3339(notice.at) if status == "resolved" else ZERO_TIME,
        "generatorURL": notice.url,
        "fingerprint": fingerprint(notice),
    }
    return {
        "version": VERSION,
        "groupKey": f'{{}}:{{dedup_key="{notice.dedup_key}"}}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": RECEIVER,
        "groupLabels": {"dedup_key": notice.dedup_key},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": notice.url,
        "alerts": [alert],
    }


def render(notice: Notice, bearer_token: str = "") -> HttpMessage:
    headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
    return json_message(document(notice), headers)


class Alertmanager(HttpKind):
    name = "alertmanager"
    label = "Alertmanager"
    asks_for = "bearer token (optional)"

    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        return render(notice, secret)


KIND = Alertmanager()
