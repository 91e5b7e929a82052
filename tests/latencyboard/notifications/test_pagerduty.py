from __future__ import annotations

import orjson
import pytest

from latencyboard.notifications.kinds import pagerduty
from latencyboard.notifications.notice import Action, Severity
from tests.latencyboard.notifications.samples import notice

ROUTING_KEY = "R0123456789ABCDEF0123456789ABCDE"


def test_a_trigger_is_an_events_v2_event_with_the_stable_dedup_key() -> None:
    event = orjson.loads(pagerduty.render(notice(), ROUTING_KEY).body)

    assert event == {
        "routing_key": ROUTING_KEY,
        "event_action": "trigger",
        "dedup_key": "rule-7:fraud-scorer:model_forward",
        "payload": {
            "summary": "model_forward p99 regressed +35% (fraud-scorer / model_forward): "
            "p99 of model_forward rose from 12.1 ms to 16.3 ms over the last 10 minutes.",
            "source": "fraud-scorer",
            "severity": "critical",
            "timestamp": "2026-11-24T10:41:07Z",
            "group": "payments",
            "component": "model_forward",
            "custom_details": {
                "baseline p99": "12.1 ms",
                "current p99": "16.3 ms [15.8, 16.9]",
                "n": 600,
                "baseline_ms": 12.1,
                "current_ms": 16.3,
                "effect_pct": 34.7,
                "p_value": 2.5e-12,
                "k": 31,
            },
        },
        "client": "latencyboard",
        "client_url": "https://latencyboard.example/alerts/42/",
        "links": [
            {
                "href": "https://latencyboard.example/alerts/42/",
                "text": "Open the alert in latencyboard",
            },
            {
                "href": "https://latencyboard.example/pipelines/3/?window=1h&percentile=p99",
                "text": "The pipeline around the alert",
            },
            {
                "href": "https://latencyboard.example/traces/?pipeline=3&stage=9",
                "text": "Exemplar traces",
            },
        ],
    }


@pytest.mark.parametrize(
    ("severity", "expected"),
    [(Severity.PAGE, "critical"), (Severity.TICKET, "warning")],
    ids=["page", "ticket"],
)
def test_severity_maps_to_pagerdutys(severity: Severity, expected: str) -> None:
    event = orjson.loads(pagerduty.render(notice(severity=severity), ROUTING_KEY).body)

    assert event["payload"]["severity"] == expected


@pytest.mark.parametrize("action", [Action.ACKNOWLEDGE, Action.RESOLVE], ids=str)
def test_acknowledge_and_resolve_name_the_same_incident(action: Action) -> None:
    event = orjson.loads(pagerduty.render(notice(action=action), ROUTING_KEY).body)

    assert event == {
        "routing_key": ROUTING_KEY,
        "event_action": str(action),
        "dedup_key": "rule-7:fraud-scorer:model_forward",
    }


def test_a_long_summary_is_cut_to_pagerdutys_1024_characters() -> None:
    event = orjson.loads(pagerduty.render(notice(summary="y" * 5000), ROUTING_KEY).body)

    assert len(event["payload"]["summary"]) == 1024
    assert event["payload"]["summary"].endswith("y…")


def test_a_long_dedup_key_is_cut_to_255_characters_the_same_way_each_time() -> None:
    long_key = "k" * 300
    trigger = orjson.loads(pagerduty.render(notice(dedup_key=long_key), ROUTING_KEY).body)
    resolve = orjson.loads(
        pagerduty.render(notice(dedup_key=long_key, action=Action.RESOLVE), ROUTING_KEY).body
    )

    assert len(trigger["dedup_key"]) == 255
    assert trigger["dedup_key"] == resolve["dedup_key"]


def test_a_send_test_is_an_info_event_outside_the_alerts_incident() -> None:
    event = orjson.loads(pagerduty.render(notice(action=Action.TEST), ROUTING_KEY).body)

    assert event["event_action"] == "trigger"
    assert event["dedup_key"] == "test:rule-7:fraud-scorer:model_forward"
    assert event["payload"]["severity"] == "info"
    assert event["payload"]["summary"].startswith("[TEST] model_forward p99 regressed +35%")
