"""How far a streaming read replica is behind its primary, asked of the replica itself."""

from __future__ import annotations

from typing import Any, Final

# Caught up (every WAL record received is replayed) counts as no lag, although the last
# replayed commit may be old: an idle primary writes nothing to catch up on. Behind, the lag
# is the age of the last commit replayed, an upper bound of what a reader misses. A server
# that is not in recovery (a promoted replica, or the primary itself) has no lag. The replica
# knows only what it has received: WAL still in flight, or a stream cut off from the primary,
# does not count (asking the primary too would cost every request a second round trip).
_LAG_SQL: Final = """
SELECT CASE
    WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
    ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0)
END::float8
"""


def lag_seconds(cursor: Any) -> float:
    """The replica's replay lag in seconds, read through ``cursor`` (a DB-API cursor on it)."""
    cursor.execute(_LAG_SQL)
    return float(cursor.fetchone()[0])
