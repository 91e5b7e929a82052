"""The bounds ingest puts on one span: attribute count, value sizes, nesting, total bytes (pure).

Modelled on the OpenTelemetry SDK attribute limits (``OTEL_ATTRIBUTE_COUNT_LIMIT``,
``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT``, ``OTEL_SPAN_EVENT_COUNT_LIMIT``,
``OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT``): past the count or the byte budget an attribute is
dropped and counted in the span's ``dropped_attributes``; a string longer than the value
length is truncated. OTLP's arrays and key-value lists have no SDK limit, so ingest adds
two: elements per array or list (the rest are cut off) and nesting depth (deeper values
become null). Together with the per-span byte budget they bound what one span can store.

The byte budget counts keys plus values: a string's characters (after truncation), 8 for a
number, boolean or null, and for an array or list its size as sent, measured *before* it is
converted, so a 4-million-element array is refused without building a Python list of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from latencyboard.windows import DAY, HOUR, duration_ns

__all__ = ["DEFAULT_LIMITS", "Converter", "Limits", "Sizer", "cap_attributes"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds applied while decoding; every field must be non-negative."""

    max_attributes: int = 128  # per span, after merging; extra dropped and counted
    max_value_length: int = 1024  # string values (and each string in arrays) truncated to this
    max_items: int = 1024  # elements kept per array or key-value list, at every level
    max_depth: int = 8  # nested array / key-value list levels; deeper values become null
    max_attribute_bytes: int = 64 * 1024  # per span, resource attributes included
    max_events: int = 128  # per span (OTEL_SPAN_EVENT_COUNT_LIMIT); the newest kept, rest counted
    max_event_attributes: int = 128  # per event (OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT)
    max_future_ns: int = duration_ns(HOUR)  # spans ending later than now + this are rejected
    max_age_ns: int = duration_ns(30 * DAY)  # spans starting before now - this are rejected

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) < 0:
                raise ValueError(f"Limits.{name} must be >= 0")


DEFAULT_LIMITS = Limits()

# Converts one raw attribute value (an AnyValue message or its JSON object) at a nesting depth
# (0 for an attribute's own value) into a JSON-serialisable, capped Python value.
Converter = Callable[[Any, Limits, int], object]
# The byte-budget cost of one raw attribute value, given the maximum string length; it may
# stop counting once past the budget (the third argument).
Sizer = Callable[[Any, int, int], int]


def cap_attributes(
    raw: Mapping[str, Any],
    base: Mapping[str, object],
    base_size: int,
    limits: Limits,
    convert: Converter,
    measure: Sizer,
) -> tuple[dict[str, object], int, int]:
    """Cap ``raw`` attributes merged over ``base`` (already capped, costing ``base_size``
    bytes): ``(kept, dropped, size)``, where ``kept`` are those of ``raw`` that fit (the
    merged set is ``base`` updated with them) and ``size`` is the merged set's.

    Values are measured before they are converted and converted only when kept, so
    attributes beyond the caps cost a key lookup or a measurement, never a conversion. A key
    of ``base`` is overwritten without using a place under the count cap.
    """
    kept: dict[str, object] = {}
    room = limits.max_attributes - len(base)
    left = limits.max_attribute_bytes - base_size
    max_len = limits.max_value_length
    dropped = 0
    for key, value in raw.items():
        known = key in base
        if not known and room <= 0:
            dropped += 1
            continue
        cost = len(key) + measure(value, max_len, left - len(key))
        if cost > left:
            dropped += 1
            continue
        if not known:
            room -= 1
        kept[key] = convert(value, limits, 0)
        left -= cost
    return kept, dropped, limits.max_attribute_bytes - left
