"""Compare API routes, included under ``/api/``."""

from __future__ import annotations

from django.urls import path

from latencyboard.compare.api import CompareView

urlpatterns = [
    path("compare/", CompareView.as_view(), name="api-compare"),
]
