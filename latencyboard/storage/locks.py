"""Advisory lock keys, and taking one for a transaction (pure: no Django).

``FOLD`` orders rollup folds against the writers that must not interleave with them: folds
take it shared, while creating an objective (which back-fills its counters), compaction and
rebuilds take it exclusive, so a fold either commits before them or sees what they changed.
"""

from __future__ import annotations

from typing import Any, Final

_HOLD: Final = "SELECT pg_advisory_xact_lock(%s)"

FOLD: Final = 0x5A_1A_C0_01
AUDIT_CHAIN: Final = 0x5A_1A_C0_02
"""Held by each append to the audit log until its transaction ends: appends take their turn,
so each one's hash follows the one committed before it and the chain cannot fork."""
HEAVY_READ_SLOTS: Final = 0x4C42_0000
"""Slot ``n`` of a team's heavy reads (``latencyboard.fairness.heavy_reads``) is the advisory lock
of the two keys ``HEAVY_READ_SLOTS + n`` and the team's id: a space apart from ``FOLD``'s,
whose lock has one key."""
OUTBOX_CLAIMS: Final = 0x5A_1A_C0_03
"""Claiming a due notification delivery: one claimer at a time, so the count of each team's
deliveries in flight that decides the claim cannot change under it."""


def hold(cursor: Any, key: int) -> None:
    """Wait for whoever holds ``key`` to end their transaction, then hold it until this one
    ends (over any DB-API cursor of it)."""
    cursor.execute(_HOLD, [key])
