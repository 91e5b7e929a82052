"""The compare page, mounted at ``/compare/``."""

from __future__ import annotations

from django.urls import path

from latencyboard.compare import views

urlpatterns = [
    path("", views.compare, name="compare"),
]
