"""Audit pages, included under ``/audits/``."""

from __future__ import annotations

from django.urls import path

from audits import views

app_name = "audits"

urlpatterns = [
    path("reports/", views.report_list, name="report-list"),
    path("reports/<int:report_id>/", views.report_detail, name="report-detail"),
    path(
        "reports/<int:report_id>/files/<str:file_name>",
        views.report_file,
        name="report-file",
    ),
    path("log/", views.audit_log, name="log"),
    path("log.csv", views.audit_log_csv, name="log-csv"),
]
