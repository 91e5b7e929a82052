"""A notice as the alerts app would build it, to render and send in tests."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from latencyboard.notifications.notice import Action, Notice, Severity

AT = dt.datetime(2026, 11, 24, 10, 41, 7, tzinfo=dt.UTC)

NOTICE = Notice(
    dedup_key="rule-7:fraud-scorer:model_forward",
    action=Action.TRIGGER,
    severity=Severity.PAGE,
    team="payments",
    pipeline="fraud-scorer",
    stage="model_forward",
    title="model_forward p99 regressed +35%",
    summary="p99 of model_forward rose from 12.1 ms to 16.3 ms over the last 10 minutes.",
    url="https://latencyboard.example/alerts/42/",
    at=AT,
    figures=(("baseline p99", "12.1 ms"), ("current p99", "16.3 ms [15.8, 16.9]"), ("n", "600")),
    numbers=(
        ("baseline_ms", 12.1),
        ("current_ms", 16.3),
        ("effect_pct", 34.7),
        ("p_value", 2.5e-12),
        ("n", 600),
        ("k", 31),
    ),
    links=(
        ("pipeline", "https://latencyboard.example/pipelines/3/?window=1h&percentile=p99"),
        ("traces", "https://latencyboard.example/traces/?pipeline=3&stage=9"),
    ),
)


def notice(**changes: Any) -> Notice:
    return dataclasses.replace(NOTICE, **changes)
