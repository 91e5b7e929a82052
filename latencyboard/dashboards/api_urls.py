"""API routes of the pipeline page's charts, included under ``/api/``."""

from django.urls import path

from latencyboard.dashboards import api

urlpatterns = [
    path(
        "pipelines/<int:pipeline_id>/stage-breakdown/",
        api.StageBreakdownView.as_view(),
        name="api-pipeline-stage-breakdown",
    ),
    path(
        "pipelines/<int:pipeline_id>/bottleneck/",
        api.BottleneckView.as_view(),
        name="api-pipeline-bottleneck",
    ),
    path(
        "pipelines/<int:pipeline_id>/deployments/",
        api.DeploymentsView.as_view(),
        name="api-pipeline-deployments",
    ),
    path(
        "pipelines/<int:pipeline_id>/attributes/",
        api.AttributeBreakdownView.as_view(),
        name="api-pipeline-attributes",
    ),
]
