"""Trace and span ids as OpenTelemetry shows them: lowercase hex of their bytes (pure).

Stored, a trace id is a ``uuid`` (its 16 bytes) and a span id a signed ``bigint`` (the two's
complement of its 8 big-endian bytes), so ``ffffffffffffffff`` is stored as -1.
"""

from __future__ import annotations

import re
import uuid

_TRACE_HEX = re.compile(r"[0-9a-fA-F]{32}")
_SPAN_MASK = (1 << 64) - 1


def trace_hex(trace_id: uuid.UUID) -> str:
    """32 hex characters."""
    return trace_id.hex


def span_hex(span_id: int) -> str:
    """16 hex characters of the stored signed 64-bit id."""
    return f"{span_id & _SPAN_MASK:016x}"


def parse_trace_hex(text: str) -> uuid.UUID:
    """The trace id written as 32 hex characters; ValueError for anything else."""
    if not _TRACE_HEX.fullmatch(text):
        raise ValueError(f"{text!r} is not a trace id: 32 hex characters expected")
    return uuid.UUID(hex=text)
