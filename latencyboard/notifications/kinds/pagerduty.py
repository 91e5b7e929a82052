"""A PagerDuty Events API v2 event: trigger, acknowledge or resolve one incident.

Every event of an alert carries its stable ``dedup_key``, so PagerDuty folds them into one
incident. Field limits from the Events API v2 reference: ``summary`` ≤ 1024 characters,
``dedup_key`` ≤ 255; acknowledge and resolve need only the routing key, action and dedup key.
A "send test" is a trigger of severity ``info`` under its own dedup key, marked [TEST].
The target is the enqueue URL, the secret the integration's routing key.
"""

from __future__ import annotations

import datetime as dt

from latencyboard.notifications.kind import HttpKind
from latencyboard.notifications.message import (
    HttpMessage,
    is_test,
    json_message,
    marked_title,
    rfc3339,
    truncate,
    where,
)
from latencyboard.notifications.notice import Action, Attempt, Notice, Severity, Verdict

DEFAULT_URL = "https://events.pagerduty.com/v2/enqueue"
SUMMARY_LIMIT = 1024
DEDUP_KEY_LIMIT = 255
SOURCE = "latencyboard"

LINK_TEXT = {"pipeline": "The pipeline around the alert", "traces": "Exemplar traces"}

SEVERITY = {Severity.PAGE: "critical", Severity.TICKET: "warning"}
EVENT_ACTION = {
    Action.TRIGGER: "trigger",
    Action.ACKNOWLEDGE: "acknowledge",
    Action.RESOLVE: "resolve",
    Action.TEST: "trigger",
}


def summary(notice: Notice) -> str:
    text = marked_title(notice)
    if notice.pipeline:
        text += f" ({where(notice)})"
    return truncate(f"{text}: {notice.summary}", SUMMARY_LIMIT)


def document(notice: Notice, routing_key: str) -> dict[str, object]:
    dedup_key = f"test:{notice.dedup_key}" if is_test(notice) else notice.dedup_key
    event: dict[str, object] = {
        "routing_key": routing_key,
        "event_action": EVENT_ACTION[notice.action],
        "dedup_key": truncate(dedup_key, DEDUP_KEY_LIMIT),
    }
    if notice.action in (Action.ACKNOWLEDGE, Action.RESOLVE):
        return event
    payload: dict[str, object] = {
        "summary": summary(notice),
        "source": notice.pipeline or SOURCE,
        "severity": "info" if is_test(notice) else SEVERITY[notice.severity],
        "timestamp": rfc3339(notice.at),
        "group": notice.team,
        "custom_details": {**dict(notice.figures), **dict(notice.numbers)},
    }
    if notice.stage:
        payload["component"] = notice.stage
    event["payload"] = payload
    event["client"] = SOURCE
    links = [{"href": href, "text": LINK_TEXT.get(name, name)} for name, href in notice.links]
    if notice.url:
        event["client_url"] = notice.url
        links.insert(0, {"href": notice.url, "text": "Open the alert in latencyboard"})
    if links:
        event["links"] = links
    return event


def render(notice: Notice, routing_key: str) -> HttpMessage:
    return json_message(document(notice, routing_key))


class PagerDuty(HttpKind):
    name = "pagerduty"
    label = "PagerDuty"
    asks_for = "integration routing key"

    def secret_problem(self, secret: str) -> str | None:
        return None if secret else "give the integration's routing key"

    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        return render(notice, secret)

    def send(
        self, target: str, secret: str, notice: Notice, timeout_s: float, now: dt.datetime
    ) -> Attempt:
        if not secret:
            return Attempt(Verdict.FAILED, None, "no routing key: set the channel's secret")
        return super().send(target, secret, notice, timeout_s, now)


KIND = PagerDuty()
