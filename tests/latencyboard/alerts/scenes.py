"""Real rows for alert tests: a team with a pipeline, rollups of known latencies, a rule."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from latencyboard.alerts.models import Alert, AlertStatus, Channel, Delivery, Rule
from latencyboard.alerts.services import record_event
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import CohortRollup, Rollup
from latencyboard.sketches.sketch import Sketch
from latencyboard.teams.models import Team
from tests.factories import incident_for, make_team

NOW = dt.datetime(2026, 3, 10, 12, 0, 30, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
HOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@dataclass
class Scene:
    team: Team
    pipeline: Pipeline
    stage: Stage
    rule: Rule
    channel: Channel


def make_scene(**rule_fields: object) -> Scene:
    team = make_team("oncall")
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    stage = Stage.objects.create(pipeline=pipeline, name="model_forward")
    channel = Channel.objects.create(
        team=team,
        name="hook",
        kind="webhook",
        target="http://127.0.0.1:9/",
        secret=HOOK_SECRET,
    )
    rule = Rule.objects.create(pipeline=pipeline, name="model_forward tail", **rule_fields)
    rule.stages.add(stage)
    rule.channels.add(channel)
    return Scene(team, pipeline, stage, rule, channel)


def queued(scene: Scene, at: dt.datetime = NOW) -> Delivery:
    """An alert of the scene's rule fires ``at``: its channel gets a delivery."""
    alert = Alert.objects.create(
        rule=scene.rule,
        pipeline=scene.pipeline,
        stage=scene.stage,
        incident=incident_for(scene.pipeline, AlertStatus.FIRING, at),
        dedup_key="k-1",
        status=AlertStatus.FIRING,
        summary="fraud-scorer · model_forward: p99 20.0 → 30.0 ms (+50%)",
        started_at=at,
    )
    record_event(alert, "", AlertStatus.FIRING, at, note="fired")
    return Delivery.objects.get()


def put_rollup(
    scene: Scene,
    resolution: str,
    start: dt.datetime,
    values_ms: np.ndarray,
    stage: Stage | None = None,
) -> None:
    sketch = Sketch.from_values(values_ms)
    Rollup.objects.create(
        team=scene.team,
        pipeline=scene.pipeline,
        stage=stage or scene.stage,
        resolution=resolution,
        bucket_start=start,
        count=sketch.count,
        error_count=0,
        sum_ms=sketch.sum,
        min_ms=sketch.min,
        max_ms=sketch.max,
        sketch=sketch.to_bytes(),
    )


def put_cohort_rollup(
    scene: Scene, resolution: str, start: dt.datetime, value: str, values_ms: np.ndarray
) -> None:
    """The stage's spans of ``model.version`` ``value`` over one bucket."""
    sketch = Sketch.from_values(values_ms)
    CohortRollup.objects.create(
        team=scene.team,
        pipeline=scene.pipeline,
        stage=scene.stage,
        attribute="model.version",
        value=value,
        resolution=resolution,
        bucket_start=start,
        count=sketch.count,
        error_count=0,
        sum_ms=sketch.sum,
        min_ms=sketch.min,
        max_ms=sketch.max,
        sketch=sketch.to_bytes(),
    )


def put_versions(
    scene: Scene, resolution: str, start: dt.datetime, versions: dict[str, np.ndarray]
) -> None:
    """One bucket of the stage: a cohort row per version and the rollup of them all."""
    for value, values_ms in versions.items():
        put_cohort_rollup(scene, resolution, start, value, values_ms)
    put_rollup(scene, resolution, start, np.concatenate(list(versions.values())))


def latencies(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    """Heavy-tailed stage latencies in ms (lognormal around 20 ms)."""
    return scale * np.random.default_rng(seed).lognormal(np.log(20.0), 0.4, n)


def put_slow_hours(
    scene: Scene, end: dt.datetime, days: int, minute_hours: int = 0, factor: float = 1.3
) -> None:
    """The ``days`` days of hours before ``end``, ``factor`` times slower every day from
    10:00 to 13:00 (a daily cycle): hourly rollups of 2,000 values, except the last
    ``minute_hours`` hours, minute rollups of 120."""
    for hour in range(1, days * 24 + 1):
        start = end - hour * dt.timedelta(hours=1)
        scale = factor if 10 <= start.hour < 13 else 1.0
        if hour > minute_hours:
            put_rollup(scene, "hour", start, latencies(2000, hour, scale))
            continue
        for m in range(60):
            put_rollup(scene, "minute", start + m * MINUTE, latencies(120, hour * 60 + m, scale))


BASELINE_AT = NOW - dt.timedelta(hours=1)
"""When the tests' baselines are computed: from whole hours before NOW's last hour."""


def put_history(
    scene: Scene, hours: int = 24, per_hour: int = 2000, now: dt.datetime = NOW
) -> None:
    """``hours`` hourly rollups ending an hour before ``now``'s hour, ``per_hour`` values
    each."""
    top = now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=1)
    for hour in range(1, hours + 1):
        put_rollup(scene, "hour", top - hour * dt.timedelta(hours=1), latencies(per_hour, hour))


def put_minutes(
    scene: Scene, minutes: int, scale: float, per_minute: int = 120, now: dt.datetime = NOW
) -> None:
    """The ``minutes`` complete minutes before ``now``, ``scale`` times slower than the
    history."""
    end = now.replace(second=0, microsecond=0)
    for m in range(1, minutes + 1):
        put_rollup(scene, "minute", end - m * MINUTE, latencies(per_minute, 1000 + m, scale))
