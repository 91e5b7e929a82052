"""The heavy-read slots: slot ``n`` of a team is a session-level advisory lock (see
:data:`latencyboard.storage.locks.HEAVY_READ_SLOTS`), held over the connection of the read
that took it and given back by :func:`release` or with the connection.

The functions run over any DB-API cursor; :func:`wait` must run inside a transaction, whose
end ends the wait's lock timeout (the lock itself outlives it).
"""

from __future__ import annotations

from typing import Any, Final

from latencyboard.storage.locks import HEAVY_READ_SLOTS

_TRY: Final = "SELECT pg_try_advisory_lock(%s, %s)"
_WAIT: Final = "SELECT pg_advisory_lock(%s, %s)"
_LOCK_TIMEOUT: Final = "SELECT set_config('lock_timeout', %s, true)"
_RELEASE: Final = "SELECT pg_advisory_unlock(%s, %s)"
_RELEASE_ALL: Final = "SELECT pg_advisory_unlock_all()"


def key(slot: int, team: int) -> tuple[int, int]:
    """The lock of ``slot`` of ``team``: the database's keys are ints of 32 bits."""
    return HEAVY_READ_SLOTS + slot, team % 2**31


def try_take(cursor: Any, lock: tuple[int, int]) -> bool:
    """Take ``lock`` if it is free, at once."""
    cursor.execute(_TRY, lock)
    return bool(cursor.fetchone() == (True,))


def wait(cursor: Any, lock: tuple[int, int], wait_ms: int) -> None:
    """Take ``lock``, waiting in the database's lock queue up to ``wait_ms``; past it the
    database raises ``LockNotAvailable`` (or ``QueryCanceled``)."""
    cursor.execute(_LOCK_TIMEOUT, [f"{wait_ms}ms"])
    cursor.execute(_WAIT, lock)


def release(cursor: Any, lock: tuple[int, int]) -> None:
    cursor.execute(_RELEASE, lock)


def release_all(connection: Any) -> None:
    """Give back every advisory lock the session of ``connection`` holds (a connection going
    back to a pool must carry no slot over to the next request)."""
    connection.execute(_RELEASE_ALL)
