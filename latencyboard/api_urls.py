"""The REST API, mounted under ``/api/`` (schema at ``/api/schema/``, docs at ``/api/docs/``)."""

from django.urls import include, path

from latencyboard.pipelines.api import PipelineListView

urlpatterns = [
    path("pipelines/", PipelineListView.as_view(), name="api-pipelines"),
    path("", include("latencyboard.dashboards.api_urls")),
    path("", include("latencyboard.sla.api_urls")),
    path("", include("latencyboard.traces.api_urls")),
    path("", include("latencyboard.compare.api_urls")),
    path("", include("latencyboard.alerts.api_urls")),
]
