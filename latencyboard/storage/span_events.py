"""Span events: written beside their spans and read back with a trace.

Events live in a side table (migration ``spans.0005``) with one row per span that has any,
so that a span without events costs no byte more than before. The row carries the span's
identity (the span table's primary key: team, trace, span id, start time) and is partitioned
by the span's start day like the span table, so a day's events expire and are thinned with
its spans (:class:`latencyboard.storage.partitions.DayPartition`,
:mod:`latencyboard.storage.thinning`). It is written in the transaction that stores its span.

``events`` is a JSON array of ``[offset_ns, name, attributes, dropped_attributes]``, oldest
first, the offset counted in nanoseconds from the span's start as stored (negative when the
event was stamped before it): compact, and exact where ``timestamptz`` keeps microseconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

import orjson
import psycopg

from latencyboard.db import read_connection as connection  # the replica for dashboards
from latencyboard.storage.span_templates import json_list_bytes
from latencyboard.storage.tables import SPAN_EVENTS
from latencyboard.windows import from_unix_ns, unix_ns

MAX_DROPPED: Final = 2**31 - 1
"""The ``dropped_events`` column's largest value (int4); OTLP's count is a uint32."""
_INSERT: Final = f"""
INSERT INTO {SPAN_EVENTS} (team_id, trace_id, span_id, start_time, dropped_events, events)
SELECT %s, * FROM unnest(%s::uuid[], %s::int8[], %s::timestamptz[], %s::int4[], %s::jsonb[])
ON CONFLICT DO NOTHING
"""  # noqa: S608 - a constant table name, no input
_TRACE: Final = f"""
SELECT span_id, start_time, dropped_events, events FROM {SPAN_EVENTS}
WHERE team_id = ANY(%(teams)s) AND trace_id = %(trace)s
  AND (%(spans)s::int8[] IS NULL OR span_id = ANY(%(spans)s::int8[]))
"""  # noqa: S608 - a constant table name, no input
_BYTES: Final = f"SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM {SPAN_EVENTS} e"  # noqa: S608


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One event of a span, as read back."""

    name: str
    time_unix_nano: int
    attributes: dict[str, Any]
    dropped_attributes: int


@dataclass(frozen=True, slots=True)
class SpanEvents:
    """A span's stored events, oldest first, and how many it lacks (dropped)."""

    events: tuple[StoredEvent, ...]
    dropped_events: int


Event = tuple[int, str, dict[str, object], int]
"""(Unix nanoseconds, name, attributes, dropped attributes), as ingest keeps an event."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """The events of one span, ready to store."""

    trace_id: bytes  # 16 bytes
    span_id: bytes  # 8 bytes
    start_ns: int
    dropped_events: int
    events: Sequence[Event]

    def document(self) -> str:
        start = self.start_ns // 1000 * 1000  # as the span table keeps it
        events = [[time_ns - start, name, attrs, n] for time_ns, name, attrs, n in self.events]
        return json_list_bytes(events).decode()


class _Decoded(Protocol):
    """What :func:`rows_of` reads of a decoded span (``ingest.decoding.DecodedSpan``)."""

    @property
    def trace_id(self) -> bytes: ...
    @property
    def span_id(self) -> bytes: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def dropped_events(self) -> int: ...
    @property
    def events(self) -> Sequence[Event]: ...


def rows_of(spans: Iterable[_Decoded]) -> list[EventRow]:
    """The event rows of decoded spans: of those that have events or dropped some (how many,
    up to :data:`MAX_DROPPED`)."""
    return [
        EventRow(
            span.trace_id,
            span.span_id,
            span.start_ns,
            min(span.dropped_events, MAX_DROPPED),
            span.events,
        )
        for span in spans
        if span.events or span.dropped_events
    ]


def dropped(rows: Iterable[EventRow]) -> tuple[int, int]:
    """``(events, event attributes)`` that the spans of ``rows`` lack, for the metrics."""
    rows = list(rows)
    events = sum(row.dropped_events for row in rows)
    return events, sum(event[3] for row in rows for event in row.events)


def insert(cursor: psycopg.Cursor[Any], team_id: int, rows: Sequence[EventRow]) -> None:
    """Store the events of spans being stored in the cursor's transaction; those stored
    before (a retried request) are left as they are."""
    if not rows:
        return
    cursor.execute(
        _INSERT,
        [
            team_id,
            [uuid.UUID(bytes=row.trace_id) for row in rows],
            [int.from_bytes(row.span_id, "big", signed=True) for row in rows],
            [from_unix_ns(row.start_ns) for row in rows],
            [row.dropped_events for row in rows],
            [row.document() for row in rows],
        ],
    )


def _read(rows: Iterable[tuple[Any, ...]]) -> dict[int, SpanEvents]:
    found = {}
    for span_id, start, dropped_events, events in rows:
        if isinstance(events, (str, bytes)):
            events = orjson.loads(events)
        start_ns = unix_ns(start)
        found[int(span_id)] = SpanEvents(
            tuple(
                StoredEvent(name, start_ns + offset, attributes, dropped)
                for offset, name, attributes, dropped in events
            ),
            int(dropped_events),
        )
    return found


def trace_events(
    team_ids: Sequence[int], trace_id: uuid.UUID, span_ids: Sequence[int] | None = None
) -> dict[int, SpanEvents]:
    """The events of the trace's spans stored for ``team_ids`` (of those in ``span_ids``
    only, when given: a trace read capped), by span id (the signed ``bigint`` the span table
    keeps); spans without events are absent. An event's time is its span's stored start
    (microseconds) plus its exact offset."""
    spans = None if span_ids is None else list(span_ids)
    with connection.cursor() as cursor:
        cursor.execute(_TRACE, {"teams": list(team_ids), "trace": trace_id, "spans": spans})
        return _read(cursor.fetchall())


def stored_bytes(cursor: Any) -> int:
    """Bytes the event rows take (their tuples' data, headers aside), over any cursor."""
    cursor.execute(_BYTES)
    return int(cursor.fetchone()[0])
