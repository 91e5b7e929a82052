"""The live sockets: each page joins the channel-layer groups its user may hear.

A consumer only says which groups its page listens on (``groups_for``, the access rule of the
page); joining, the close codes and a lost channel layer are handled here once. The on-call page
gets its own subclass and route when alerts publish.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.security.websocket import WebsocketDenier
from django.contrib.auth.models import AnonymousUser, User
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from latencyboard.live.queries import overview_groups, pipeline_groups

logger = logging.getLogger(__name__)

# Close codes the browser sees (4000-4999 are the application's): sign in again, or give up.
SIGNED_OUT = 4401
NOT_FOUND = 4404
# RFC 6455 "try again later": the channel layer (Redis) is unreachable; the page reconnects.
TRY_AGAIN_LATER = 1013


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Accepts a signed-in user, joins ``groups_for`` and forwards their events as JSON."""

    groups_joined: list[str]

    def groups_for(self, user: User | AnonymousUser) -> list[str] | None:
        """The groups this page of ``user`` listens on; None when it may not listen at all."""
        raise NotImplementedError

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # Redis is down: end the socket with a close code the page retries on, rather
            # than an error frame (or an HTTP 500 answer to the handshake).
            logger.warning("live.layer_unavailable", extra={"error": str(exc)})
            await send({"type": "websocket.close", "code": TRY_AGAIN_LATER})

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self._refuse(SIGNED_OUT)
            return
        groups = await database_sync_to_async(self.groups_for)(user)
        if groups is None:
            await self._refuse(NOT_FOUND)
            return
        self.groups_joined = groups
        # Joined before accepting: without Redis the handshake fails, and the page retries.
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello"})

    async def _refuse(self, code: int) -> None:
        # Accepted before closing, so that the page sees the code and does not retry.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def live_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])


class OverviewConsumer(LiveConsumer):
    """``/ws/live/``: events of every team of the user (the overview)."""

    def groups_for(self, user: User | AnonymousUser) -> list[str] | None:
        return overview_groups(user)


class PipelineConsumer(LiveConsumer):
    """``/ws/live/pipelines/<id>/``: events of one pipeline of the user's teams."""

    def groups_for(self, user: User | AnonymousUser) -> list[str] | None:
        return pipeline_groups(user, self.scope["url_route"]["kwargs"]["pipeline_id"])


class UnknownPathConsumer(WebsocketDenier):
    """Refuses the handshake of a WebSocket path no other consumer serves (HTTP 403)."""

    # An alias that is not configured has no channel layer: refusing needs no Redis, so an
    # unknown path is refused cleanly even while Redis is down.
    channel_layer_alias = "unknown-path-needs-no-layer"
