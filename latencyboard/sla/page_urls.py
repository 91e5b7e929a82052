"""SLA pages, included under ``/slas/``."""

from __future__ import annotations

from django.urls import path

from latencyboard.sla import views

app_name = "slas"

urlpatterns = [
    path("", views.objective_list, name="list"),
    path("new/", views.objective_new, name="new"),
    path("<int:objective_id>/", views.objective_detail, name="detail"),
    path("<int:objective_id>/maintenance/", views.add_maintenance, name="add-maintenance"),
    path(
        "<int:objective_id>/maintenance/<int:window_id>/delete/",
        views.delete_maintenance,
        name="delete-maintenance",
    ),
]
