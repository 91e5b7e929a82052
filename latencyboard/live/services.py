"""Publishing events to the live pages listening on a group."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any, Final

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from redis.exceptions import RedisError

from latencyboard.live.groups import pipeline_group

logger = logging.getLogger(__name__)

# After a failed send, skip sending this long: a fold must not wait on a dead Redis for each
# of its events. Short, so that live pages hear again within seconds of Redis returning.
PAUSE_AFTER_FAILED_SEND_SECONDS: Final = 2.0
_paused_until = 0.0


def publish(group: str, event: dict[str, Any]) -> bool:
    """Send ``event`` (JSON-able) to every open live page listening on ``group``.

    Best effort: with Redis unreachable the event is dropped, logged, and False returned; the
    pages fetch what they missed when they reconnect. Nothing when ``LIVE_UPDATES`` is off.
    """
    global _paused_until
    layer = get_channel_layer()
    if not settings.LIVE_UPDATES or layer is None or time.monotonic() < _paused_until:
        return False
    try:
        async_to_sync(layer.group_send)(group, {"type": "live.event", "event": event})
    except (RedisError, OSError) as exc:
        _paused_until = time.monotonic() + PAUSE_AFTER_FAILED_SEND_SECONDS
        logger.warning("live.publish_failed", extra={"group": group, "error": str(exc)})
        return False
    return True


def announce(kind: str, pipeline_ids: Iterable[int]) -> None:
    """Tell the pages of each pipeline that its ``kind`` figures changed (``{"type": kind,
    "pipeline": id}``), for them to fetch what they show of it again. Call after commit."""
    for pipeline_id in sorted(set(pipeline_ids)):
        publish(pipeline_group(pipeline_id), {"type": kind, "pipeline": pipeline_id})
