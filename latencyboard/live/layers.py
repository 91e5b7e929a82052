"""The channel layer's configuration (pure: no Django here, so settings and tests share it)."""

from __future__ import annotations

from typing import Any, Final

from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

# channels_redis waits this long in one blocking pop (``RedisChannelLayer.brpop_timeout``) for a
# consumer's next message. The Redis client's read timeout must outlast it: redis-py's default of
# 5 s equals it, so an idle socket's pop timed out on the client first, the TimeoutError ended
# the consumer and the browser's socket was dropped without a close frame.
BLOCKING_POP_SECONDS: Final = 5
SOCKET_TIMEOUT_SECONDS: Final = BLOCKING_POP_SECONDS + 10
# Fail fast while Redis is down: a page falls back to "offline", a publisher logs and goes on.
CONNECT_TIMEOUT_SECONDS: Final = 2
# A pooled connection to a Redis that restarted fails on its next command; reconnect and try
# again (within about a second) instead of failing the socket or the publish it serves.
RETRIES: Final = 3


def redis_channel_layers(redis_url: str) -> dict[str, Any]:
    """``CHANNEL_LAYERS`` for one Redis server at ``redis_url``."""
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": redis_url,
                        "socket_timeout": SOCKET_TIMEOUT_SECONDS,
                        "socket_connect_timeout": CONNECT_TIMEOUT_SECONDS,
                        "socket_keepalive": True,
                        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), RETRIES),
                    }
                ],
            },
        }
    }
