"""A Redis that stops answering (SIGSTOP: connections open, no replies) must not hold the
requests that enqueue work: acknowledging and resolving commit and answer."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kombu.pools
import pytest
from django.db import connections
from django.test import Client
from django.urls import reverse

from latencyboard.alerts.models import AlertStatus
from latencyboard.celery import app
from latencyboard.local.embedded import EmbeddedRedis, free_port
from latencyboard.teams.models import Role
from tests.factories import make_user
from tests.latencyboard.alerts.scenes import make_scene
from tests.latencyboard.alerts.test_api import firing

pytestmark = pytest.mark.django_db(transaction=True)

# Far beyond the broker's timeouts and retries; a request still waiting then is hung.
HUNG_AFTER_SECONDS = 60


@pytest.fixture
def frozen_broker(scratch_dir: Path, settings: Any) -> Iterator[None]:
    """The Celery broker is a Redis of its own, frozen for the test."""
    redis = EmbeddedRedis(scratch_dir / "redis", free_port(), log_path=scratch_dir / "redis.log")
    redis.start()
    assert redis.process is not None
    kept = app.conf.broker_url
    _publish_to(redis.url)
    os.kill(redis.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(redis.process.pid, signal.SIGCONT)
        _publish_to(kept)
        redis.stop()


def _publish_to(broker_url: str) -> None:
    """Point the app's publishing at ``broker_url``. Kombu keeps connection and producer pools
    per broker URL in process-wide registries: they are closed and emptied (not only the app's
    own reference), or the next test's send acquires from a closed pool."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None
    app.conf.broker_url = broker_url


def _post_in_time(client: Client, url: str) -> int | None:
    """The status of a POST to ``url``, or None if it had no answer in HUNG_AFTER_SECONDS."""
    answers: list[int] = []

    def post() -> None:
        try:
            answers.append(client.post(url).status_code)
        finally:
            connections.close_all()

    poster = threading.Thread(target=post)
    poster.daemon = True
    poster.start()
    poster.join(HUNG_AFTER_SECONDS)
    return answers[0] if answers else None


def test_acknowledge_and_resolve_answer_while_redis_is_frozen(frozen_broker: None) -> None:
    # given a firing alert and its on-call, and the broker frozen
    scene = make_scene()
    alert = firing(scene)
    client = Client()
    client.force_login(make_user(scene.team, Role.ONCALL))  # type: ignore[arg-type]

    # when they acknowledge it, then resolve it
    acked = _post_in_time(client, reverse("api-alert-ack", kwargs={"alert_id": alert.pk}))
    resolved = _post_in_time(client, reverse("api-alert-resolve", kwargs={"alert_id": alert.pk}))

    # then both answer, and the alert is resolved with its notifications queued in the outbox
    assert (acked, resolved) == (200, 200)
    alert.refresh_from_db()
    assert alert.status == AlertStatus.RESOLVED
    assert alert.events.filter(to_status__in=["acknowledged", "resolved"]).count() == 2
