"""One team's slow receivers cannot hold another team's page: the notifier's delivery slots
are shared per team. Real Redis broker, a real notifier worker with two slots (as `make run`
starts it), receivers on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from latencyboard.alerts.models import Alert, AlertStatus, Channel, Rule
from latencyboard.alerts.services import record_event
from latencyboard.pipelines.models import Pipeline
from latencyboard.teams.models import Team
from tests.factories import incident_for, make_team
from tests.latencyboard.alerts.scenes import HOOK_SECRET
from tests.latencyboard.notifications.receiver import (
    LOOPBACK_NETWORK,
    Answer,
    Receiver,
    running_receiver,
)
from tests.support import RunningProcess, start_worker, stop_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]

ATTEMPT_DEADLINE_S = 4
SLOTS = 2


@pytest.fixture
def notifier(child_env: dict[str, str], tmp_path: Path) -> Iterator[RunningProcess]:
    env = {
        **child_env,
        "ALERT_DELIVERY_TIMEOUT_SECONDS": str(ATTEMPT_DEADLINE_S),
        "NOTIFICATION_ALLOWED_NETWORKS": LOOPBACK_NETWORK,
        "NOTIFICATION_SLOTS": str(SLOTS),
    }
    options = ("--concurrency", str(SLOTS), "--queues", "notifications")
    running = start_worker(env, tmp_path / "notifier.log", *options, pool="prefork")
    yield running
    stop_process(running)


def _fire(team: Team, targets: list[str]) -> None:
    """An alert of a pipeline of ``team`` fires: its incident's page is queued for a webhook
    channel at each of ``targets``."""
    pipeline = Pipeline.objects.create(team=team, service_name=f"{team.name}-scorer")
    rule = Rule.objects.create(pipeline=pipeline, name="tail")
    for n, target in enumerate(targets):
        rule.channels.add(
            Channel.objects.create(
                team=team,
                name=f"hook {n}",
                kind="webhook",
                target=target,
                secret=HOOK_SECRET,
            )
        )
    now = timezone.now()
    alert = Alert.objects.create(
        rule=rule,
        pipeline=pipeline,
        incident=incident_for(pipeline, AlertStatus.FIRING, now),
        dedup_key=f"{team.name}-tail",
        status=AlertStatus.FIRING,
        summary=f"{pipeline} end to end: p99 20.0 → 30.0 ms (+50%)",
        started_at=now,
    )
    record_event(alert, "", AlertStatus.FIRING, now, note="fired")


def _slow(receiver: Receiver) -> Receiver:
    receiver.default = Answer(200, delay_s=ATTEMPT_DEADLINE_S)
    return receiver


def test_a_team_with_twenty_slow_receivers_does_not_hold_another_teams_page(notifier):
    with running_receiver() as slow, running_receiver() as fast:
        # given team B's incident paged twenty webhooks that each hold the request for the
        # whole attempt deadline, and the notifier is sending them
        _fire(make_team("b"), [f"{_slow(slow).url}?channel={n}" for n in range(20)])
        slow.wait_for(1, timeout_s=30)

        # when team A's incident opens, paging its one webhook
        team_a = make_team("a")
        _fire(team_a, [fast.url])

        # then team A's webhook hears of it within 2 s
        page = fast.wait_for(1, timeout_s=2.0)[0].json()
        assert page["type"] == "alert.trigger"
        assert page["data"]["team"] == team_a.name
        # and team B's first receiver still holds the only slot B was given
        assert len(slow.requests) == 1
