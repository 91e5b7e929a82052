"""Which span attributes go into a shared span template and which stay in the span's row (pure).

A template (``latencyboard.storage.span_templates``) is stored once for all the spans that
share it, so it should hold the attributes whose values repeat (``model.version``,
``inference.stage``, ``http.route``) and not those that take a new value every few spans
(``tenant.id``, a request id), which would make a template per span. What repeats is learnt
as spans arrive, per process: a key stays shared while it has shown at most
:data:`MAX_VALUES` distinct values; past that, and for values that are not scalars, it stays
in the row. Processes may disagree for a while; readers merge both places, so the split
changes bytes on disk, never what a span reads back as.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Final

MAX_VALUES: Final = 100
"""Distinct values a key may show and still be shared."""
MAX_KEYS: Final = 4096
"""Keys tracked per process; keys first seen beyond that stay in the row."""
_SCALARS: Final = (str, int, float, bool)


class AttributeSplit:
    """Splits attributes into ``(shared, own)`` and learns which keys repeat.

    Thread-safe: the counts only grow, under a lock taken for a key's first values.
    """

    def __init__(self, max_values: int = MAX_VALUES, max_keys: int = MAX_KEYS) -> None:
        self._max_values = max_values
        self._max_keys = max_keys
        self._values: dict[str, set[object]] = {}
        self._own: set[str] = set()
        self._lock = threading.Lock()

    def split(
        self, attributes: Mapping[str, object]
    ) -> tuple[dict[str, object], dict[str, object]]:
        """``(shared, own)``: every attribute in exactly one of them."""
        shared: dict[str, object] = {}
        own: dict[str, object] = {}
        for key, value in attributes.items():
            if key in self._own or not isinstance(value, _SCALARS):
                own[key] = value
                continue
            seen = self._values.get(key)
            if (seen is None or value not in seen) and not self._learn(key, value):
                own[key] = value
                continue
            shared[key] = value
        return shared, own

    def _learn(self, key: str, value: object) -> bool:
        """Count a new value of ``key``; False once the key is no longer shared."""
        with self._lock:
            seen = self._values.get(key)
            if seen is None:
                if len(self._values) + len(self._own) >= self._max_keys:
                    return False  # memory stays bounded: an untracked key stays in the row
                seen = self._values[key] = set()
            seen.add(value)
            if len(seen) > self._max_values:
                self._own.add(key)
                del self._values[key]
                return False
            return True
