"""The rule preview against the evaluator itself: the alerts the preview says a rule would
have raised over stored minutes are the alerts the minute evaluation raises when it is run
at each of those minutes."""

from __future__ import annotations

import datetime as dt

import pytest
from django.urls import reverse
from django.utils import timezone

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert
from latencyboard.alerts.preview import PREVIEW_MAX_STAGES, preview_rule
from latencyboard.detectors.replay import OutOfTime
from latencyboard.pipelines.models import Stage
from latencyboard.teams.models import Role
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import (
    BASELINE_AT,
    MINUTE,
    NOW,
    Scene,
    latencies,
    make_scene,
    put_history,
    put_rollup,
    put_slow_hours,
)

pytestmark = pytest.mark.django_db

HOURS = 5
SLOW = {range(60, 85): 1.5, range(200, 212): 1.35, range(290, 293): 2.0}
"""Minutes of the stored span that are slower, and by how much."""


def stored_minutes(scene: Scene, now: dt.datetime = NOW) -> tuple[dt.datetime, dt.datetime]:
    """Minute rollups of model_forward from the end of its hourly history (``put_history``
    at ``now``), ``HOURS`` long, some of it slower; returns the first minute and the end."""
    first = now.replace(minute=0, second=0) - dt.timedelta(hours=1)
    for m in range(HOURS * 60):
        scale = next((factor for minutes, factor in SLOW.items() if m in minutes), 1.0)
        put_rollup(scene, "minute", first + m * MINUTE, latencies(120, 5000 + m, scale))
    return first, first + HOURS * 60 * MINUTE


def test_the_preview_raises_the_alerts_the_minute_evaluation_raises():
    # Given a day of history, its baselines, and five hours of minutes with slow stretches.
    scene = make_scene(min_effect_ms=1.0)
    put_history(scene)
    compute_baselines(BASELINE_AT)
    first, end = stored_minutes(scene)

    # When the rule is previewed at the end, and when it is evaluated at every minute.
    previewed = preview_rule(scene.rule, [scene.stage], end)
    minute = first + scene.rule.window_minutes * MINUTE
    while minute <= end:
        evaluate_rule(scene.rule.pk, minute)
        minute += MINUTE

    # Then both find the same alerts, and the preview ran the detector on few minutes.
    raised = [
        ("model_forward", alert.started_at, alert.resolved_at)
        for alert in Alert.objects.order_by("started_at")
    ]
    assert [(a.stage, a.fired_at, a.resolved_at) for a in previewed.alerts] == raised
    assert len(raised) >= 2
    assert previewed.pages == len(raised)
    assert previewed.evaluations == 7 * 24 * 60 - scene.rule.window_minutes + 1
    assert previewed.detector_runs < 300
    fired = previewed.alerts[0]
    assert fired.current_ms > fired.baseline_ms
    assert fired.p_value < 1e-5


def test_each_hour_is_previewed_against_the_same_hours_of_the_previous_days():
    # Given 8 days of hourly rollups with the stage 30% slower every day from 10:00 to 13:00,
    # and today's minutes from 08:00 to 14:00, as slow from 10:00 to 13:00 as every day.
    scene = make_scene()
    end = NOW.replace(hour=14, minute=0, second=0)
    put_slow_hours(scene, end, days=9, minute_hours=6)
    compute_baselines(end)

    # When the rule is previewed at 14:00.
    previewed = preview_rule(scene.rule, [scene.stage], end)

    # Then the slow hours are compared with those hours of the previous days: no alert (the
    # week's baseline would page at 10:00).
    assert previewed.alerts == ()


def test_same_hours_not_compacted_into_hour_rows_yet_count_from_their_minutes():
    # Given 4 days of a stage 30% slower every day from 10:00 to 13:00, its last 30 hours
    # (yesterday's slow hours among them) still in minute rollups only.
    scene = make_scene()
    end = NOW.replace(hour=14, minute=0, second=0)
    put_slow_hours(scene, end, days=4, minute_hours=30)
    compute_baselines(end)

    # When the rule is previewed at 14:00.
    previewed = preview_rule(scene.rule, [scene.stage], end)

    # Then the start of the slow hours, today's and yesterday's, pages no one: they are
    # compared with the same hours of three previous days, yesterday's read from its
    # minutes as the baseline job reads them (the hour rows alone hold two such days, too
    # few for a same-hours baseline, and against the trailing one 10:00 pages).
    assert [alert.fired_at for alert in previewed.alerts if alert.fired_at.hour == 10] == []


def test_the_preview_api_answers_admins_with_the_alerts_and_saves_nothing(client):
    scene = make_scene()
    at = timezone.now() - dt.timedelta(hours=HOURS + 1)
    put_history(scene, now=at)
    compute_baselines(at - dt.timedelta(hours=1))
    stored_minutes(scene, at)
    client.force_login(make_user(scene.team, Role.ADMIN))
    rule = {"pipeline": scene.pipeline.pk, "name": "try", "stages": [scene.stage.pk]}

    answer = client.post(
        reverse("api-alert-rule-preview"),
        {**rule, "min_effect_ms": 1},
        content_type="application/json",
    )

    assert answer.status_code == 200
    assert answer.json()["alerts"]
    assert {a["stage"] for a in answer.json()["alerts"]} == {"model_forward"}
    assert scene.pipeline.alert_rules.count() == 1
    assert Alert.objects.count() == 0


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ONCALL])
def test_members_who_are_not_admins_cannot_preview_and_outsiders_see_no_pipeline(client, role):
    scene = make_scene()
    rule = {"pipeline": scene.pipeline.pk, "name": "try"}
    client.force_login(make_user(scene.team, role))
    member = client.post(reverse("api-alert-rule-preview"), rule, content_type="application/json")
    client.force_login(make_user(make_team("other"), Role.ADMIN))
    outsider = client.post(reverse("api-alert-rule-preview"), rule, content_type="application/json")

    assert member.status_code == 403
    assert outsider.status_code == 400
    assert "pipeline" in outsider.json()


def test_a_preview_past_its_deadline_stops_and_saves_nothing():
    scene = make_scene(min_effect_ms=1.0)
    put_history(scene)
    compute_baselines(BASELINE_AT)
    _, end = stored_minutes(scene)

    with pytest.raises(OutOfTime):
        preview_rule(scene.rule, [scene.stage], end, seconds=0.0)
    assert Alert.objects.count() == 0


def test_a_rule_watching_more_stages_than_a_preview_replays_is_refused(client):
    scene = make_scene()
    Stage.objects.bulk_create(
        Stage(pipeline=scene.pipeline, name=f"step_{n}") for n in range(PREVIEW_MAX_STAGES)
    )
    client.force_login(make_user(scene.team, Role.ADMIN))
    rule = {"pipeline": scene.pipeline.pk, "name": "every stage"}

    answer = client.post(reverse("api-alert-rule-preview"), rule, content_type="application/json")

    assert answer.status_code == 400
    assert f"at most {PREVIEW_MAX_STAGES}" in answer.json()["stages"]
