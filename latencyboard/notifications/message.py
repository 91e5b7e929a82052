"""What every receiver kind shares: the kinds themselves and one HTTP message to send."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson

from latencyboard.notifications.notice import Action, Notice, Severity


class ChannelKind(StrEnum):
    """Where a channel sends its notices; ``target`` and ``secret`` mean per kind:

    - webhook: target = URL, secret = ``whsec_<base64>`` signing key (Standard Webhooks);
    - slack: target = the incoming-webhook URL (itself a secret: show it masked), no secret;
    - pagerduty: target = the Events API v2 enqueue URL, secret = the integration routing key;
    - alertmanager: target = URL, secret optional, sent as ``Authorization: Bearer``;
    - email: target = comma-separated recipients, no secret.
    """

    WEBHOOK = "webhook"
    SLACK = "slack"
    PAGERDUTY = "pagerduty"
    ALERTMANAGER = "alertmanager"
    EMAIL = "email"

    @property
    def label(self) -> str:
        """What a person picking a channel kind reads."""
        return KIND_LABELS[self]


KIND_LABELS = {
    ChannelKind.WEBHOOK: "Webhook (signed)",
    ChannelKind.SLACK: "Slack",
    ChannelKind.PAGERDUTY: "PagerDuty",
    ChannelKind.ALERTMANAGER: "Alertmanager",
    ChannelKind.EMAIL: "Email",
}


@dataclass(frozen=True, slots=True)
class HttpMessage:
    headers: dict[str, str]
    body: bytes


def json_message(document: Any, headers: dict[str, str] | None = None) -> HttpMessage:
    return HttpMessage(
        headers={"Content-Type": "application/json", **(headers or {})},
        body=orjson.dumps(document),
    )


def is_test(notice: Notice) -> bool:
    return notice.action is Action.TEST


TEST_MARK = "[TEST]"


def marked_title(notice: Notice) -> str:
    """The title, prefixed so that nobody mistakes a "send test" for a real incident."""
    return f"{TEST_MARK} {notice.title}" if is_test(notice) else notice.title


def where(notice: Notice) -> str:
    """ "fraud-scorer / model_forward", or the pipeline alone for an end-to-end alert."""
    return f"{notice.pipeline} / {notice.stage}" if notice.stage else notice.pipeline


def rfc3339(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def channel_test_notice(team: str, url: str, now: dt.datetime) -> Notice:
    """The notice behind a channel's "send test" button: no alert, plainly a test."""
    return Notice(
        dedup_key=f"latencyboard-test:{team}",
        action=Action.TEST,
        severity=Severity.TICKET,
        team=team,
        pipeline="",
        stage="",
        title="Test notification from latencyboard",
        summary="This channel works: alerts of this team will be delivered here.",
        url=url,
        at=now,
    )
