"""The reports API, included under ``/api/``: route kwargs report_id and file_name."""

from __future__ import annotations

from django.urls import path

from audits import api

urlpatterns = [
    path("audit-reports/", api.ReportListView.as_view(), name="api-audit-reports"),
    path("audit-reports/<int:report_id>/", api.ReportDetailView.as_view(), name="api-audit-report"),
    path(
        "audit-reports/<int:report_id>/files/<str:file_name>",
        api.ReportFileView.as_view(),
        name="api-audit-report-file",
    ),
    path("audit-log/", api.AuditLogView.as_view(), name="api-audit-log"),
]
