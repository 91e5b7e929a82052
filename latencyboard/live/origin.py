"""The live sockets' door: a socket opens only from a page of this very site.

Channels' ``AllowedHostsOriginValidator`` compares the Origin's host name with
``ALLOWED_HOSTS`` and ignores its scheme and port, so a page served by anything else on the same
host (another port, plain HTTP beside HTTPS) could open a socket with the user's cookie. Here
the Origin must name the scheme, host and port the socket itself was opened on (or be one of
``CSRF_TRUSTED_ORIGINS``, as for forms).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


def origin_of(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an origin or URL, the port filled in; None if malformed."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return parts.scheme, parts.hostname, port


def _page_scheme(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str:
    """The scheme of the pages of the site the socket was opened on."""
    if scope.get("scheme") == "wss":
        return "https"
    proxy_header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy_header is not None:
        name, secure = proxy_header
        forwarded = headers.get(name.removeprefix("HTTP_").lower().replace("_", "-").encode())
        if forwarded is not None and forwarded.decode("latin1") == secure:
            return "https"
    return "http"


def same_origin(scope: dict[str, Any]) -> bool:
    headers = dict(scope.get("headers", []))
    origin, host = headers.get(b"origin"), headers.get(b"host")
    if origin is None or host is None:
        return False
    origin_text = origin.decode("latin1")
    if origin_text in settings.CSRF_TRUSTED_ORIGINS:
        return True
    site = origin_of(f"{_page_scheme(scope, headers)}://{host.decode('latin1')}")
    return site is not None and origin_of(origin_text) == site


class SameOriginSockets:
    """ASGI middleware: denies a WebSocket whose Origin is not the site it was opened on."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not same_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
