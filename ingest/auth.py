"""Which team an ingest token belongs to, cached briefly per process."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from latencyboard.storage import tokens as storage_tokens
from latencyboard.teams import tokens

TOKEN_HEADER = "x-latencyboard-token"  # noqa: S105 - a header name
# A revoked token stops working within this many seconds in every ingest process.
CACHE_SECONDS = 10.0


def token_from_headers(headers: Mapping[str, str]) -> str | None:
    """The token of ``Authorization: Bearer …`` or ``x-latencyboard-token`` (lower-case keys).

    The Bearer scheme is case-insensitive; ``OTEL_EXPORTER_OTLP_HEADERS`` URL-decodes
    ``Bearer%20token`` into a space, so both spellings arrive here the same.
    """
    authorization = headers.get("authorization", "").strip()
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    token = headers.get(TOKEN_HEADER, "").strip()
    return token or None


@dataclass(frozen=True, slots=True)
class TokenGrant:
    team_id: int
    rate_limit: int | None  # spans per second, None for unlimited
    key: str  # the token's digest: a stable key for rate limiting that is not the secret


class TokenDirectory:
    def __init__(self, pool: ConnectionPool, clock: object = time.monotonic) -> None:
        self._pool = pool
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, TokenGrant | None]] = {}

    def grant_for(self, token: str) -> TokenGrant | None:
        """The team and rate limit of an active token; None for an unknown or revoked one.

        Raises ``psycopg.OperationalError`` (and pool timeouts) when the database is down.
        """
        digest = tokens.digest(token)
        now = self._clock()  # type: ignore[operator]
        cached = self._cache.get(digest)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1]
        with self._pool.connection() as conn:
            row = storage_tokens.active_token(conn, digest)
        grant = TokenGrant(team_id=row[0], rate_limit=row[1], key=digest) if row else None
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now, grant)
        return grant
