from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.security.websocket import WebsocketDenier

from latencyboard.live.groups import team_group
from latencyboard.teams.queries import teams_of


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """Pushes events of the signed-in user's teams to the browser (``/ws/live/``)."""

    groups_joined: list[str]

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        team_ids = await database_sync_to_async(
            lambda: list(teams_of(user).values_list("id", flat=True))
        )()
        self.groups_joined = [team_group(team_id) for team_id in team_ids]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        await self.send_json({"type": "hello", "teams": team_ids})

    async def disconnect(self, code: int) -> None:
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def live_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])


class UnknownPathConsumer(WebsocketDenier):
    """Refuses the handshake of a WebSocket path no other consumer serves (HTTP 403)."""

    # An alias that is not configured has no channel layer: refusing needs no Redis, so an
    # unknown path is refused cleanly even while Redis is down.
    channel_layer_alias = "unknown-path-needs-no-layer"
