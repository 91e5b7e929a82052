"""An alert e-mail: subject, plain text and a simple HTML alternative (pure formatting; the
sending is Django's, in :mod:`.delivery`)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from latencyboard.notifications.message import is_test, marked_title, where
from latencyboard.notifications.notice import Action, Notice

VERB = {
    Action.TRIGGER: "Firing",
    Action.ACKNOWLEDGE: "Acknowledged",
    Action.RESOLVE: "Resolved",
    Action.TEST: "Test",
}
SUBJECT_LIMIT = 200


@dataclass(frozen=True, slots=True)
class Mail:
    subject: str
    text: str
    html: str


def subject(notice: Notice) -> str:
    head = marked_title(notice) if is_test(notice) else f"[{VERB[notice.action]}] {notice.title}"
    if notice.pipeline:
        head += f" ({where(notice)})"
    # A header line: no line breaks, whatever a title holds.
    return " ".join(head.split())[:SUBJECT_LIMIT]


def _facts(notice: Notice) -> list[tuple[str, str]]:
    facts = []
    if notice.pipeline:
        facts += [("Pipeline", notice.pipeline), ("Stage", notice.stage or "end to end")]
    facts += list(notice.figures)
    facts += [("Severity", str(notice.severity)), ("Team", notice.team)]
    facts.append(("When", notice.at.strftime("%Y-%m-%d %H:%M:%S UTC")))
    if notice.actor:
        facts.append(("By", notice.actor))
    return facts


def render(notice: Notice) -> Mail:
    facts = _facts(notice)
    text_lines = [notice.summary, ""]
    text_lines += [f"{label}: {value}" for label, value in facts]
    if notice.url:
        text_lines += ["", f"Open the alert: {notice.url}"]
    if is_test(notice):
        text_lines += ["", "This is a test sent from the channel page; no alert is behind it."]
    rows = "".join(
        f"<tr><th align=left>{escape(label)}</th><td>{escape(value)}</td></tr>"
        for label, value in facts
    )
    link = f'<p><a href="{escape(notice.url)}">Open the alert</a></p>' if notice.url else ""
    html = (
        f"<h2>{escape(subject(notice))}</h2><p>{escape(notice.summary)}</p>"
        f"<table>{rows}</table>{link}"
    )
    return Mail(subject=subject(notice), text="\n".join(text_lines) + "\n", html=html)
