"""An alert e-mail: subject, plain text and a simple HTML alternative, sent through Django's
mail backend (``EMAIL_HOST``). The target is up to 50 comma-separated recipients; no secret.
"""

from __future__ import annotations

import datetime as dt
import smtplib
from dataclasses import dataclass
from html import escape

from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.core.validators import validate_email

from latencyboard.notifications.kind import ChannelKind
from latencyboard.notifications.message import is_test, marked_title, where
from latencyboard.notifications.notice import Action, Attempt, Notice, Verdict

VERB = {
    Action.TRIGGER: "Firing",
    Action.ACKNOWLEDGE: "Acknowledged",
    Action.RESOLVE: "Resolved",
    Action.TEST: "Test",
}
SUBJECT_LIMIT = 200
MAX_RECIPIENTS = 50


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


def recipients(target: str) -> list[str]:
    return [address.strip() for address in target.split(",") if address.strip()]


class Email(ChannelKind):
    name = "email"
    label = "Email"

    def target_problem(self, target: str) -> str | None:
        addresses = recipients(target)
        if not addresses:
            return "give at least one e-mail address"
        if len(addresses) > MAX_RECIPIENTS:
            return f"at most {MAX_RECIPIENTS} e-mail addresses"
        for address in addresses:
            try:
                validate_email(address)
            except ValidationError:
                return f"{address!r} is not an e-mail address"
        return None

    def members_target(self, target: str) -> str:
        return target

    def send(
        self, target: str, secret: str, notice: Notice, timeout_s: float, now: dt.datetime
    ) -> Attempt:
        to = recipients(target)
        rendered = render(notice)
        message = EmailMultiAlternatives(rendered.subject, rendered.text, to=to)
        message.attach_alternative(rendered.html, "text/html")
        try:
            message.send()
        except (smtplib.SMTPRecipientsRefused, smtplib.SMTPSenderRefused) as exc:
            return Attempt(Verdict.FAILED, None, f"the mail server refused: {exc}")
        except smtplib.SMTPResponseException as exc:
            verdict = Verdict.FAILED if exc.smtp_code >= 500 else Verdict.RETRY
            return Attempt(verdict, None, f"the mail server answered {exc.smtp_code}: {exc}")
        except (smtplib.SMTPException, OSError) as exc:
            return Attempt(Verdict.RETRY, None, f"could not send mail: {exc}")
        noun = "recipient" if len(to) == 1 else "recipients"
        return Attempt(Verdict.DELIVERED, None, f"sent to {len(to)} {noun}")


KIND = Email()
