"""Exact SLA counters (``SlaMinute``) and the objectives they count for, over a psycopg cursor.

Counters are only ever added to by folds (and the back-fill of a new objective), under the
fold lock, or replaced by rebuilds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Final, Protocol

import psycopg

from latencyboard.storage.tables import OBJECTIVE, SLA_MINUTE

_OBJECTIVES: Final = f"""
SELECT id, pipeline_id, stage_id, threshold_ms FROM {OBJECTIVE}
WHERE pipeline_id = ANY(%b::int8[]) ORDER BY id
"""  # noqa: S608 - a constant table name, no input
_ADD: Final = f"""
INSERT INTO {SLA_MINUTE} (objective_id, minute, good, total)
SELECT u.objective_id, to_timestamp(u.minute * 60), u.good, u.total
FROM unnest(%b::int8[], %b::int8[], %b::int8[], %b::int8[])
    WITH ORDINALITY AS u(objective_id, minute, good, total, position)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT sla_minute_unique DO UPDATE
SET good = {SLA_MINUTE}.good + EXCLUDED.good, total = {SLA_MINUTE}.total + EXCLUDED.total
"""  # noqa: S608 - a constant table name, no input
_DELETE_RANGE: Final = f"""
DELETE FROM {SLA_MINUTE} m USING {OBJECTIVE} o
WHERE m.objective_id = o.id AND o.pipeline_id = ANY(%b::int8[])
  AND m.minute >= %s AND m.minute < %s
"""  # noqa: S608 - constant table names, no input


class Count(Protocol):
    """One objective's counts of one minute: ``sla.counting.MinuteCount``."""

    @property
    def objective_id(self) -> int: ...
    @property
    def minute(self) -> int: ...  # Unix seconds // 60
    @property
    def good(self) -> int: ...
    @property
    def total(self) -> int: ...


def objectives_of(
    cursor: psycopg.Cursor[Any], pipelines: Sequence[int]
) -> list[tuple[int, int, int | None, float]]:
    """``(id, pipeline, stage or None for end to end, threshold ms)`` of the pipelines'
    objectives, by id."""
    return cursor.execute(_OBJECTIVES, [list(pipelines)]).fetchall()


def add(cursor: psycopg.Cursor[Any], counts: Sequence[Count]) -> None:
    """Add ``counts`` to the stored counters, creating the minutes not stored yet."""
    if counts:
        cursor.execute(
            _ADD,
            [
                [c.objective_id for c in counts],
                [c.minute for c in counts],
                [c.good for c in counts],
                [c.total for c in counts],
            ],
        )


_DELETE_SINCE: Final = f"DELETE FROM {SLA_MINUTE} WHERE objective_id = %s AND minute >= %s"  # noqa: S608 - a constant table name, values are parameters


def delete_since(cursor: psycopg.Cursor[Any], objective_id: int, since: dt.datetime) -> None:
    """Delete the counters of one objective for minutes from ``since`` on."""
    cursor.execute(_DELETE_SINCE, [objective_id, since])


def delete_range(
    cursor: psycopg.Cursor[Any], pipelines: list[int], start: dt.datetime, end: dt.datetime
) -> None:
    """Delete the counters of the pipelines' objectives for minutes in ``[start, end)``."""
    cursor.execute(_DELETE_RANGE, [pipelines, start, end])
