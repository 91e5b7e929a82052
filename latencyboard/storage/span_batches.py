"""Writing spans and their ingest batch rows over a psycopg connection.

Every writer of spans goes through here: live ingest and replays (``ingest.writer``) and the
demo back-fill (``latencyboard.demo.backfill``). Rows come encoded by :mod:`.spans_copy`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any, Final

import psycopg

from latencyboard.storage import spans_copy
from latencyboard.storage.tables import INGEST_BATCH, SPAN

_STAGING: Final = "span_staging"
_CREATE_STAGING: Final = f"""
CREATE TEMP TABLE IF NOT EXISTS {_STAGING}
    (LIKE {SPAN} INCLUDING DEFAULTS) ON COMMIT DELETE ROWS
"""
_MOVE_STAGED: Final = f"""
WITH stored AS (
    INSERT INTO {SPAN} ({spans_copy.COLUMNS})
    SELECT {spans_copy.COLUMNS} FROM {_STAGING}
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM stored
"""  # noqa: S608 - constant names and columns, no input
_NEXT_BATCH_ID: Final = f"SELECT nextval('{INGEST_BATCH}_id_seq')"
_INSERT_BATCH: Final = f"""
INSERT INTO {INGEST_BATCH} (
    id, team_id, received_at, protocol, stored_spans, duplicate_spans, rejected_spans
) VALUES (%s, %s, %s, %s, %s, %s, %s)
"""  # noqa: S608 - a constant table name, no input


def prepare_connection(conn: psycopg.Connection[Any]) -> None:
    """Give a new connection its staging table, for :func:`copy_spans` with ``staged``."""
    conn.execute(_CREATE_STAGING)


def next_batch_id(cursor: psycopg.Cursor[Any]) -> int:
    row = cursor.execute(_NEXT_BATCH_ID).fetchone()
    assert row is not None
    return int(row[0])


def copy_spans(cursor: psycopg.Cursor[Any], blocks: Iterable[bytes], *, staged: bool) -> None:
    """COPY a binary stream of span rows (``blocks`` make up header, rows and trailer).

    ``staged`` sends them to the connection's staging table, from where
    :func:`move_staged` stores those not stored yet; else straight into the span table,
    where a span stored before fails the whole COPY with a unique violation.
    """
    target = _STAGING if staged else SPAN
    with cursor.copy(f"COPY {target} ({spans_copy.COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
        for block in blocks:
            copy.write(block)


def move_staged(cursor: psycopg.Cursor[Any]) -> int:
    """Store the staged spans not stored yet; returns how many were."""
    row = cursor.execute(_MOVE_STAGED).fetchone()
    assert row is not None
    return int(row[0])


def insert_batch(
    cursor: psycopg.Cursor[Any],
    batch_id: int,
    *,
    team_id: int,
    received_at: dt.datetime,
    protocol: str,
    stored: int,
    duplicates: int,
    rejected: int,
) -> None:
    """The ingest batch row of spans just copied (in the same transaction)."""
    cursor.execute(
        _INSERT_BATCH,
        [batch_id, team_id, received_at, protocol, stored, duplicates, rejected],
    )
