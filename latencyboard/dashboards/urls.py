from django.urls import path

from latencyboard.dashboards import api, views

urlpatterns = [
    path("pipelines/<int:pipeline_id>/", views.pipeline, name="pipeline"),
    path(
        "api/pipelines/<int:pipeline_id>/stage-breakdown/",
        api.StageBreakdownView.as_view(),
        name="api-pipeline-stage-breakdown",
    ),
    path(
        "api/pipelines/<int:pipeline_id>/bottleneck/",
        api.BottleneckView.as_view(),
        name="api-pipeline-bottleneck",
    ),
    path(
        "api/pipelines/<int:pipeline_id>/deployments/",
        api.DeploymentsView.as_view(),
        name="api-pipeline-deployments",
    ),
    path(
        "api/pipelines/<int:pipeline_id>/attributes/",
        api.AttributeBreakdownView.as_view(),
        name="api-pipeline-attributes",
    ),
]
