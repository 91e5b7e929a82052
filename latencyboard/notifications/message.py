"""What every kind of channel shares: one HTTP message to send, the words that mark a test."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import orjson

from latencyboard.notifications.notice import Action, Notice, Severity


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
