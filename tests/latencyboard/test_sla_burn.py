"""The SLA page's burn rates: how fast the budget is spent over 1 h, 6 h and 3 d, from the
exact counters without maintenance minutes, and when the budget left runs out at that pace."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert
from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import burn, queries
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute
from latencyboard.windows import floor_minute
from tests.factories import make_team, make_user
from tests.latencyboard.alerts.scenes import make_scene

NOW = dt.datetime(2026, 3, 2, 12, 0, 30, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)


@pytest.mark.parametrize(
    ("good", "total", "remaining", "rate", "days"),
    [
        pytest.param(990, 1000, Decimal(100), 1.0, 100 / 10 / 24, id="1x"),
        pytest.param(856, 1000, Decimal(144), 14.4, 1 / 24, id="14.4x-spends-the-rest-in-an-hour"),
        pytest.param(1000, 1000, Decimal(10), 0.0, None, id="nothing-bad-is-never-spent"),
        pytest.param(900, 1000, Decimal(-5), 10.0, 0.0, id="already-overspent"),
        pytest.param(0, 0, Decimal(10), None, None, id="no-traffic"),
    ],
)
def test_burn_over_an_hour(good, total, remaining, rate, days):
    found = burn.burn("1 h", 60, good, total, Decimal("99"), remaining)

    assert found.rate == (None if rate is None else pytest.approx(rate))
    assert found.exhausted_in_days == (None if days is None else pytest.approx(days))


@pytest.mark.django_db
def test_burn_rates_read_the_counters_of_each_window_without_maintenance():
    # given an objective with 100 requests a minute for three days, 2 bad in each of the last
    # 60 minutes, 1 bad a minute before, and a maintenance window over the last 30 minutes
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="fraud-scorer")
    objective = Objective.objects.create(
        team=team, pipeline=pipeline, name="o", threshold_ms=60.0, target_percent=Decimal("99")
    )
    end = NOW.replace(second=0)
    SlaMinute.objects.bulk_create(
        SlaMinute(
            objective=objective,
            minute=end - (i + 1) * MINUTE,
            good=98 if i < 60 else 99,
            total=100,
        )
        for i in range(3 * 24 * 60)
    )
    MaintenanceWindow.objects.create(
        objective=objective, start=end - 30 * MINUTE, end=end, reason="upgrade", created_at=NOW
    )
    budget = queries.window_budget(objective, NOW)

    found = queries.burn_rates(objective, NOW, budget.summary)

    # then each window counts its own minutes, the maintenance ones left out
    assert [(b.label, b.total, b.bad) for b in found] == [
        ("1 h", 3000, 60),
        ("6 h", 33000, 360),
        ("3 d", 429000, 4320),
    ]
    assert [b.rate for b in found] == [
        pytest.approx(2.0),
        pytest.approx(360 / 330),
        pytest.approx(4320 / 4290),
    ]


@pytest.mark.django_db
def test_the_sla_page_and_the_burn_rate_alert_quote_the_same_burn_over_the_same_minutes(client):
    # given three days of counters of a 99.9% objective on a stage a burn-rate rule watches,
    # a burn that varies minute by minute over the last six hours, a maintenance window over
    # part of the last hour and a deleted one (which leaves out nothing)
    scene = make_scene(regression=False, burn_rate=True)
    objective = Objective.objects.create(
        team=scene.team,
        pipeline=scene.pipeline,
        stage=scene.stage,
        name="fast forward",
        threshold_ms=50,
        target_percent=Decimal("99.9"),
    )
    # Counters reach past the page's minute, so a minute turning during the test changes nothing.
    end = floor_minute(timezone.now()) + 5 * MINUTE
    SlaMinute.objects.bulk_create(
        SlaMinute(
            objective=objective,
            minute=end - (m + 1) * MINUTE,
            good=10_000 - (100 + 37 * (m % 7) if m < 6 * 60 else m % 3),
            total=10_000,
        )
        for m in range(3 * 24 * 60 + 10)
    )
    MaintenanceWindow.objects.create(
        objective=objective,
        start=end - 50 * MINUTE,
        end=end - 25 * MINUTE,
        reason="upgrade",
        created_at=end,
    )
    MaintenanceWindow.objects.create(
        pipeline=scene.pipeline,
        start=end - 5 * 60 * MINUTE,
        end=end - 4 * 60 * MINUTE,
        reason="called off",
        created_at=end,
        deleted_at=end,
    )

    # when a member opens the SLA page and the alert is evaluated at the page's minute
    client.force_login(make_user(scene.team))
    page = client.get(f"/slas/{objective.pk}/")
    page_minute = page.context["budget"].window.end - MINUTE
    evaluate_rule(scene.rule.pk, page_minute + dt.timedelta(seconds=30))

    # then the alert's burn over each of the page's windows is the page's figure
    conditions = Alert.objects.get().evidence["burn_rate"]["conditions"]
    alert = {
        c["long_minutes"]: (c["long_total"], c["long_bad"], c["long_burn_rate"]) for c in conditions
    }
    shown = {b.minutes: (b.total, b.bad, b.rate) for b in page.context["burns"]}
    assert shown == {minutes: alert[minutes] for minutes in (60, 360, 3 * 24 * 60)}
    assert shown[60][0] == 35 * 10_000
