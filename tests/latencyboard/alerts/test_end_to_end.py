"""Issues #13's and #26's "done when", end to end on the real pieces: rollups of a
model_forward regression (and so of end to end) in PostgreSQL, baselines and evaluations in a
real Celery worker, one incident, the outbox sending to a webhook signed with the secret its
creation showed once, Slack and PagerDuty receivers on loopback, each told once, an on-call
acknowledge through the UI, and the regression's end resolving it everywhere."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator

import pytest
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from latencyboard.alerts.models import Alert, AlertEvent, Baseline, Channel, Delivery, Incident
from latencyboard.alerts.tasks import compute_baselines, evaluate
from latencyboard.rollups.models import Rollup
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import Scene, make_scene, put_history, put_minutes
from tests.latencyboard.notifications.receiver import (
    LOOPBACK_NETWORK,
    allow_loopback_receivers,
    running_receiver,
)
from tests.latencyboard.test_celery_worker import WORKER_ARGV
from tests.support import RunningProcess, start_process, stop_process, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]

ROUTING_KEY = "R0UT1NGKEY0123456789abcdef012345"


@pytest.fixture(scope="module")
def worker(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningProcess]:
    """A worker that may deliver to the receivers on loopback."""
    env = {**child_env, "NOTIFICATION_ALLOWED_NETWORKS": LOOPBACK_NETWORK}
    running = start_process(WORKER_ARGV, env, tmp_path_factory.mktemp("worker") / "worker.log")
    yield running
    stop_process(running)


def test_one_regression_is_one_incident_told_once_acknowledged_and_resolved_everywhere(
    worker: RunningProcess,
    client,
    settings,
):
    allow_loopback_receivers(settings)
    with running_receiver() as hook, running_receiver() as slack, running_receiver() as pager:
        # Given a rule on fraud-scorer's model_forward and end to end telling a webhook made
        # through the API (its generated secret shown once), Slack and PagerDuty, a day of
        # history, and ten minutes 1.5x slower in model_forward and so end to end.
        now = timezone.now()
        scene = make_scene()
        admin = make_user(scene.team, Role.ADMIN)
        client.force_login(admin)
        created = client.post(
            reverse("api-alert-channels"),
            {"team": scene.team.pk, "name": "hook", "kind": "webhook", "target": hook.url},
            content_type="application/json",
        ).json()
        shown_secret = created["secret"]
        scene.rule.channels.set(
            [
                Channel.objects.get(pk=created["id"]),
                Channel.objects.create(
                    team=scene.team, name="slack", kind="slack", target=slack.url
                ),
                Channel.objects.create(
                    team=scene.team,
                    name="pd",
                    kind="pagerduty",
                    target=pager.url,
                    secret=ROUTING_KEY,
                ),
            ]
        )
        for watched in (scene, end_to_end(scene)):
            put_history(watched, now=now + dt.timedelta(hours=1))
            put_minutes(watched, 10, scale=1.5, now=now)

        # When the worker computes the baselines and evaluates three minutes in a row.
        compute_baselines.delay()
        wait_until(
            lambda: Baseline.objects.filter(ready=True).count() == 2,
            timeout=30,
            message=worker.log,
        )
        evaluate.delay()
        wait_until(lambda: Alert.objects.count() == 2, timeout=30, message=worker.log)
        for _ in range(2):
            evaluate_and_wait(worker)

        # Then both stages fire into one incident, and each receiver hears it once.
        wait_until(all_delivered, timeout=30, message=worker.log)
        (incident,) = Incident.objects.all()
        alerts = list(incident.alerts.order_by("pk"))
        assert sorted(alert.stage_name for alert in alerts) == ["end-to-end", "model_forward"]
        assert incident.title.startswith("fraud-scorer · model_forward: p")
        assert (len(hook.requests), len(slack.requests), len(pager.requests)) == (1, 1, 1)
        signed = Webhook(shown_secret).verify(hook.requests[0].body, hook.requests[0].headers)
        assert (signed["type"], signed["data"]["dedup_key"], signed["data"]["title"]) == (
            "alert.trigger",
            incident.dedup_key,
            incident.title,
        )
        assert set(signed["data"]["numbers"]) == {
            "baseline_ms",
            "current_ms",
            "effect_pct",
            "effect_pct_low",
            "effect_pct_high",
            "p_value",
            "n",
            "k",
        }
        assert set(signed["data"]["links"]) == {"pipeline", "traces"}
        assert slack.requests[0].json()["blocks"][0]["text"]["text"] == (
            f"Firing: {incident.title}"
        )
        trigger = pager.requests[0].json()
        assert (trigger["event_action"], trigger["dedup_key"], trigger["routing_key"]) == (
            "trigger",
            incident.dedup_key,
            ROUTING_KEY,
        )

        # When an on-call member acknowledges one of its alerts on its page, with a note.
        oncall = make_user(scene.team, Role.ONCALL)
        client.force_login(oncall)
        acked = client.post(
            reverse("alerts:ack", kwargs={"alert_id": alerts[0].pk}), {"note": "on it"}
        )

        # Then PagerDuty hears the incident acknowledged, once.
        assert acked.status_code == 302
        acknowledge = pager.wait_for(2, timeout_s=30)[1].json()
        assert (acknowledge["event_action"], acknowledge["dedup_key"]) == (
            "acknowledge",
            incident.dedup_key,
        )
        incident.refresh_from_db()
        assert incident.status == "acknowledged"

        # When the regression ends: clean minutes, evaluated until the incident resolves.
        Rollup.objects.filter(resolution="minute").delete()
        for watched in (scene, end_to_end(scene)):
            put_minutes(watched, 10, scale=1.0, now=timezone.now())
        for _ in range(settings.ALERT_CLEAN_EVALUATIONS):
            evaluate_and_wait(worker)

        # Then every receiver hears it resolved once, under the incident's key.
        wait_until(lambda: Incident.objects.filter(status="resolved").exists(), timeout=30)
        wait_until(all_delivered, timeout=30, message=worker.log)
        assert (len(hook.requests), len(slack.requests), len(pager.requests)) == (3, 3, 3)
        resolve = pager.requests[2].json()
        assert (resolve["event_action"], resolve["dedup_key"]) == ("resolve", incident.dedup_key)
        assert slack.requests[2].json()["blocks"][0]["text"]["text"] == (
            f"Resolved: {incident.title}"
        )
        verified = [Webhook(shown_secret).verify(r.body, r.headers) for r in hook.requests]
        assert [body["type"] for body in verified] == [
            "alert.trigger",
            "alert.acknowledge",
            "alert.resolve",
        ]
        assert list(
            AlertEvent.objects.filter(alert__incident=incident)
            .order_by("at", "pk")
            .values_list("alert__stage__name", "to_status", "who__username")
        ) == [
            ("model_forward", "firing", None),
            (None, "firing", None),
            ("model_forward", "acknowledged", oncall.get_username()),
            (None, "acknowledged", oncall.get_username()),
            ("model_forward", "resolved", None),
            (None, "resolved", None),
        ]


def evaluate_and_wait(worker: RunningProcess) -> None:
    """One evaluation in the worker, waited for: it refreshes every open alert's current
    figures (or resolves it)."""
    before = dict(Alert.objects.values_list("pk", "current_at"))
    evaluate.delay()

    def done() -> bool:
        return all(
            status == "resolved" or at != before[pk]
            for pk, status, at in Alert.objects.values_list("pk", "status", "current_at")
        )

    wait_until(done, timeout=30, message=worker.log)


def end_to_end(scene: Scene) -> Scene:
    """The scene's pipeline end to end: its rollups have no stage."""
    return dataclasses.replace(scene, stage=None)  # type: ignore[arg-type]


def all_delivered() -> bool:
    return not Delivery.objects.exclude(status="delivered").exists()
