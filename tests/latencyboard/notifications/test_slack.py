from __future__ import annotations

import orjson

from latencyboard.notifications.kinds import slack
from latencyboard.notifications.notice import Action
from tests.latencyboard.notifications.samples import notice


def test_a_trigger_is_a_block_kit_message_with_the_stage_figures_and_a_link() -> None:
    # when a firing alert is rendered for Slack
    message = slack.render(notice())

    # then it is the Block Kit document Slack's incoming webhooks accept
    assert message.headers == {"Content-Type": "application/json"}
    assert orjson.loads(message.body) == {
        "text": "Firing: model_forward p99 regressed +35% (fraud-scorer / model_forward). "
        "p99 of model_forward rose from 12.1 ms to 16.3 ms over the last 10 minutes. "
        "https://latencyboard.example/alerts/42/",
        "blocks": [
            {
                "type": "header",
                "text": {"type": "plain_text", "text": "Firing: model_forward p99 regressed +35%"},
            },
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": "p99 of model_forward rose from 12.1 ms to 16.3 ms over the last "
                    "10 minutes.",
                },
                "fields": [
                    {"type": "mrkdwn", "text": "*Pipeline*\nfraud-scorer"},
                    {"type": "mrkdwn", "text": "*Stage*\nmodel_forward"},
                    {"type": "mrkdwn", "text": "*baseline p99*\n12.1 ms"},
                    {"type": "mrkdwn", "text": "*current p99*\n16.3 ms [15.8, 16.9]"},
                    {"type": "mrkdwn", "text": "*n*\n600"},
                ],
            },
            {
                "type": "actions",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Open alert"},
                        "url": "https://latencyboard.example/alerts/42/",
                        "action_id": "open_alert",
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Pipeline"},
                        "url": "https://latencyboard.example/pipelines/3/?window=1h&percentile=p99",
                        "action_id": "open_pipeline",
                    },
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": "Exemplar traces"},
                        "url": "https://latencyboard.example/traces/?pipeline=3&stage=9",
                        "action_id": "open_traces",
                    },
                ],
            },
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": "Firing 2026-11-24 10:41:07 UTC · severity page · team payments",
                    }
                ],
            },
        ],
    }


def test_an_acknowledgement_names_who_acknowledged() -> None:
    blocks = orjson.loads(slack.render(notice(action=Action.ACKNOWLEDGE, actor="alice")).body)

    assert blocks["blocks"][0]["text"]["text"] == "Acknowledged: model_forward p99 regressed +35%"
    assert blocks["blocks"][-1]["elements"][0]["text"] == (
        "Acknowledged 2026-11-24 10:41:07 UTC · severity page · team payments · by alice"
    )


def test_mrkdwn_control_characters_in_user_text_are_escaped() -> None:
    document = orjson.loads(slack.render(notice(stage="<!channel> & co")).body)

    assert document["blocks"][1]["fields"][1]["text"] == "*Stage*\n&lt;!channel&gt; &amp; co"
    assert "<!channel>" not in document["text"]


def test_slack_limits_hold_for_long_titles_and_many_figures() -> None:
    # given a notice with a 400-character title and 20 figures
    figures = tuple((f"figure {index}", "1 ms") for index in range(20))
    document = orjson.loads(slack.render(notice(title="x" * 400, figures=figures)).body)

    # then the header and the section fields stay within Block Kit's limits
    assert len(document["blocks"][0]["text"]["text"]) == 150
    assert len(document["blocks"][1]["fields"]) == 10


def test_a_notice_without_a_link_has_no_button() -> None:
    document = orjson.loads(slack.render(notice(url="", links=())).body)

    assert [block["type"] for block in document["blocks"]] == ["header", "section", "context"]


def test_a_send_test_is_marked_as_a_test() -> None:
    document = orjson.loads(slack.render(notice(action=Action.TEST)).body)

    assert document["blocks"][0]["text"]["text"] == "[TEST] model_forward p99 regressed +35%"
    assert document["text"].startswith("[TEST] model_forward p99 regressed +35%")
