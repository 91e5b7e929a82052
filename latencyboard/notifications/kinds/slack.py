"""A Slack incoming-webhook message: Block Kit, with a plain ``text`` fallback.

The target is the incoming-webhook URL, itself a credential: shown masked even to the team's
admins, wherever it is kept. No secret.

Slack shows ``text`` in notifications and where blocks cannot render. Limits from Slack's
Block Kit reference: header text ≤ 150 characters, section text ≤ 3000, at most 10 section
fields of ≤ 2000 each; user text in mrkdwn escapes ``&``, ``<`` and ``>``.
"""

from __future__ import annotations

import datetime as dt

from latencyboard.notifications.kind import HttpKind
from latencyboard.notifications.message import (
    TEST_MARK,
    HttpMessage,
    is_test,
    json_message,
    truncate,
    where,
)
from latencyboard.notifications.notice import Action, Notice
from latencyboard.notifications.targets import url_host

WEBHOOK_HOST = "hooks.slack.com"
HEADER_LIMIT = 150
SECTION_TEXT_LIMIT = 3000
FIELD_LIMIT = 2000
MAX_FIELDS = 10

VERB = {
    Action.TRIGGER: "Firing",
    Action.ACKNOWLEDGE: "Acknowledged",
    Action.RESOLVE: "Resolved",
    Action.TEST: TEST_MARK,
}


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _field(label: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": truncate(f"*{escape(label)}*\n{escape(value)}", FIELD_LIMIT)}


def _fields(notice: Notice) -> list[dict[str, str]]:
    fields = []
    if notice.pipeline:
        fields.append(_field("Pipeline", notice.pipeline))
        fields.append(_field("Stage", notice.stage or "end to end"))
    fields.extend(_field(label, value) for label, value in notice.figures)
    return fields[:MAX_FIELDS]


def _context(notice: Notice) -> str:
    at = notice.at.strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [f"{VERB[notice.action]} {at}", f"severity {notice.severity}", f"team {notice.team}"]
    if notice.actor:
        parts.append(f"by {notice.actor}")
    return escape(" · ".join(parts))


def headline(notice: Notice) -> str:
    """ "Firing: model_forward p99 +35%", or "[TEST] …" for a "send test"."""
    if is_test(notice):
        return f"{TEST_MARK} {notice.title}"
    return f"{VERB[notice.action]}: {notice.title}"


def fallback_text(notice: Notice) -> str:
    head = headline(notice)
    if notice.pipeline:
        head += f" ({where(notice)})"
    text = f"{head}. {notice.summary}"
    return f"{text} {notice.url}" if notice.url else text


LINK_TEXT = {"pipeline": "Pipeline", "traces": "Exemplar traces"}


def _button(text: str, url: str, action_id: str) -> dict[str, object]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "url": url,
        "action_id": action_id,
    }


def document(notice: Notice) -> dict[str, object]:
    section: dict[str, object] = {
        "type": "section",
        "text": {"type": "mrkdwn", "text": truncate(escape(notice.summary), SECTION_TEXT_LIMIT)},
    }
    fields = _fields(notice)
    if fields:
        section["fields"] = fields
    blocks: list[dict[str, object]] = [
        {
            "type": "header",
            "text": {"type": "plain_text", "text": truncate(headline(notice), HEADER_LIMIT)},
        },
        section,
    ]
    buttons = [_button("Open alert", notice.url, "open_alert")] if notice.url else []
    buttons += [
        _button(LINK_TEXT.get(name, name), href, f"open_{name}") for name, href in notice.links
    ]
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": _context(notice)}]})
    return {"text": escape(fallback_text(notice)), "blocks": blocks}


def render(notice: Notice) -> HttpMessage:
    return json_message(document(notice))


class Slack(HttpKind):
    name = "slack"
    label = "Slack"
    target_is_secret = True

    def holds_own_credential(self, target: str) -> bool:
        """A Slack incoming-webhook URL, whose path is its credential."""
        return url_host(target) == WEBHOOK_HOST

    def render(self, notice: Notice, secret: str, now: dt.datetime) -> HttpMessage:
        return render(notice)


KIND = Slack()
