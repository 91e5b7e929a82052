"""Routes of the Prometheus-compatible read API, included under ``/prometheus/api/v1/``."""

from django.urls import path

from latencyboard.prometheus import api

urlpatterns = [
    path("query", api.QueryView.as_view(), name="prometheus-query"),
    path("query_range", api.QueryRangeView.as_view(), name="prometheus-query-range"),
    path("labels", api.LabelsView.as_view(), name="prometheus-labels"),
    path(
        "label/<str:label_name>/values",
        api.LabelValuesView.as_view(),
        name="prometheus-label-values",
    ),
    path("series", api.SeriesView.as_view(), name="prometheus-series"),
    path("metadata", api.MetadataView.as_view(), name="prometheus-metadata"),
    path("status/buildinfo", api.BuildInfoView.as_view(), name="prometheus-buildinfo"),
]
