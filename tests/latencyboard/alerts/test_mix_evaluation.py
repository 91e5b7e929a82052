"""Mix-aware alert evidence on real rollup and cohort rollup rows in PostgreSQL: a new slower
version is that deploy's regression, a traffic shift to a known slower version is a mix
shift, a slowdown within one version names it, on the alert, its page and its notice."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.urls import reverse

from latencyboard.alerts.baselines import compute_baselines
from latencyboard.alerts.evaluation import evaluate_rule
from latencyboard.alerts.models import Alert, Delivery
from latencyboard.alerts.outbox import notice_of
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import (
    BASELINE_AT,
    MINUTE,
    NOW,
    Scene,
    latencies,
    make_scene,
    put_history,
    put_minutes,
    put_versions,
)

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)


def put_version_history(scene: Scene, per_hour: dict[str, int], slower: float = 1.0) -> None:
    """24 hours of the stage, as :func:`put_history`, split between versions, the last
    ``slower`` times the others."""
    top = NOW.replace(minute=0, second=0, microsecond=0) - HOUR
    last = len(per_hour) - 1
    for hour in range(1, 25):
        versions = {
            value: latencies(n, hour * 10 + i, slower if i == last else 1.0)
            for i, (value, n) in enumerate(per_hour.items())
        }
        put_versions(scene, "hour", top - hour * HOUR, versions)


def put_version_minutes(scene: Scene, per_minute: dict[str, tuple[int, float]]) -> None:
    """The 10 complete minutes before NOW, each version's count and slowdown."""
    end = NOW.replace(second=0, microsecond=0)
    for m in range(1, 11):
        versions = {
            value: latencies(n, 1000 + m * 10 + i, scale)
            for i, (value, (n, scale)) in enumerate(per_minute.items())
        }
        put_versions(scene, "minute", end - m * MINUTE, versions)


def evaluate(scene: Scene) -> Alert:
    compute_baselines(BASELINE_AT)
    evaluate_rule(scene.rule.pk, NOW)
    return Alert.objects.get()


def test_a_new_slower_version_taking_traffic_is_a_regression_of_that_version(client):
    # given a day of v7 only, then 60% of the last 10 minutes on a new v8, 35% slower
    scene = make_scene()
    put_version_history(scene, {"v7": 2000})
    put_version_minutes(scene, {"v7": (48, 1.0), "v8": (72, 1.35)})

    # when the rule is evaluated
    alert = evaluate(scene)

    # then the evidence and the summary name v8's regression against v7, on the page and in
    # the notice
    mix = alert.evidence["regression"]["mix"]
    assert (mix["attribute"], mix["label"], mix["cohort"]) == ("model.version", "regression", "v8")
    assert [(c["cohort"], c["n"], c["regressed"]) for c in mix["cohorts"]] == [
        ("v7", 480, False),
        ("v8", 720, True),
    ]
    assert [round(c["current_share"], 2) for c in mix["cohorts"]] == [0.4, 0.6]
    assert re.fullmatch(
        r"fraud-scorer · model_forward: regression in model.version v8, now 60% of traffic: "
        r"p\d+ \+\d+% over v7 \([\d.]+ → [\d.]+ ms\)",
        alert.summary,
    )
    client.force_login(make_user(scene.team, Role.VIEWER))
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk})).content.decode()
    assert mix["message"] in page
    assert "v7 100% → 40%" in page
    assert "v8 0% → 60%" in page
    notice = notice_of(Delivery.objects.get())
    assert notice.title == alert.summary
    assert dict(notice.figures)["mix by model.version"] == mix["message"]


def test_an_open_alert_shows_the_rollouts_share_now(client):
    # given the alert above, fired with v8 at 60%
    scene = make_scene()
    put_version_history(scene, {"v7": 2000})
    put_version_minutes(scene, {"v7": (48, 1.0), "v8": (72, 1.35)})
    alert = evaluate(scene)
    # when the rollout reaches 100% and the rule is evaluated again, 10 minutes on
    later = NOW + 10 * MINUTE
    end = later.replace(second=0, microsecond=0)
    for m in range(1, 11):
        put_versions(scene, "minute", end - m * MINUTE, {"v8": latencies(120, 2000 + m, 1.35)})
    evaluate_rule(scene.rule.pk, later)
    alert.refresh_from_db()
    # then the alert keeps its words at firing and shows the split now
    now = alert.current["mix"]
    assert now["message"].startswith("regression in model.version v8, now 100% of traffic: ")
    assert alert.evidence["regression"]["mix"]["message"].startswith(
        "regression in model.version v8, now 60% of traffic: "
    )
    client.force_login(make_user(scene.team, Role.VIEWER))
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk})).content.decode()
    assert f"now: {now['message']}" in page
    assert "v8 100%" in page


def test_traffic_moving_to_a_known_slower_version_is_a_mix_shift_not_a_regression():
    # given a day with v8 at 30% and twice as slow, then v8 at 80% of the last 10 minutes,
    # no version's own figures changed
    scene = make_scene()
    put_version_history(scene, {"v7": 1400, "v8": 600}, slower=2.0)
    put_version_minutes(scene, {"v7": (40, 1.0), "v8": (160, 2.0)})

    # when the rule is evaluated
    alert = evaluate(scene)

    # then it is a mix shift to v8
    mix = alert.evidence["regression"]["mix"]
    assert (mix["label"], mix["cohort"]) == ("mix_shift", "v8")
    assert [(c["cohort"], c["regressed"]) for c in mix["cohorts"]] == [
        ("v7", False),
        ("v8", False),
    ]
    assert re.fullmatch(
        r"fraud-scorer · model_forward: mix shift: 80% of traffic now on model.version v8, "
        r"whose p\d+ is \d+% above v7",
        alert.summary,
    )


def test_a_slowdown_within_one_version_is_a_regression_naming_that_version():
    # given a day split evenly between v7 and v8, then v8 50% slower at the same split
    scene = make_scene()
    put_version_history(scene, {"v7": 1000, "v8": 1000})
    put_version_minutes(scene, {"v7": (60, 1.0), "v8": (60, 1.5)})

    # when the rule is evaluated
    alert = evaluate(scene)

    # then it is a regression inside v8, v7 unchanged, the mix explaining nothing
    mix = alert.evidence["regression"]["mix"]
    assert (mix["label"], mix["cohort"]) == ("regression", "v8")
    assert [(c["cohort"], c["regressed"]) for c in mix["cohorts"]] == [
        ("v7", False),
        ("v8", True),
    ]
    assert abs(mix["mix_excess"]) < 1.0
    assert re.fullmatch(
        r"fraud-scorer · model_forward: regression in model.version v8: p\d+ [\d.]+ → [\d.]+ ms "
        r"\(\+\d+%\)",
        alert.summary,
    )


def test_without_cohort_rows_the_mix_is_not_assessed(client):
    # given a slower stage whose spans carry no cohort attribute
    scene = make_scene()
    put_history(scene)
    put_minutes(scene, 10, scale=1.5)

    # when the rule is evaluated
    alert = evaluate(scene)

    # then the evidence has no mix, the summary gives the stage's figures, as before cohorts
    assert alert.evidence["regression"]["mix"] is None
    assert alert.summary.startswith("fraud-scorer · model_forward: p")
    client.force_login(make_user(scene.team, Role.VIEWER))
    page = client.get(reverse("alerts:detail", kwargs={"alert_id": alert.pk})).content.decode()
    assert "mix not assessed" in page
    assert dict(notice_of(Delivery.objects.get()).figures)["mix"] == "not assessed"


def test_against_the_same_hours_the_versions_shares_are_those_hours(client):
    # given 8 days where v8 serves half the traffic from 10:00 to 13:00 and none otherwise,
    scene = make_scene()
    top = BASELINE_AT.replace(minute=0, second=0, microsecond=0)
    for hour in range(1, 8 * 24 + 1):
        start = top - hour * HOUR
        busy = 10 <= start.hour < 13
        versions = {"v7": latencies(1000 if busy else 2000, hour * 10)}
        if busy:
            versions["v8"] = latencies(1000, hour * 10 + 1)
        put_versions(scene, "hour", start, versions)
    # and in the last 10 minutes (before noon) v8, at its usual half, is 50% slower
    put_version_minutes(scene, {"v7": (60, 1.0), "v8": (60, 1.5)})

    # when the rule is evaluated against the same hours of the previous days
    alert = evaluate(scene)

    # then the versions' baseline shares are those hours' (half each, not v8's 6% of the
    # whole days), so the split names v8's regression, not a move of traffic to it
    mix = alert.evidence["regression"]["mix"]
    assert alert.evidence["regression"]["baseline_seasonal"] is True
    assert [(c["cohort"], round(c["baseline_share"], 2)) for c in mix["cohorts"]] == [
        ("v7", 0.5),
        ("v8", 0.5),
    ]
    assert (mix["label"], mix["cohort"]) == ("regression", "v8")
