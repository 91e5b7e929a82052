"""WebSocket routing through the real ASGI application."""

from __future__ import annotations

import logging

import pytest
from asgiref.sync import async_to_sync
from channels.testing.websocket import WebsocketCommunicator
from django.test import override_settings

from latencyboard.asgi import application
from latencyboard.local.embedded import free_port

# Channels closes stale database connections around each consumer call: it needs access.
pytestmark = pytest.mark.django_db

ORIGIN = [(b"origin", b"http://localhost"), (b"host", b"localhost")]


@async_to_sync
async def handshake(path: str) -> tuple[bool, int | str | None]:
    """Open a WebSocket on ``path`` from an allowed origin: (accepted, close code)."""
    communicator = WebsocketCommunicator(application, path, headers=ORIGIN)
    connected, code = await communicator.connect()
    await communicator.disconnect()
    return connected, code


@pytest.mark.parametrize("path", ["/ws/nothing/", "/", "/ws/live/extra/", "/api/pipelines/"])
def test_an_unknown_websocket_path_is_refused_at_the_handshake(path, caplog):
    # When a client opens a WebSocket on a path no consumer serves
    accepted, _ = handshake(path)

    # Then the handshake is denied (the server answers 403), and nothing is logged as an error
    assert accepted is False
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("path", ["/ws/live/", "/ws/live/pipelines/1/"])
def test_the_live_sockets_are_still_routed_past_the_catch_all(path):
    # The live consumers accept the handshake (then close an anonymous socket with 4401, see
    # test_live_consumers); the catch-all would have refused it.
    assert handshake(path)[0] is True


def test_an_unknown_path_is_refused_cleanly_while_redis_is_down(caplog):
    # Given a channel layer whose Redis does not answer
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    layers = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [unreachable]},
        }
    }
    with override_settings(CHANNEL_LAYERS=layers):
        # When a client opens a WebSocket on an unknown path
        accepted, _ = handshake("/ws/nothing/")

    # Then it is refused all the same, without an error
    assert accepted is False
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
