"""Publishing events to the live pages of a team."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from latencyboard.live.groups import team_group


def publish(team_id: int, event: dict[str, Any]) -> None:
    """Send ``event`` (JSON-able) to every open live page of ``team_id``."""
    layer = get_channel_layer()
    if layer is None:
        return
    async_to_sync(layer.group_send)(team_group(team_id), {"type": "live.event", "event": event})
