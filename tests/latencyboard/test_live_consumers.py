"""The live sockets through the real ASGI application and the real Redis channel layer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client

from latencyboard.asgi import application
from latencyboard.live.groups import team_group
from tests.factories import make_team, make_user

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://localhost")


def session_cookie(user: AbstractBaseUser) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    value = client.cookies[settings.SESSION_COOKIE_NAME].value
    return b"cookie", f"{settings.SESSION_COOKIE_NAME}={value}".encode()


def communicator(path: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, path, headers=[ORIGIN, *headers])


async def group_send(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    assert layer is not None
    await layer.group_send(group, {"type": "live.event", "event": event})


def test_a_signed_in_socket_stays_open_and_keeps_receiving_for_two_minutes():
    team = make_team()
    cookie = session_cookie(make_user(team))

    async def scenario() -> list[dict[str, Any]]:
        socket = communicator("/ws/live/", cookie)
        connected, _ = await socket.connect()
        assert connected
        await socket.receive_json_from()  # hello
        received = []
        for minute in range(1, 5):
            await asyncio.sleep(30)
            await group_send(team_group(team.pk), {"type": "ping", "half_minute": minute})
            received.append(await socket.receive_json_from(timeout=5))
        await socket.disconnect()
        return received

    received = async_to_sync(scenario)()

    assert received == [{"type": "ping", "half_minute": n} for n in range(1, 5)]
