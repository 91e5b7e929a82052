"""Ingest tokens as the ingest processes look them up, over a psycopg connection."""

from __future__ import annotations

from typing import Any, Final

import psycopg

from latencyboard.storage.tables import INGEST_TOKEN

_ACTIVE: Final = f"""
SELECT team_id, rate_limit FROM {INGEST_TOKEN} WHERE digest = %s AND revoked_at IS NULL
"""  # noqa: S608 - a constant table name, no input


def active_token(conn: psycopg.Connection[Any], digest: str) -> tuple[int, int | None] | None:
    """``(team id, rate limit)`` of the unrevoked token with ``digest``; None without one."""
    row = conn.execute(_ACTIVE, [digest]).fetchone()
    return None if row is None else (int(row[0]), row[1])
