"""Baselines and the minute evaluation on real rollup rows in PostgreSQL: one alert per
(rule, pipeline, stage), its evidence, auto-resolve, silences and maintenance windows."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert, AlertEvent, Baseline, Delivery, Silence
from latencyboard.alerts.outbox import notice_of
from latencyboard.notifications.notice import Severity
from latencyboard.rollups.models import Rollup
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import (
    BASELINE_AT,
    MINUTE,
    NOW,
    make_scene,
    put_history,
    put_minutes,
    put_slow_hours,
)

pytestmark = pytest.mark.django_db


def test_baseline_merges_the_trailing_hourly_rollups_and_is_ready_above_the_minimum():
    scene = make_scene()
    put_history(scene, hours=24, per_hour=2000)

    compute_baselines(BASELINE_AT)

    baseline = Baseline.objects.get(pipeline=scene.pipeline, stage=scene.stage)
    assert (baseline.n, baseline.ready) == (48_000, True)
    assert baseline.window_end == dt.datetime(2026, 3, 10, 11, tzinfo=dt.UTC)
    assert baseline.window_start == dt.datetime(2026, 3, 3, 11, tzinfo=dt.UTC)
    # One day of history: too little for the same-hours baseline.
    assert baseline.seasonal is False


def test_a_stage_slower_every_day_at_this_hour_is_compared_with_those_hours():
    # Given 8 days of hourly rollups, the stage 30% slower every day from 10:00 to 13:00,
    scene = make_scene()
    put_slow_hours(scene, BASELINE_AT.replace(minute=0, second=0, microsecond=0), days=8)
    # and the last 10 minutes as slow as every day at noon.
    put_minutes(scene, 10, scale=1.3)

    compute_baselines(BASELINE_AT)
    evaluate_rule(scene.rule.pk, NOW)

    # Then the baseline is those hours of the previous 7 days, and nothing fires.
    baseline = Baseline.objects.get(pipeline=scene.pipeline, stage=scene.stage)
    assert (baseline.seasonal, baseline.n, baseline.ready) == (True, 7 * 3 * 2000, True)
    assert Alert.objects.count() == 0


def test_an_alert_against_the_same_hours_says_so(client):
    # Given 8 days of history without a cycle, and the last 10 minutes 50% slower.
    scene = make_scene()
    put_slow_hours(scene, BASELINE_AT.replace(minute=0, second=0), days=8, factor=1.0)
    put_minutes(scene, 10, scale=1.5)
    compute_baselines(BASELINE_AT)

    evaluate_rule(scene.rule.pk, NOW)

    # Then the alert's evidence and page say what it was compared with.
    alert = Alert.objects.get()
    assert alert.evidence["regression"]["baseline_seasonal"] is True
    client.force_login(make_user(scene.team, Role.VIEWER))
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk}))
    assert "n = 42000 · the same hours of the previous days" in page.content.decode()


def test_a_baseline_under_the_minimum_is_not_ready_and_fires_nothing(settings):
    settings.ALERT_BASELINE_MIN_COUNT = 50_000
    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=2.0)
    compute_baselines(BASELINE_AT)

    evaluate_rule(scene.rule.pk, NOW)

    assert Baseline.objects.get(stage=scene.stage).ready is False
    assert Alert.objects.count() == 0


def test_a_slower_stage_fires_one_alert_with_its_evidence_and_queues_its_notification():
    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=1.5)
    compute_baselines(BASELINE_AT)

    evaluate_rule(scene.rule.pk, NOW)
    evaluate_rule(scene.rule.pk, NOW + MINUTE)

    alert = Alert.objects.get()
    assert (alert.stage, alert.status) == (scene.stage, "firing")
    assert alert.dedup_key == (
        f"latencyboard-rule{scene.rule.pk}-pipeline{scene.pipeline.pk}-stage{scene.stage.pk}"
    )
    found = alert.evidence["regression"]
    assert found["grew_most"] == "model_forward"
    assert found["n"] == 1200
    assert found["effect_percent"] >= 20.0
    assert found["p_value"] < 1e-5
    assert found["current"]["low"] > found["baseline"]["high"]
    assert found["baseline_seasonal"] is False
    assert alert.summary.startswith("fraud-scorer · model_forward: p")
    assert list(AlertEvent.objects.values_list("from_status", "to_status", "who")) == [
        ("", "firing", None)
    ]
    assert list(Delivery.objects.values_list("channel", "status")) == [
        (scene.channel.pk, "pending")
    ]


def test_the_alert_page_notice_and_api_quote_the_change_with_its_interval(client, settings):
    # Given a stage 50% slower in the last 10 minutes than over its trailing week, and alerts
    # quoting their intervals at 90%.
    settings.ALERT_EVIDENCE_CONFIDENCE_PERCENT = 90
    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=1.5)
    compute_baselines(BASELINE_AT)

    evaluate_rule(scene.rule.pk, NOW)

    # Then its evidence holds the change's interval at that level, simultaneous over the
    # quantiles the alert quotes, above 0 and around the change.
    alert = Alert.objects.get()
    found = alert.evidence["regression"]
    interval = found["change_interval"]
    assert (interval["confidence"], interval["over"]) == (0.9, ["p50", "p90", "p95", "p99"])
    assert 0 < interval["low_percent"] < found["effect_percent"] < interval["high_percent"]
    assert 0 < interval["low_ms"] < found["effect_ms"] < interval["high_ms"]
    assert alert.current["quantiles"][found["quantile"]]["change_interval"] == interval
    words = (
        f"+{found['effect_percent']:.0f}% "
        f"(+{interval['low_percent']:.0f}% to +{interval['high_percent']:.0f}%)"
    )
    # and the page shows it beside the baseline and current figures,
    client.force_login(make_user(scene.team, Role.VIEWER))
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk})).content.decode()
    assert f'<dd id="effect-figure">{found["quantile"]} {words}</dd>' in page
    assert "interval at 90%, simultaneous over p50, p90, p95, p99" in page
    assert "with its 90% interval" in page
    # the notification says it and carries its bounds as numbers,
    notice = notice_of(Delivery.objects.get())
    assert dict(notice.figures)["change"].startswith(f"{words}, +{found['effect_ms']:.1f} ms (")
    numbers = dict(notice.numbers)
    assert (numbers["effect_pct_low"], numbers["effect_pct_high"]) == (
        interval["low_percent"],
        interval["high_percent"],
    )
    # and the API returns it.
    api = client.get(reverse("api-alert", kwargs={"alert_id": alert.pk})).json()
    assert api["evidence"]["regression"]["change_interval"] == interval


def test_an_unchanged_stage_fires_nothing():
    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=1.0)
    compute_baselines(BASELINE_AT)

    evaluate_rule(scene.rule.pk, NOW)

    assert Alert.objects.count() == 0


def fire(scene) -> Alert:
    put_history(scene)
    put_minutes(scene, 10, scale=1.5)
    compute_baselines(BASELINE_AT)
    evaluate_rule(scene.rule.pk, NOW)
    return Alert.objects.get()


def test_the_alert_resolves_after_five_clean_evaluations_and_not_before():
    scene = make_scene()
    fire(scene)
    Rollup.objects.filter(resolution="minute").delete()
    later = NOW + 30 * MINUTE
    put_minutes(scene, 15, scale=1.0, now=later + 5 * MINUTE)

    for minute in range(4):
        evaluate_rule(scene.rule.pk, later + minute * MINUTE)
    status_after_four = Alert.objects.get().status
    evaluate_rule(scene.rule.pk, later + 4 * MINUTE)

    assert status_after_four == "firing"
    alert = Alert.objects.get()
    assert (alert.status, alert.resolved_at) == ("resolved", later + 4 * MINUTE)
    assert list(alert.events.values_list("from_status", "to_status")) == [
        ("", "firing"),
        ("firing", "resolved"),
    ]
    assert Delivery.objects.count() == 2


def test_evaluations_without_traffic_neither_fire_nor_resolve():
    scene = make_scene()
    fire(scene)
    Rollup.objects.filter(resolution="minute").delete()

    for minute in range(10):
        evaluate_rule(scene.rule.pk, NOW + minute * MINUTE)

    assert Alert.objects.get().status == "firing"


def test_a_silence_holds_the_notification_but_the_alert_still_fires():
    scene = make_scene()
    Silence.objects.create(
        pipeline=scene.pipeline,
        stage=scene.stage,
        until=NOW + dt.timedelta(hours=1),
        reason="deploying v8",
        created_at=NOW,
    )

    alert = fire(scene)

    assert alert.status == "firing"
    assert Delivery.objects.count() == 0
    assert alert.events.get().note.endswith(
        "(notifications held: silenced until 2026-03-10 13:00 UTC: deploying v8)"
    )


def test_an_expired_silence_holds_nothing():
    scene = make_scene()
    Silence.objects.create(rule=scene.rule, until=NOW, reason="over", created_at=NOW)

    fire(scene)

    assert Delivery.objects.count() == 1


def test_an_sla_maintenance_window_of_the_pipeline_holds_the_notification():
    scene = make_scene()
    MaintenanceWindow.objects.create(
        pipeline=scene.pipeline,
        start=NOW - dt.timedelta(hours=1),
        end=NOW + dt.timedelta(hours=1),
        reason="GPU node swap",
        created_at=NOW,
    )

    alert = fire(scene)

    assert Delivery.objects.count() == 0
    assert "maintenance: GPU node swap" in alert.events.get().note


THREE_DAYS = 4320


def burn(scene, bad_minutes: int, bad_per_10k: int) -> None:
    """Three days of 10,000 requests a minute against a 99.9% objective on the stage, the
    last ``bad_minutes`` of them with ``bad_per_10k`` slow ones."""
    objective = Objective.objects.create(
        team=scene.team,
        pipeline=scene.pipeline,
        stage=scene.stage,
        name="fast forward",
        threshold_ms=50,
        target_percent=Decimal("99.9"),
    )
    end = NOW.replace(second=0)
    SlaMinute.objects.bulk_create(
        SlaMinute(
            objective=objective,
            minute=end - (m + 1) * MINUTE,
            good=10_000 - (bad_per_10k if m < bad_minutes else 0),
            total=10_000,
        )
        for m in range(THREE_DAYS)
    )


@pytest.mark.parametrize(
    ("bad_minutes", "bad_per_10k", "fires"),
    [
        pytest.param(60, 144, True, id="14.4x-over-1h-fires"),
        pytest.param(60, 143, False, id="14.3x-over-1h-does-not"),
        pytest.param(360, 60, True, id="6x-over-6h-fires"),
        pytest.param(360, 59, False, id="5.9x-over-6h-does-not"),
    ],
)
def test_burn_rate_fires_at_the_sre_workbook_thresholds_from_exact_counters(
    bad_minutes, bad_per_10k, fires
):
    scene = make_scene(regression=False, burn_rate=True)
    burn(scene, bad_minutes, bad_per_10k)

    evaluate_rule(scene.rule.pk, NOW)

    assert Alert.objects.filter(status="firing").count() == (1 if fires else 0)


@pytest.mark.parametrize(
    ("rule_severity", "bad_minutes", "bad_per_10k", "told"),
    [
        pytest.param("ticket", 60, 144, Severity.PAGE, id="14.4x-pages-a-ticket-rule"),
        pytest.param("ticket", 360, 60, Severity.PAGE, id="6x-pages-a-ticket-rule"),
        pytest.param("page", 1440, 30, Severity.TICKET, id="3x-tickets-on-a-page-rule"),
        pytest.param("page", THREE_DAYS, 10, Severity.TICKET, id="1x-tickets-on-a-page-rule"),
    ],
)
def test_a_burn_rate_notice_carries_the_severity_of_the_condition_that_fired(
    rule_severity, bad_minutes, bad_per_10k, told
):
    scene = make_scene(regression=False, burn_rate=True, severity=rule_severity)
    burn(scene, bad_minutes, bad_per_10k)

    evaluate_rule(scene.rule.pk, NOW)

    notice = notice_of(Delivery.objects.get())
    assert (notice.severity, notice.action) == (told, "trigger")


def test_burn_rate_leaves_out_the_minutes_of_maintenance_windows():
    scene = make_scene(regression=False, burn_rate=True)
    objective = Objective.objects.create(
        team=scene.team,
        pipeline=scene.pipeline,
        stage=scene.stage,
        name="fast forward",
        threshold_ms=50,
        target_percent=Decimal("99.9"),
    )
    end = NOW.replace(second=0)
    SlaMinute.objects.bulk_create(
        SlaMinute(objective=objective, minute=end - (m + 1) * MINUTE, good=9_000, total=10_000)
        for m in range(60)
    )
    MaintenanceWindow.objects.create(
        objective=objective, start=end - 60 * MINUTE, end=end, reason="load test", created_at=NOW
    )

    evaluate_rule(scene.rule.pk, NOW)

    assert Alert.objects.count() == 0
