"""The outbox's claim lock (see :data:`latencyboard.storage.locks.OUTBOX_CLAIMS`): taken for
the rest of the current transaction, over any DB-API cursor of it."""

from __future__ import annotations

from typing import Any, Final

from latencyboard.storage.locks import OUTBOX_CLAIMS

_EXCLUSIVE: Final = "SELECT pg_advisory_xact_lock(%s)"


def take(cursor: Any) -> None:
    """Wait for the claim in progress elsewhere to commit, and hold the next one back until
    this transaction ends."""
    cursor.execute(_EXCLUSIVE, [OUTBOX_CLAIMS])
