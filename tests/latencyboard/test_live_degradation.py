"""Live updates without Redis, and after it returns: a real embedded Redis stopped and started."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.test import Client

from ingest.writer import SpanWriter
from latencyboard.asgi import application
from latencyboard.db import conninfo
from latencyboard.live.consumers import TRY_AGAIN_LATER
from latencyboard.live.groups import pipeline_group
from latencyboard.live.layers import redis_channel_layers
from latencyboard.live.services import PAUSE_AFTER_FAILED_SEND_SECONDS, publish
from latencyboard.local.embedded import EmbeddedRedis, free_port
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import services
from latencyboard.spans.models import IngestBatch
from tests.factories import make_requests, make_team, make_user
from tests.support import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

WRITE: dict[str, Any] = {"rejected": 0, "protocol": "test", "received_at": dt.datetime.now(dt.UTC)}


@pytest.fixture
def own_redis(settings, tmp_path: Path) -> Iterator[EmbeddedRedis]:
    """A Redis of this test only, as the channel layer's, so that it can be stopped."""
    redis = EmbeddedRedis(tmp_path / "redis", free_port(), log_path=tmp_path / "redis.log")
    redis.start()
    settings.CHANNEL_LAYERS = redis_channel_layers(redis.url)
    yield redis
    redis.stop()


def listen(group: str) -> str:
    layer = get_channel_layer()
    assert layer is not None
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(group, channel)
    return channel


def receive(channel: str, timeout: float) -> dict[str, Any]:
    layer = get_channel_layer()
    assert layer is not None

    async def within() -> dict[str, Any]:
        return await asyncio.wait_for(layer.receive(channel), timeout)

    return async_to_sync(within)()["event"]


def member_socket(pipeline: Pipeline) -> WebsocketCommunicator:
    client = Client()
    client.force_login(make_user(pipeline.team))  # type: ignore[arg-type]  # any user model
    cookie = f"{django_settings.SESSION_COOKIE_NAME}={client.cookies['sessionid'].value}"
    return WebsocketCommunicator(
        application,
        f"/ws/live/pipelines/{pipeline.pk}/",
        headers=[
            (b"origin", b"http://localhost"),
            (b"host", b"localhost"),
            (b"cookie", cookie.encode()),
        ],
    )


def test_sockets_close_to_retry_while_redis_is_down_and_hear_again_once_it_is_back(own_redis):
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="recommender", environment="")
    sockets = [member_socket(pipeline) for _ in range(3)]

    async def scenario() -> dict[str, Any]:
        # given an open live page
        open_page, refused, back = sockets
        assert (await open_page.connect())[0]
        await open_page.receive_json_from(timeout=5)
        # when Redis stops, the open page is told to retry later
        await sync_to_async(own_redis.stop)()
        dropped = await open_page.receive_output(timeout=10)
        # and a page opening meanwhile is refused, to retry later too
        while_down = await refused.connect(timeout=10)
        # when Redis is back, a reconnecting page hears the next event within 10 s
        await sync_to_async(own_redis.start)()
        returned = time.monotonic()
        assert (await back.connect(timeout=10))[0]
        await back.receive_json_from(timeout=5)
        await sync_to_async(publish)(pipeline_group(pipeline.pk), {"type": "points"})
        heard = await back.receive_json_from(timeout=5)
        await back.disconnect()
        return {
            "dropped": dropped,
            "while_down": while_down,
            "heard": heard,
            "resumed_within_10_s": time.monotonic() - returned < 10,
        }

    assert async_to_sync(scenario)() == {
        "dropped": {"type": "websocket.close", "code": TRY_AGAIN_LATER},
        "while_down": (False, TRY_AGAIN_LATER),
        "heard": {"type": "points"},
        "resumed_within_10_s": True,
    }


def test_a_fold_without_redis_commits_and_the_next_one_after_it_returns_publishes(own_redis):
    # given spans of a pipeline stored, and Redis down
    team = make_team()
    minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    writer = SpanWriter(conninfo(), max_connections=1)
    writer.write(team.pk, make_requests("recommender", 10, minute), **WRITE)
    pipeline = Pipeline.objects.get(team=team)
    own_redis.stop()

    # when the fold runs, then it folds everything and does not fail
    down = services.fold_until_idle(lambda: minute, seconds=10)
    assert (down.batches, down.spans) == (1, 30)
    assert not IngestBatch.objects.filter(team=team, rolled_up_at=None).exists()

    # when Redis returns and more spans are folded
    own_redis.start()
    page = listen(pipeline_group(pipeline.pk))
    # publishing pauses for a while after a failed send: until it publishes again
    wait_until(
        lambda: publish("elsewhere", {"type": "probe"}), timeout=2 * PAUSE_AFTER_FAILED_SEND_SECONDS
    )
    writer.write(
        team.pk, make_requests("recommender", 4, minute + dt.timedelta(seconds=30)), **WRITE
    )
    writer.close()
    services.fold_until_idle(lambda: minute, seconds=10)

    # then the page hears the minute with every span of both folds
    event = receive(page, timeout=10)
    assert event["type"] == "points"
    assert [p["n"] for p in event["series"][0]["points"]] == [14]
