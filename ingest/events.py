"""Span events as ingest keeps them: name, time and capped attributes (pure: no Django).

An event (``span.add_event``, ``span.record_exception``, Triton's ``QUEUE_START``) is kept with
the OpenTelemetry SDK's limits: at most ``Limits.max_events`` per span and
``Limits.max_event_attributes`` attributes per event. Past the count, what explains the span is
kept: its ``exception`` events first, then the earliest and the latest of the others, half the
room each (a stage's start and end events; the middle of a long loop says least),
each capped like a span attribute (value length, items, depth, byte budget). What is cut is
counted, with what the sending SDK reports it dropped, in the span's ``dropped_events`` and
each event's ``dropped_attributes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ingest.limits import Converter, Limits, Sizer, cap_attributes
from ingest.values import pb_size, pb_value
from ingest.wire import key_value

__all__ = ["EXCEPTION", "RawEvent", "SpanEvent", "cap_events", "event_limits", "from_protobuf"]

EXCEPTION = "exception"  # the semantic conventions' event of span.record_exception


class SpanEvent(NamedTuple):
    """One kept event of a span."""

    time_ns: int  # Unix nanoseconds, as sent
    name: str
    attributes: dict[str, object]  # JSON-serialisable, capped
    dropped_attributes: int  # by the caps plus the sending SDK's count


class RawEvent(NamedTuple):
    """An event as a front end reads it, attribute values not converted yet."""

    time_ns: int
    name: str
    attributes: Mapping[str, Any]
    sdk_dropped_attributes: int


def event_limits(limits: Limits) -> Limits:
    """``limits`` with the per-event attribute count in place of the per-span one."""
    return dataclasses.replace(limits, max_attributes=limits.max_event_attributes)


def cap_events(
    raw: Sequence[RawEvent],
    sdk_dropped: int,
    limits: Limits,
    convert: Converter,
    measure: Sizer,
) -> tuple[tuple[SpanEvent, ...], int]:
    """The events a span keeps and how many it lacks (``sdk_dropped`` included);
    ``limits`` are :func:`event_limits`'s."""
    keep = limits.max_events
    kept = _kept(raw, keep) if len(raw) > keep else raw
    max_len = limits.max_value_length
    events = []
    for event in kept:
        attributes, dropped, _ = cap_attributes(event.attributes, {}, 0, limits, convert, measure)
        name = event.name if len(event.name) <= max_len else event.name[:max_len]
        events.append(
            SpanEvent(
                event.time_ns,
                name.replace("\x00", "\ufffd"),
                attributes,
                dropped + event.sdk_dropped_attributes,
            )
        )
    return tuple(events), sdk_dropped + max(0, len(raw) - keep)


def _kept(raw: Sequence[RawEvent], keep: int) -> list[RawEvent]:
    """``keep`` of ``raw``'s events, in their order: exceptions, then the earliest and the
    latest of the others."""
    exceptions = [i for i, event in enumerate(raw) if event.name == EXCEPTION][:keep]
    others = [i for i, event in enumerate(raw) if event.name != EXCEPTION]
    room = keep - len(exceptions)
    latest = room // 2
    earliest = others[: room - latest]
    chosen = exceptions + earliest + (others[len(others) - latest :] if latest else [])
    return [raw[i] for i in sorted(chosen)]


def from_protobuf(
    pb_events: Sequence[Any], sdk_dropped: int, limits: Limits
) -> tuple[tuple[SpanEvent, ...], int]:
    """:func:`cap_events` of a span's ``events`` as :mod:`ingest.wire` reads them (raises
    ``DecodeError`` for a malformed attribute)."""
    raw = [
        RawEvent(
            event.time_unix_nano,
            event.name.decode("utf-8", "replace"),
            {pair.key: pair.value for pair in map(key_value, event.attributes)},
            event.dropped_attributes_count,
        )
        for event in pb_events
    ]
    return cap_events(raw, sdk_dropped, limits, pb_value, pb_size)
