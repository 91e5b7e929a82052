from __future__ import annotations

import socket

from django.core import mail
from django.core.mail import EmailMultiAlternatives
from pytest_django.fixtures import Settings

from latencyboard.notifications.delivery import deliver
from latencyboard.notifications.notice import Attempt, Verdict
from tests.latencyboard.notifications.samples import notice


def test_an_alert_is_mailed_to_every_recipient_with_an_html_alternative(
    mailoutbox: list[EmailMultiAlternatives],
) -> None:
    # when an alert goes to an e-mail channel of two recipients
    attempt = deliver("email", "oncall@example.org, lead@example.org", "", notice())

    # then one message went to both, in plain text and HTML
    assert attempt == Attempt(Verdict.DELIVERED, None, "sent to 2 recipients")
    (message,) = mailoutbox
    assert message.to == ["oncall@example.org", "lead@example.org"]
    assert message.subject == (
        "[Firing] model_forward p99 regressed +35% (fraud-scorer / model_forward)"
    )
    assert "current p99: 16.3 ms [15.8, 16.9]\n" in str(message.body)
    ((html, mimetype),) = message.alternatives
    assert mimetype == "text/html"
    assert "<td>16.3 ms [15.8, 16.9]</td>" in str(html)


def test_a_bad_recipient_fails_without_sending(mailoutbox: list[EmailMultiAlternatives]) -> None:
    attempt = deliver("email", "oncall", "", notice())

    assert attempt == Attempt(Verdict.FAILED, None, "bad target: 'oncall' is not an e-mail address")
    assert mailoutbox == []


def test_an_unreachable_mail_server_is_retried(settings: Settings) -> None:
    # given Django's SMTP backend pointed at a loopback port nothing listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = port

    # when an alert is mailed
    attempt = deliver("email", "oncall@example.org", "", notice())

    # then the outbox will try again
    assert (attempt.verdict, attempt.status_code) == (Verdict.RETRY, None)
    assert attempt.detail.startswith("could not send mail: ")
    assert mail.outbox == []
