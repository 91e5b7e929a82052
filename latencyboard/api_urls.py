"""The REST API, mounted under ``/api/`` (schema at ``/api/schema/``, docs at ``/api/docs/``)."""

from django.urls import include, path

from latencyboard.pipelines.api import PipelineListView
from latencyboard.rollups.api import PipelinePercentilesView

urlpatterns = [
    path("pipelines/", PipelineListView.as_view(), name="api-pipelines"),
    path(
        "pipelines/<int:pipeline_id>/percentiles/",
        PipelinePercentilesView.as_view(),
        name="api-pipeline-percentiles",
    ),
    path("", include("latencyboard.dashboards.api_urls")),
    path("", include("latencyboard.sla.api_urls")),
    path("", include("latencyboard.traces.api_urls")),
    path("", include("latencyboard.compare.api_urls")),
    path("", include("latencyboard.alerts.api_urls")),
]
