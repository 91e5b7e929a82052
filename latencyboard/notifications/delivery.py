"""One delivery attempt of a notice to a channel, judged for the outbox.

:func:`deliver` never raises for a receiver's fault: every outcome is an :class:`Attempt`
whose verdict says whether trying again can help. The outbox owns the retry schedule.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import smtplib
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives
from django.core.validators import validate_email

from latencyboard.notifications import alertmanager, mail, pagerduty, slack, webhook
from latencyboard.notifications.message import ChannelKind, HttpMessage
from latencyboard.notifications.notice import Attempt, Notice, Verdict
from latencyboard.notifications.transport import (
    IPAddress,
    literal_address,
    post,
    refused_reason,
)

logger = logging.getLogger(__name__)

KINDS = frozenset(kind.value for kind in ChannelKind)
URL_LIMIT = 2048
MAX_RECIPIENTS = 50
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")


def recipients(target: str) -> list[str]:
    return [address.strip() for address in target.split(",") if address.strip()]


def _url_problem(target: str) -> str | None:
    if len(target) > URL_LIMIT:
        return f"the URL is longer than {URL_LIMIT} characters"
    if any(character.isspace() or not character.isprintable() for character in target):
        return "the URL contains spaces or control characters"
    if not target.isascii():
        return "the URL must be ASCII: an xn-- host name, a percent-encoded path"
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "the target must be an http:// or https:// URL"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "the URL must not hold a user name or password: put credentials in the secret"
    if port == 0:
        return "the URL's port must be from 1 to 65535"
    address = _written_address(parts.hostname)
    reason = refused_reason(address, settings.NOTIFICATION_ALLOWED_NETWORKS) if address else None
    if reason is not None:
        return f"{parts.hostname} is {reason}: notifications may not go there"
    return None


def _written_address(host: str) -> IPAddress | None:
    """The address a host name stands for without asking DNS (an IP literal, localhost)."""
    if host == "localhost" or host.endswith(".localhost"):
        return LOOPBACK
    return literal_address(host)


def validate_target(kind: str, target: str) -> str | None:
    """What is wrong with ``target`` for a channel of ``kind``, or None (for the channel form)."""
    if kind not in KINDS:
        return f"unknown channel kind {kind!r}"
    if kind != ChannelKind.EMAIL:
        return _url_problem(target)
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


def validate_secret(kind: str, secret: str) -> str | None:
    """What is wrong with ``secret`` for a channel of ``kind``, or None (for the channel form).
    An empty webhook secret is fine here: the form generates one."""
    if kind == ChannelKind.WEBHOOK and secret:
        try:
            webhook.secret_key(secret)
        except webhook.BadSecretError as exc:
            return str(exc)
    if kind == ChannelKind.PAGERDUTY and not secret:
        return "give the integration's routing key"
    return None


def mask(secret: str) -> str:
    """A secret as it may be shown back: its kind and at most its last 4 characters."""
    if not secret:
        return ""
    tail = secret[-4:] if len(secret) >= 16 else ""
    if secret.startswith(("http://", "https://")):
        parts = urlsplit(secret)
        return f"{parts.scheme}://{parts.hostname}/…{tail}"
    prefix = webhook.SECRET_PREFIX if secret.startswith(webhook.SECRET_PREFIX) else ""
    return f"{prefix}…{tail}"


def _render(kind: ChannelKind, secret: str, notice: Notice, now: dt.datetime) -> HttpMessage:
    if kind is ChannelKind.WEBHOOK:
        return webhook.render(notice, secret, now)
    if kind is ChannelKind.SLACK:
        return slack.render(notice)
    if kind is ChannelKind.PAGERDUTY:
        return pagerduty.render(notice, secret)
    return alertmanager.render(notice, secret)


def _send_mail(to: list[str], notice: Notice) -> Attempt:
    rendered = mail.render(notice)
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


def _attempt(
    kind: ChannelKind, target: str, secret: str, notice: Notice, timeout_s: float, now: dt.datetime
) -> Attempt:
    problem = validate_target(kind, target)
    if problem is not None:
        return Attempt(Verdict.FAILED, None, f"bad target: {problem}")
    if kind is ChannelKind.EMAIL:
        return _send_mail(recipients(target), notice)
    if kind is ChannelKind.PAGERDUTY and not secret:
        return Attempt(Verdict.FAILED, None, "no routing key: set the channel's secret")
    try:
        message = _render(kind, secret, notice, now)
    except webhook.BadSecretError as exc:
        return Attempt(Verdict.FAILED, None, f"bad secret: {exc}")
    return post(target, message, timeout_s, now, settings.NOTIFICATION_ALLOWED_NETWORKS)


def deliver(
    channel_kind: str,
    target: str,
    secret: str,
    notice: Notice,
    timeout_s: float = 10.0,
    *,
    now: dt.datetime | None = None,
) -> Attempt:
    """Send ``notice`` once to a channel and say what came of it.

    2xx → delivered; 429, 5xx, timeouts and connection errors → retry (with the receiver's
    Retry-After); other 4xx, redirects, a bad target or secret → failed. ``now`` is the
    attempt's time (the webhook timestamp, the origin of a Retry-After date).
    """
    if channel_kind not in KINDS:
        return Attempt(Verdict.FAILED, None, f"unknown channel kind {channel_kind!r}")
    kind = ChannelKind(channel_kind)
    attempt = _attempt(kind, target, secret, notice, timeout_s, now or dt.datetime.now(dt.UTC))
    logger.info(
        "notifications.attempt",
        extra={
            "kind": str(kind),
            "dedup_key": notice.dedup_key,
            "action": str(notice.action),
            "verdict": str(attempt.verdict),
            "status_code": attempt.status_code,
        },
    )
    return attempt
