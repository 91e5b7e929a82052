"""Incidents over simulated overlapping alerts: alerts of one pipeline that overlap in time
form one incident, paged once, named after the stage that grew most, resolved with its last
alert; the root span's stage never alerts apart from end to end."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ingest.writer import SpanWriter
from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.incidents import Member, title_of
from latencyboard.alerts.models import Alert, Channel, Delivery, Incident, Rule
from latencyboard.alerts.services import advance
from latencyboard.db import conninfo
from latencyboard.detectors.lifecycle import Outcome
from latencyboard.pipelines.models import Pipeline, Stage
from tests.factories import make_requests, make_team
from tests.latencyboard.alerts.scenes import (
    BASELINE_AT,
    MINUTE,
    NOW,
    Scene,
    latencies,
    make_scene,
    put_rollup,
)

pytestmark = pytest.mark.django_db

CLEAN_NEEDED = 3


def regression(stage: str, effect_ms: float) -> tuple[dict[str, Any], str]:
    """Evidence and summary as the evaluator writes them for a stage ``effect_ms`` slower."""
    found = {
        "quantile": "p90",
        "baseline": {"estimate": 20.0, "low": 19.5, "high": 20.5},
        "current": {"estimate": 20.0 + effect_ms, "low": 19.0 + effect_ms, "high": None},
        "n": 1200,
        "k": 300,
        "p_value": 1e-30,
        "effect_ms": effect_ms,
        "effect_percent": 5.0 * effect_ms,
    }
    summary = f"fraud-scorer · {stage}: p90 20.0 → {20.0 + effect_ms:.1f} ms"
    return {"regression": found}, summary


class Simulation:
    """Steps (rule, stage) alerts through evaluations with scripted outcomes."""

    def __init__(self, scene: Scene) -> None:
        self.scene = scene
        self.at = NOW

    def evaluate(self, rule: Rule, outcomes: dict[Stage | None, tuple[Outcome, float]]) -> None:
        for stage, (outcome, effect_ms) in outcomes.items():
            name = stage.name if stage else "end-to-end"
            found, summary = regression(name, effect_ms)
            stage_id = stage.pk if stage else None
            advance(rule, stage_id, outcome, found, summary, self.at, CLEAN_NEEDED)
        self.at += MINUTE


def actions(incident: Incident) -> list[tuple[str, str]]:
    """What receivers were sent about the incident: (channel, transition), in order."""
    return list(
        Delivery.objects.filter(event__alert__incident=incident)
        .order_by("pk")
        .values_list("channel__name", "event__to_status")
    )


def test_the_title_names_the_stage_that_grew_most_and_end_to_end_only_alone():
    members = [
        Member("end-to-end", "e2e +12 ms", 12.0),
        Member("model_forward", "model_forward +9 ms", 9.0),
        Member("preprocess", "preprocess +1 ms", 1.0),
    ]

    assert title_of(members) == "model_forward +9 ms"
    assert title_of(members[:1]) == "e2e +12 ms"
    assert title_of([Member("burn", "burning", None), members[2]]) == "preprocess +1 ms"


def test_overlapping_alerts_of_one_pipeline_page_once_and_resolve_with_the_last():
    scene = make_scene()
    sim = Simulation(scene)
    preprocess = Stage.objects.create(pipeline=scene.pipeline, name="preprocess")
    forward = scene.stage
    firing, clean = (Outcome.FIRING, 0.0), (Outcome.CLEAN, 0.0)

    # preprocess fires first: the incident opens and pages once.
    sim.evaluate(scene.rule, {preprocess: (Outcome.FIRING, 2.0)})
    (incident,) = Incident.objects.all()
    assert (incident.status, incident.title) == (
        "firing",
        "fraud-scorer · preprocess: p90 20.0 → 22.0 ms",
    )
    # model_forward and end to end fire while it is open: they join it, nobody is paged
    # again, and the title moves to the stage that grew most (not end to end).
    sim.evaluate(scene.rule, {forward: (Outcome.FIRING, 9.0), None: (Outcome.FIRING, 11.0)})
    incident.refresh_from_db()
    assert Incident.objects.count() == 1
    assert incident.alerts.count() == 3
    assert incident.title == "fraud-scorer · model_forward: p90 20.0 → 29.0 ms"
    assert actions(incident) == [("hook", "firing")]
    # preprocess recovers while the others still fire: the incident stays open.
    for _ in range(CLEAN_NEEDED):
        sim.evaluate(scene.rule, {preprocess: clean, forward: firing, None: firing})
    incident.refresh_from_db()
    assert incident.status == "firing"
    assert Alert.objects.get(stage=preprocess).status == "resolved"
    # The other two recover: the last to resolve resolves the incident, told once.
    for _ in range(CLEAN_NEEDED):
        sim.evaluate(scene.rule, {forward: clean, None: clean})
    incident.refresh_from_db()
    assert (incident.status, incident.resolved_at) == ("resolved", sim.at - MINUTE)
    assert actions(incident) == [("hook", "firing"), ("hook", "resolved")]

    # A regression after that is a new incident, paged again.
    sim.evaluate(scene.rule, {forward: (Outcome.FIRING, 4.0)})
    assert Incident.objects.count() == 2
    newest = Incident.objects.get(status="firing")
    assert actions(newest) == [("hook", "firing")]


def test_a_second_rule_joining_an_incident_tells_only_its_channels_that_were_not_told():
    scene = make_scene()
    sim = Simulation(scene)
    slack = Channel.objects.create(
        team=scene.team, name="slack", kind="slack", target="http://127.0.0.1:9/s"
    )
    other = Rule.objects.create(pipeline=scene.pipeline, name="end to end")
    other.channels.add(slack, scene.channel)

    sim.evaluate(scene.rule, {scene.stage: (Outcome.FIRING, 5.0)})
    sim.evaluate(other, {None: (Outcome.FIRING, 6.0)})
    for _ in range(CLEAN_NEEDED):
        sim.evaluate(scene.rule, {scene.stage: (Outcome.CLEAN, 0.0)})
        sim.evaluate(other, {None: (Outcome.CLEAN, 0.0)})

    (incident,) = Incident.objects.all()
    assert actions(incident) == [
        ("hook", "firing"),
        ("slack", "firing"),
        ("hook", "resolved"),
        ("slack", "resolved"),
    ]


def test_incidents_of_two_pipelines_are_apart():
    scene = make_scene()
    other = make_scene()

    Simulation(scene).evaluate(scene.rule, {scene.stage: (Outcome.FIRING, 5.0)})
    Simulation(other).evaluate(other.rule, {other.stage: (Outcome.FIRING, 5.0)})

    assert sorted(Incident.objects.values_list("pipeline", flat=True)) == sorted(
        [scene.pipeline.pk, other.pipeline.pk]
    )


@pytest.mark.django_db(transaction=True)
def test_the_root_spans_stage_fires_as_end_to_end_only():
    # Given fraud-scorer's root spans ("predict") stored by ingest, and a rule watching every
    # stage, with end to end and the root span's stage both 1.5x slower.
    team = make_team("oncall")
    writer = SpanWriter(conninfo(), max_connections=1)
    writer.write(
        team.pk,
        make_requests("fraud-scorer", 5, NOW - 3 * MINUTE),
        rejected=0,
        protocol="test",
        received_at=NOW,
    )
    writer.close()
    pipeline = Pipeline.objects.get(team=team, service_name="fraud-scorer")
    root = Stage.objects.get(pipeline=pipeline, name="predict")
    rule = Rule.objects.create(pipeline=pipeline, name="every stage")
    for stage in (None, root):
        put_slower_stage(Scene(team, pipeline, stage, rule, None))  # type: ignore[arg-type]
    compute_baselines(BASELINE_AT)

    # When the rule is evaluated.
    evaluate_rule(rule.pk, NOW)

    # Then one alert fires, end to end, in one incident.
    assert list(Alert.objects.values_list("stage", flat=True)) == [None]
    assert Incident.objects.count() == 1


def put_slower_stage(scene: Scene) -> None:
    """A day of hourly history of the scene's stage (``None``: end to end), then ten
    minutes 1.5x slower."""
    top = NOW.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=1)
    end = NOW.replace(second=0, microsecond=0)
    for hour in range(1, 25):
        put_rollup(scene, "hour", top - hour * dt.timedelta(hours=1), latencies(2000, hour))
    for m in range(1, 11):
        put_rollup(scene, "minute", end - m * MINUTE, latencies(120, 1000 + m, 1.5))
