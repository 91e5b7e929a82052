"""The live sockets through the real ASGI application and the real Redis channel layer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from latencyboard.asgi import application
from latencyboard.live.consumers import NOT_FOUND, SIGNED_OUT
from latencyboard.live.groups import pipeline_group, team_group
from latencyboard.live.layers import SOCKET_TIMEOUT_SECONDS
from latencyboard.pipelines.models import Pipeline
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")
HOST = (b"host", b"localhost")


def session_cookie(user: AbstractBaseUser) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]  # any user model
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode()


def communicator(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[ORIGIN, HOST, *headers])


async def group_send(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(group, {"type": "live.event", "event": event})


def test_a_signed_in_socket_stays_open_and_keeps_receiving_through_long_idle_spells():
    # Each spell outlasts the layer's blocking pop and the Redis client's read timeout.
    idle_s = SOCKET_TIMEOUT_SECONDS + 5
    team = make_team()
    cookie = session_cookie(make_user(team))

    async def scenario() -> list[dict[str, Any]]:
        socket = communicator("/ws/live/", cookie)
        connected, _ = await socket.connect()
        assert connected
        await socket.receive_json_from()  # hello
        received = []
        for spell in range(1, 3):
            await asyncio.sleep(idle_s)
            await group_send(team_group(team.pk), {"type": "ping", "spell": spell})
            received.append(await socket.receive_json_from(timeout=5))
        await socket.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert received == [{"type": "ping", "spell": n} for n in range(1, 3)]


def make_pipeline(team_id: int, service: str = "recommender") -> Pipeline:
    return Pipeline.objects.create(team_id=team_id, service_name=service, environment="")


@pytest.mark.parametrize("path", ["/ws/live/", "/ws/live/pipelines/1/"])
def test_an_anonymous_socket_is_closed_as_signed_out(path):
    async def scenario() -> dict[str, Any]:
        socket = communicator(path)
        await socket.connect()
        closing = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return closing

    closing = async_to_sync(scenario)()

    assert closing == {"type": "websocket.close", "code": SIGNED_OUT}


def test_an_outsider_s_subscription_to_a_pipeline_is_refused_and_hears_nothing():
    # given a pipeline of one team, and a user of another team only
    team, other = make_team(), make_team()
    pipeline = make_pipeline(team.pk)
    outsider = session_cookie(make_user(other))

    async def scenario() -> tuple[dict[str, Any], bool]:
        socket = communicator(f"/ws/live/pipelines/{pipeline.pk}/", outsider)
        await socket.connect()
        closing = await socket.receive_output(timeout=5)
        # when the pipeline publishes
        await group_send(pipeline_group(pipeline.pk), {"type": "points", "secret": 1})
        nothing = await socket.receive_nothing(timeout=1)
        await socket.disconnect()
        return closing, nothing

    closing, nothing = async_to_sync(scenario)()

    # then the socket was closed as for a pipeline that does not exist, and heard nothing
    assert closing == {"type": "websocket.close", "code": NOT_FOUND}
    assert nothing


def test_a_missing_pipeline_is_refused_as_an_outsider_s_is():
    cookie = session_cookie(make_user(make_team()))

    async def scenario() -> dict[str, Any]:
        socket = communicator("/ws/live/pipelines/999999999/", cookie)
        await socket.connect()
        closing = await socket.receive_output(timeout=5)
        await socket.disconnect()
        return closing

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": NOT_FOUND}


def test_a_member_hears_their_pipeline_and_not_another_of_the_same_team():
    team = make_team()
    watched, other = make_pipeline(team.pk), make_pipeline(team.pk, "ranker")
    member = session_cookie(make_user(team))

    async def scenario() -> list[dict[str, Any]]:
        socket = communicator(f"/ws/live/pipelines/{watched.pk}/", member)
        connected, _ = await socket.connect()
        assert connected
        hello = await socket.receive_json_from(timeout=5)
        await group_send(pipeline_group(other.pk), {"type": "points", "pipeline": other.pk})
        await group_send(pipeline_group(watched.pk), {"type": "points", "pipeline": watched.pk})
        heard = await socket.receive_json_from(timeout=5)
        silent = await socket.receive_nothing(timeout=1)
        await socket.disconnect()
        return [hello, heard, {"silent": silent}]

    assert async_to_sync(scenario)() == [
        {"type": "hello"},
        {"type": "points", "pipeline": watched.pk},
        {"silent": True},
    ]


@pytest.mark.parametrize(
    ("origin", "host", "scheme", "opens"),
    [
        ("http://localhost:8000", "localhost:8000", "ws", True),
        ("https://localhost", "localhost", "wss", True),
        ("http://localhost", "localhost:80", "ws", True),
        ("http://evil.example", "localhost", "ws", False),
        ("http://localhost:8001", "localhost:8000", "ws", False),
        ("http://localhost", "localhost", "wss", False),
        ("https://localhost", "localhost", "ws", False),
        ("null", "localhost", "ws", False),
    ],
    ids=[
        "same-port",
        "same-tls",
        "default-port",
        "other-host",
        "other-port",
        "http-page-tls-socket",
        "https-page-plain-socket",
        "opaque",
    ],
)
def test_a_socket_opens_only_from_a_page_of_the_same_scheme_host_and_port(
    origin, host, scheme, opens
):
    cookie = session_cookie(make_user(make_team()))

    async def scenario() -> bool:
        socket = WebsocketCommunicator(
            application,
            "/ws/live/",
            headers=[(b"origin", origin.encode()), (b"host", host.encode()), cookie],
        )
        socket.scope["scheme"] = scheme
        connected, _ = await socket.connect()
        await socket.disconnect()
        return connected

    assert async_to_sync(scenario)() is opens
