"""Day partitions of the span table (pure: no Django).

Raw spans expire by dropping whole days, which is instant and leaves no bloat, unlike DELETE.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

PARENT_TABLE = "spans_span"
_NAME = re.compile(rf"^{PARENT_TABLE}_p(\d{{8}})$")


@dataclass(frozen=True, slots=True)
class DayPartition:
    day: dt.date

    @property
    def name(self) -> str:
        return f"{PARENT_TABLE}_p{self.day:%Y%m%d}"

    @property
    def lower(self) -> dt.datetime:
        return dt.datetime.combine(self.day, dt.time(), tzinfo=dt.UTC)

    @property
    def upper(self) -> dt.datetime:
        return self.lower + dt.timedelta(days=1)

    @classmethod
    def from_name(cls, name: str) -> DayPartition | None:
        match = _NAME.match(name)
        if match is None:
            return None
        return cls(dt.datetime.strptime(match.group(1), "%Y%m%d").date())

    @classmethod
    def of(cls, moment: dt.datetime) -> DayPartition:
        return cls(moment.astimezone(dt.UTC).date())

    def create_sql(self) -> str:
        """The statement that creates this partition if it is missing.

        DDL takes no bound parameters; the bounds are dates we formatted ourselves.
        """
        return (
            f"CREATE TABLE IF NOT EXISTS {self.name} PARTITION OF {PARENT_TABLE} "
            f"FOR VALUES FROM ('{self.lower.isoformat()}') TO ('{self.upper.isoformat()}')"
        )


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
