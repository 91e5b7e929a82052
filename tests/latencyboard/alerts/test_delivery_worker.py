"""A slow receiver cannot stall the fold: deliveries go to a queue and worker of their own,
each cut at one deadline. Real Redis broker, two real Celery workers, a receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import timezone

from ingest.writer import SpanWriter
from latencyboard.alerts.models import Channel, Delivery
from latencyboard.alerts.services import send_test
from latencyboard.db import conninfo
from latencyboard.rollups.models import Rollup
from latencyboard.rollups.tasks import fold
from latencyboard.teams.models import Role
from tests.factories import make_requests, make_team, make_user
from tests.latencyboard.notifications.receiver import LOOPBACK_NETWORK, trickling_receiver
from tests.support import RunningProcess, start_worker, stop_process, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]

# Longer than the byte interval of the receiver below: a per-read timeout never fires.
DELIVERY_TIMEOUT_S = 5
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def _worker(env: dict[str, str], log: Path, queues: str) -> RunningProcess:
    return start_worker(env, log, "--queues", queues, "--hostname", f"{queues}@%h")


@pytest.fixture
def workers(child_env: dict[str, str], tmp_path: Path) -> Iterator[tuple[RunningProcess, ...]]:
    """The two workers `make run` starts: the fold's, and the notifications'."""
    env = {
        **child_env,
        "ALERT_DELIVERY_TIMEOUT_SECONDS": str(DELIVERY_TIMEOUT_S),
        "NOTIFICATION_ALLOWED_NETWORKS": LOOPBACK_NETWORK,
    }
    started = (
        _worker(env, tmp_path / "worker.log", "celery,reports"),
        _worker(env, tmp_path / "notifier.log", "notifications"),
    )
    yield started
    for running in started:
        stop_process(running)


def test_a_receiver_trickling_its_answer_neither_stalls_the_fold_nor_holds_its_worker(workers):
    worker, notifier = workers
    # given team B's admin clicked "Send test" twice on a channel whose receiver answers one
    # byte every 2 s (a whole answer takes about two minutes)
    team_b = make_team("b")
    admin = make_user(team_b, Role.ADMIN)
    with trickling_receiver(byte_every_s=2.0) as url:
        channel = Channel.objects.create(
            team=team_b, name="slow", kind="webhook", target=url, secret=SECRET
        )
        for _ in range(2):
            send_test(channel, admin, timezone.now())  # type: ignore[arg-type]

        # when team A's spans are stored and a fold is sent through the broker
        team_a = make_team("a")
        writer = SpanWriter(conninfo(), max_connections=1)
        try:
            spans = make_requests("checkout", 3, timezone.now().replace(second=0, microsecond=0))
            writer.write(team_a.id, spans, rejected=0, protocol="test", received_at=timezone.now())
        finally:
            writer.close()
        fold.delay()

        # then team A's spans are folded while the deliveries are being attempted
        wait_until(
            lambda: Rollup.objects.filter(team=team_a).exists(), timeout=60, message=worker.log
        )
        # and each delivery is cut at its deadline, to be retried later
        wait_until(
            lambda: Delivery.objects.filter(channel=channel, status="retrying").count() == 2,
            timeout=60,
            message=notifier.log,
        )
    details = set(Delivery.objects.filter(channel=channel).values_list("detail", flat=True))
    assert details == {f"timed out after {DELIVERY_TIMEOUT_S} s"}
    assert "Task alerts.send_deliveries[" in notifier.log()
    assert "Task alerts.send_deliveries[" not in worker.log()
