"""Traces API routes, included under ``/api/``."""

from __future__ import annotations

from django.urls import path

from latencyboard.traces import converters  # noqa: F401  (registers <trace_id:…>)
from latencyboard.traces.api import TraceExemplarsView, TraceSearchView, TraceWaterfallView

urlpatterns = [
    path("traces/", TraceSearchView.as_view(), name="api-traces"),
    path("traces/exemplars/", TraceExemplarsView.as_view(), name="api-trace-exemplars"),
    path("traces/<trace_id:trace_id>/", TraceWaterfallView.as_view(), name="api-trace"),
]
