"""The ``<trace_id:…>`` path converter, registered once for the trace pages and API."""

from __future__ import annotations

import uuid

from django.urls import register_converter

from latencyboard.traces import ids


class TraceIdConverter:
    """A trace id in a URL: 32 hex characters, as OpenTelemetry shows it."""

    regex = "[0-9a-fA-F]{32}"

    def to_python(self, value: str) -> uuid.UUID:
        return ids.parse_trace_hex(value)

    def to_url(self, value: uuid.UUID) -> str:
        return ids.trace_hex(value)


register_converter(TraceIdConverter, "trace_id")
