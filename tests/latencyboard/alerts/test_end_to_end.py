"""Issue #13's "done when", end to end on the real pieces: rollups of a model_forward
regression in PostgreSQL, baselines and evaluations in a real Celery worker, the outbox
sending to a signed webhook, Slack and PagerDuty receivers on loopback, an on-call
acknowledge through the UI, and the regression's end resolving it everywhere."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone
from standardwebhooks import Webhook

from latencyboard.alerts.models import Alert, Baseline, Channel
from latencyboard.alerts.tasks import compute_baselines, evaluate
from latencyboard.rollups.models import Rollup
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import HOOK_SECRET, make_scene, put_history, put_minutes
from tests.latencyboard.notifications.receiver import LOOPBACK_NETWORK, running_receiver
from tests.latencyboard.test_celery_worker import WORKER_ARGV, _wait_for
from tests.support import RunningProcess, start_process, stop_process

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


def test_a_model_forward_regression_is_told_acknowledged_and_resolved_on_every_receiver(
    worker: RunningProcess,
    client,
):
    with running_receiver() as hook, running_receiver() as slack, running_receiver() as pager:
        # Given a rule on fraud-scorer's model_forward telling a webhook, Slack and PagerDuty,
        # a week of history and ten minutes 1.5x slower in model_forward.
        now = timezone.now()
        scene = make_scene()
        scene.channel.target = hook.url
        scene.channel.save()
        scene.rule.channels.add(
            Channel.objects.create(team=scene.team, name="slack", kind="slack", target=slack.url),
            Channel.objects.create(
                team=scene.team,
                name="pd",
                kind="pagerduty",
                target=pager.url,
                secret=ROUTING_KEY,
            ),
        )
        put_history(scene, now=now + dt.timedelta(hours=1))
        put_minutes(scene, 10, scale=1.5, now=now)

        # When the worker computes the baselines and evaluates.
        compute_baselines.delay()
        assert _wait_for(lambda: Baseline.objects.filter(ready=True).exists()), worker.log()
        evaluate.delay()

        # Then one alert names the stage and reaches all three receivers.
        (webhook_trigger,) = hook.wait_for(1, timeout_s=30)
        (slack_trigger,) = slack.wait_for(1, timeout_s=30)
        (pager_trigger,) = pager.wait_for(1, timeout_s=30)
        alert = Alert.objects.get()
        assert (alert.stage, alert.status) == (scene.stage, "firing")
        signed = Webhook(HOOK_SECRET).verify(webhook_trigger.body, webhook_trigger.headers)
        assert (signed["type"], signed["data"]["stage"], signed["data"]["dedup_key"]) == (
            "alert.trigger",
            "model_forward",
            alert.dedup_key,
        )
        blocks = slack_trigger.json()["blocks"]
        assert blocks[0]["text"]["text"] == f"Firing: {alert.summary}"
        assert "model_forward" in slack_trigger.json()["text"]
        trigger = pager_trigger.json()
        assert (trigger["event_action"], trigger["dedup_key"], trigger["routing_key"]) == (
            "trigger",
            alert.dedup_key,
            ROUTING_KEY,
        )
        assert trigger["payload"]["severity"] == "critical"

        # When an on-call member acknowledges it on its page.
        oncall = make_user(scene.team, Role.ONCALL)
        client.force_login(oncall)
        acked = client.post(reverse("alerts:ack", kwargs={"alert_id": alert.pk}))

        # Then PagerDuty hears the acknowledge of the same incident.
        assert acked.status_code == 302
        acknowledge = pager.wait_for(2, timeout_s=30)[1].json()
        assert (acknowledge["event_action"], acknowledge["dedup_key"]) == (
            "acknowledge",
            alert.dedup_key,
        )

        # When the regression ends: clean minutes, evaluated until the alert resolves.
        Rollup.objects.filter(resolution="minute").delete()
        put_minutes(scene, 10, scale=1.0, now=timezone.now())
        for streak in range(1, settings.ALERT_CLEAN_EVALUATIONS + 1):
            evaluate.delay()
            assert _wait_for(
                lambda streak=streak: (
                    Alert.objects.filter(pk=alert.pk, clean_streak__gte=streak).exists()
                    or Alert.objects.filter(pk=alert.pk, status="resolved").exists()
                )
            ), worker.log()

        # Then every receiver hears it resolved, the same incident on PagerDuty.
        resolve = pager.wait_for(3, timeout_s=30)[2].json()
        assert (resolve["event_action"], resolve["dedup_key"]) == ("resolve", alert.dedup_key)
        resolved_slack = slack.wait_for(3, timeout_s=30)[2].json()
        assert resolved_slack["blocks"][0]["text"]["text"] == f"Resolved: {alert.summary}"
        resolved_hook = hook.wait_for(3, timeout_s=30)[2]
        signed = Webhook(HOOK_SECRET).verify(resolved_hook.body, resolved_hook.headers)
        assert signed["type"] == "alert.resolve"
        alert.refresh_from_db()
        assert alert.status == "resolved"
        assert list(alert.events.values_list("to_status", "who__username")) == [
            ("firing", None),
            ("acknowledged", oncall.get_username()),
            ("resolved", None),
        ]
        assert len(pager.requests) == 3
