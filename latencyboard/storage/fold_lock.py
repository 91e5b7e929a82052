"""The fold lock: how rollup folds and the writers that must not interleave with them take
turns (see :data:`latencyboard.storage.locks.FOLD`).

Both functions take the lock for the rest of the current transaction (a transaction-level
advisory lock, released at commit or rollback), over any DB-API cursor of that transaction.
"""

from __future__ import annotations

from typing import Any, Final

from latencyboard.storage.locks import FOLD

_SHARED: Final = "SELECT pg_advisory_xact_lock_shared(%s)"
_EXCLUSIVE: Final = "SELECT pg_advisory_xact_lock(%s)"


def take_shared(cursor: Any) -> None:
    """For a fold: folds run side by side, and wait while an exclusive holder works."""
    cursor.execute(_SHARED, [FOLD])


def take_exclusive(cursor: Any) -> None:
    """For compaction, rebuilds and SLA objective changes: waits for the folds in flight to
    commit, and holds new ones back until this transaction ends."""
    cursor.execute(_EXCLUSIVE, [FOLD])
