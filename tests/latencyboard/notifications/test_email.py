from __future__ import annotations

from latencyboard.notifications.kinds import email
from latencyboard.notifications.message import channel_test_notice
from latencyboard.notifications.notice import Action
from tests.latencyboard.notifications.samples import AT, notice


def test_an_alert_mail_says_what_fired_where_with_the_figures_and_a_link() -> None:
    rendered = email.render(notice())

    assert rendered.subject == (
        "[Firing] model_forward p99 regressed +35% (fraud-scorer / model_forward)"
    )
    assert rendered.text == (
        "p99 of model_forward rose from 12.1 ms to 16.3 ms over the last 10 minutes.\n"
        "\n"
        "Pipeline: fraud-scorer\n"
        "Stage: model_forward\n"
        "baseline p99: 12.1 ms\n"
        "current p99: 16.3 ms [15.8, 16.9]\n"
        "n: 600\n"
        "Severity: page\n"
        "Team: payments\n"
        "When: 2026-11-24 10:41:07 UTC\n"
        "\n"
        "Open the alert: https://latencyboard.example/alerts/42/\n"
    )
    assert '<a href="https://latencyboard.example/alerts/42/">Open the alert</a>' in rendered.html


def test_html_in_user_text_is_escaped_and_the_subject_is_one_line() -> None:
    rendered = email.render(notice(title="slow\r\nBcc: everyone", stage="<script>"))

    assert rendered.subject == "[Firing] slow Bcc: everyone (fraud-scorer / <script>)"
    assert "<script>" not in rendered.html
    assert "&lt;script&gt;" in rendered.html


def test_a_resolve_names_who_resolved() -> None:
    rendered = email.render(notice(action=Action.RESOLVE, actor="bob"))

    assert rendered.subject.startswith("[Resolved] ")
    assert "By: bob\n" in rendered.text


def test_the_channel_test_notice_mails_as_a_plain_test() -> None:
    rendered = email.render(channel_test_notice("payments", "https://lb.example/channels/3/", AT))

    assert rendered.subject == "[TEST] Test notification from latencyboard"
    assert rendered.text.endswith(
        "This is a test sent from the channel page; no alert is behind it.\n"
    )
