"""Trace pages, included under ``/traces/``."""

from __future__ import annotations

from django.urls import path

from latencyboard.traces import (
    converters,  # noqa: F401  (registers <trace_id:…>)
    views,
)

urlpatterns = [
    path("", views.trace_search, name="traces"),
    path("<trace_id:trace_id>/", views.trace_detail, name="trace"),
]
