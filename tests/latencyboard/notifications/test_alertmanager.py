from __future__ import annotations

import datetime as dt

import orjson

from latencyboard.notifications.kinds import alertmanager
from latencyboard.notifications.notice import Action
from tests.latencyboard.notifications.samples import AT, notice

LABELS = {
    "alertname": "LatencyboardAlert",
    "severity": "page",
    "team": "payments",
    "pipeline": "fraud-scorer",
    "stage": "model_forward",
    "dedup_key": "rule-7:fraud-scorer:model_forward",
}
ANNOTATIONS = {
    "summary": "model_forward p99 regressed +35%",
    "description": "p99 of model_forward rose from 12.1 ms to 16.3 ms over the last 10 minutes.",
    "baseline p99": "12.1 ms",
    "current p99": "16.3 ms [15.8, 16.9]",
    "n": "600",
    "baseline_ms": "12.1",
    "current_ms": "16.3",
    "effect_pct": "34.7",
    "p_value": "2.5e-12",
    "k": "31",
    "pipeline_url": "https://latencyboard.example/pipelines/3/?window=1h&percentile=p99",
    "traces_url": "https://latencyboard.example/traces/?pipeline=3&stage=9",
}


def test_a_trigger_is_a_firing_version_4_webhook_message() -> None:
    document = orjson.loads(alertmanager.render(notice()).body)

    assert document == {
        "version": "4",
        "groupKey": '{}:{dedup_key="rule-7:fraud-scorer:model_forward"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "latencyboard",
        "groupLabels": {"dedup_key": "rule-7:fraud-scorer:model_forward"},
        "commonLabels": LABELS,
        "commonAnnotations": ANNOTATIONS,
        "externalURL": "https://latencyboard.example/alerts/42/",
        "alerts": [
            {
                "status": "firing",
                "labels": LABELS,
                "annotations": ANNOTATIONS,
                "startsAt": "2026-11-24T10:41:07Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "https://latencyboard.example/alerts/42/",
                "fingerprint": alertmanager.fingerprint(notice()),
            }
        ],
    }


def test_a_resolve_ends_the_alert_that_started_when_it_fired() -> None:
    # given the resolve of an alert that fired 25 minutes earlier
    resolved = notice(action=Action.RESOLVE, started_at=AT - dt.timedelta(minutes=25))

    # when it is rendered
    document = orjson.loads(alertmanager.render(resolved).body)

    # then it resolves the same alert (same fingerprint) with its start and end
    alert = document["alerts"][0]
    assert document["status"] == "resolved"
    assert (alert["status"], alert["startsAt"], alert["endsAt"]) == (
        "resolved",
        "2026-11-24T10:16:07Z",
        "2026-11-24T10:41:07Z",
    )
    assert alert["fingerprint"] == alertmanager.fingerprint(notice())
    assert len(alert["fingerprint"]) == 16


def test_an_acknowledgement_stays_firing_and_says_who() -> None:
    document = orjson.loads(
        alertmanager.render(notice(action=Action.ACKNOWLEDGE, actor="alice")).body
    )

    assert document["status"] == "firing"
    assert document["alerts"][0]["annotations"]["acknowledged_by"] == "alice"


def test_an_end_to_end_alert_is_labelled_end_to_end_as_the_api_names_it() -> None:
    document = orjson.loads(alertmanager.render(notice(stage="end-to-end")).body)

    assert document["alerts"][0]["labels"]["stage"] == "end-to-end"


def test_a_send_test_is_labelled_as_a_test() -> None:
    document = orjson.loads(alertmanager.render(notice(action=Action.TEST)).body)

    assert document["alerts"][0]["labels"]["test"] == "true"
    assert document["alerts"][0]["annotations"]["summary"] == (
        "[TEST] model_forward p99 regressed +35%"
    )


def test_a_secret_is_sent_as_a_bearer_token() -> None:
    message = alertmanager.render(notice(), "s3cret-token")

    assert message.headers == {
        "Content-Type": "application/json",
        "Authorization": "Bearer s3cret-token",
    }
