"""Which day partitions of the span table to have (pure: no Django).

Raw spans expire by dropping whole days, which is instant and leaves no bloat, unlike DELETE.
A partition's name and DDL are :mod:`latencyboard.storage.partitions`'s.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from latencyboard.storage.partitions import DayPartition


def wanted(now: dt.datetime, ahead_days: int) -> list[DayPartition]:
    """Yesterday, today and ``ahead_days`` more: where live traffic lands.

    Older days (replays, late spans within retention) get their partition on demand when the
    first span for them arrives.
    """
    today = now.astimezone(dt.UTC).date()
    return [DayPartition(today + dt.timedelta(days=offset)) for offset in range(-1, ahead_days + 1)]


def expired(existing: Iterable[str], now: dt.datetime, retention_days: int) -> list[DayPartition]:
    """Partitions whose whole day lies before the retention window."""
    cutoff = now.astimezone(dt.UTC) - dt.timedelta(days=retention_days)
    parsed = (DayPartition.from_name(name) for name in existing)
    return sorted((p for p in parsed if p is not None and p.upper <= cutoff), key=lambda p: p.day)
