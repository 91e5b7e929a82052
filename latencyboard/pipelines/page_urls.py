"""The pipeline's stage rules page, included at the root."""

from django.urls import path

from latencyboard.pipelines import views

urlpatterns = [
    path("pipelines/<int:pipeline_id>/stages/", views.stage_rules, name="pipeline-stage-rules"),
]
