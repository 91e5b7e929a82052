"""The SLA page's burn rates: how fast the budget is spent over 1 h, 6 h and 3 d, from the
exact counters without maintenance minutes, and when the budget left runs out at that pace."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from latencyboard.pipelines.models import Pipeline
from latencyboard.sla import burn, queries
from latencyboard.sla.models import MaintenanceWindow, Objective, SlaMinute
from tests.factories import make_team

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
