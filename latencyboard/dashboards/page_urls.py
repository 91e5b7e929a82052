"""The pipeline page, included at the root."""

from django.urls import path

from latencyboard.dashboards import views

urlpatterns = [
    path("pipelines/<int:pipeline_id>/", views.pipeline, name="pipeline"),
]
