"""Day partitions of the span table: their names and the DDL that creates and drops them.

The span events table (:mod:`.span_events`) has the same days: each statement here creates or
drops a day of both, so events expire and appear with their spans.

Works over any DB-API cursor (Django's or psycopg's). Which days to keep is
:mod:`latencyboard.spans.partitions`'s business.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from latencyboard.storage.tables import SPAN, SPAN_EVENTS

_NAME: Final = re.compile(rf"^{SPAN}_p(\d{{8}})$")
_EXISTING: Final = """
SELECT child.relname FROM pg_inherits
JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
JOIN pg_class child ON child.oid = pg_inherits.inhrelid
WHERE parent.relname = %s ORDER BY child.relname
"""


@dataclass(frozen=True, slots=True)
class DayPartition:
    day: dt.date

    @property
    def name(self) -> str:
        return f"{SPAN}_p{self.day:%Y%m%d}"

    @property
    def events_name(self) -> str:
        """The day's partition of the span events table."""
        return f"{SPAN_EVENTS}_p{self.day:%Y%m%d}"

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
        """The statements that create this day's partitions (spans, events) if missing.

        DDL takes no bound parameters; the bounds are dates we formatted ourselves.
        """
        bounds = f"FOR VALUES FROM ('{self.lower.isoformat()}') TO ('{self.upper.isoformat()}')"
        return (
            f"CREATE TABLE IF NOT EXISTS {self.name} PARTITION OF {SPAN} {bounds}; "
            f"CREATE TABLE IF NOT EXISTS {self.events_name} PARTITION OF {SPAN_EVENTS} {bounds}"
        )

    def drop_sql(self) -> str:
        return f"DROP TABLE IF EXISTS {self.name}, {self.events_name}"


def existing(cursor: Any) -> list[str]:
    """Names of the span table's partitions, in order."""
    cursor.execute(_EXISTING, [SPAN])
    return [name for (name,) in cursor.fetchall()]


def create_missing(conn: psycopg.Connection[Any], days: Iterable[DayPartition]) -> None:
    """Create the partitions of ``days`` that are missing, oldest first (in autocommit)."""
    for partition in sorted(days, key=lambda p: p.day):
        # Another ingest process or a backfill may create the same day at the same moment.
        with contextlib.suppress(psycopg.errors.DuplicateTable):
            conn.execute(partition.create_sql())
