from __future__ import annotations

import datetime as dt

import pytest
from standardwebhooks import Webhook

from latencyboard.notifications.kinds import webhook
from latencyboard.notifications.notice import Action
from tests.latencyboard.notifications.samples import AT, NOTICE, notice

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_a_signed_notice_verifies_with_the_standard_webhooks_library() -> None:
    # given a notice signed now (the library refuses timestamps older than 5 minutes)
    message = webhook.render(notice(), SECRET, dt.datetime.now(dt.UTC))

    # when an independent implementation of the specification verifies it
    verified = Webhook(SECRET).verify(message.body, message.headers)

    # then it accepts the signature and reads the notice back
    assert verified["type"] == "alert.trigger"
    assert verified["data"]["dedup_key"] == "rule-7:fraud-scorer:model_forward"


def test_the_signature_matches_the_specifications_reference_vector() -> None:
    # given the message of the reference libraries' test vector
    key = webhook.secret_key(SECRET)

    # when it is signed
    body = b'{"test": 2432232314}'
    signature = webhook.sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body)

    # then it is the vector's signature
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_a_tampered_body_fails_verification() -> None:
    message = webhook.render(notice(), SECRET, dt.datetime.now(dt.UTC))

    with pytest.raises(Exception, match="No matching signature"):
        Webhook(SECRET).verify(message.body.replace(b"16.3", b"11.0"), message.headers)


def test_the_body_carries_every_field_of_the_notice() -> None:
    # given an acknowledged notice of an alert that fired earlier
    started = AT - dt.timedelta(minutes=4)
    acked = notice(action=Action.ACKNOWLEDGE, actor="alice", started_at=started)

    # when it is rendered
    message = webhook.render(acked, SECRET, dt.datetime.now(dt.UTC))
    body = Webhook(SECRET).verify(message.body, message.headers)

    # then the document holds the notice, times in RFC 3339 UTC
    assert body == {
        "type": "alert.acknowledge",
        "timestamp": "2026-11-24T10:41:07Z",
        "data": {
            "dedup_key": "rule-7:fraud-scorer:model_forward",
            "action": "acknowledge",
            "severity": "page",
            "team": "payments",
            "pipeline": "fraud-scorer",
            "stage": "model_forward",
            "title": "model_forward p99 regressed +35%",
            "summary": NOTICE.summary,
            "url": "https://latencyboard.example/alerts/42/",
            "at": "2026-11-24T10:41:07Z",
            "started_at": "2026-11-24T10:37:07Z",
            "figures": {
                "baseline p99": "12.1 ms",
                "current p99": "16.3 ms [15.8, 16.9]",
                "n": "600",
            },
            "numbers": {
                "baseline_ms": 12.1,
                "current_ms": 16.3,
                "effect_pct": 34.7,
                "p_value": 2.5e-12,
                "n": 600,
                "k": 31,
            },
            "links": {
                "pipeline": "https://latencyboard.example/pipelines/3/?window=1h&percentile=p99",
                "traces": "https://latencyboard.example/traces/?pipeline=3&stage=9",
            },
            "actor": "alice",
            "test": False,
        },
    }


def test_a_retry_keeps_the_message_id_and_takes_a_new_timestamp() -> None:
    # given two attempts at one notice, a minute apart
    first = webhook.render(notice(), SECRET, AT)
    second = webhook.render(notice(), SECRET, AT + dt.timedelta(minutes=1))

    # then a receiver can drop the duplicate by id, and each timestamp is the attempt's
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.headers["webhook-timestamp"] == "1795516867"
    assert second.headers["webhook-timestamp"] == "1795516927"


def test_each_transition_of_an_alert_gets_its_own_message_id() -> None:
    ids = {webhook.message_id(notice(action=action)) for action in Action}

    assert len(ids) == len(Action)


def test_a_send_test_is_marked_as_a_test() -> None:
    message = webhook.render(notice(action=Action.TEST), SECRET, dt.datetime.now(dt.UTC))

    body = Webhook(SECRET).verify(message.body, message.headers)

    assert body["type"] == "alert.test"
    assert body["data"]["test"] is True
    assert body["data"]["title"] == "[TEST] model_forward p99 regressed +35%"


def test_a_new_secret_is_usable_by_the_standard_webhooks_library() -> None:
    secret = webhook.new_secret()
    message = webhook.render(notice(), secret, dt.datetime.now(dt.UTC))

    assert secret.startswith("whsec_")
    assert len(webhook.secret_key(secret)) == 24
    assert Webhook(secret).verify(message.body, message.headers)["type"] == "alert.trigger"


@pytest.mark.parametrize(
    ("secret", "error"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "the signing secret must look like whsec_<base64>"),
        ("whsec_not base64!", "the signing secret after whsec_ is not valid base64"),
        ("whsec_", "the signing secret is empty"),
    ],
    ids=["no-prefix", "not-base64", "empty"],
)
def test_a_malformed_secret_is_refused(secret: str, error: str) -> None:
    with pytest.raises(webhook.BadSecretError) as refused:
        webhook.render(notice(), secret, AT)

    assert str(refused.value) == error
