"""What a URL target must be for a notification to go there, and how a target or secret is
shown back masked: the rules every kind that POSTs to a URL shares."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

from latencyboard.notifications.transport import IPAddress, literal_address, refused_reason

URL_LIMIT = 2048
LOOPBACK = ipaddress.IPv4Address("127.0.0.1")


def url_problem(target: str) -> str | None:
    """What is wrong with ``target`` as a receiver's URL, or None: it must be a short ASCII
    http(s) URL with a host, no credentials, and no address notifications may not reach."""
    if len(target) > URL_LIMIT:
        return f"the URL is longer than {URL_LIMIT} characters"
    if any(character.isspace() or not character.isprintable() for character in target):
        return "the URL contains spaces or control characters"
    if not target.isascii():
        return "the URL must be ASCII: an xn-- host name, a percent-encoded path"
    try:
        parts = urlsplit(target)
        port = parts.port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "the target must be an http:// or https:// URL"
    if not parts.hostname:
        return "the URL has no host"
    if parts.username is not None or parts.password is not None:
        return "the URL must not hold a user name or password: put credentials in the secret"
    if port == 0:
        return "the URL's port must be from 1 to 65535"
    address = _written_address(parts.hostname)
    reason = refused_reason(address, settings.NOTIFICATION_ALLOWED_NETWORKS) if address else None
    if reason is not None:
        return f"{parts.hostname} is {reason}: notifications may not go there"
    return None


def _written_address(host: str) -> IPAddress | None:
    """The address a host name stands for without asking DNS (an IP literal, localhost)."""
    if host == "localhost" or host.endswith(".localhost"):
        return LOOPBACK
    return literal_address(host)


def url_host(target: str) -> str | None:
    try:
        return urlsplit(target).hostname
    except ValueError:
        return None


def mask(secret: str, prefix: str = "") -> str:
    """A secret as it may be shown back: a URL's scheme and host, the ``prefix`` that says
    its format, and at most its last 4 characters."""
    if not secret:
        return ""
    tail = secret[-4:] if len(secret) >= 16 else ""
    host = url_host(secret) if secret.startswith(("http://", "https://")) else None
    if host is not None:
        return f"{secret.split(':', 1)[0]}://{host}/…{tail}"
    return f"{prefix if secret.startswith(prefix) else ''}…{tail}"
