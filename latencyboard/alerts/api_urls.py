"""The alerts API under ``/api/``: route kwargs incident_id, alert_id, rule_id and
channel_id."""

from django.urls import path

from latencyboard.alerts.api import AlertViewSet, ChannelViewSet, IncidentViewSet, RuleViewSet

urlpatterns = [
    path("incidents/", IncidentViewSet.as_view({"get": "list"}), name="api-incidents"),
    path(
        "incidents/<int:incident_id>/",
        IncidentViewSet.as_view({"get": "retrieve"}),
        name="api-incident",
    ),
    path("alerts/", AlertViewSet.as_view({"get": "list"}), name="api-alerts"),
    path("alerts/<int:alert_id>/", AlertViewSet.as_view({"get": "retrieve"}), name="api-alert"),
    path("alerts/<int:alert_id>/ack/", AlertViewSet.as_view({"post": "ack"}), name="api-alert-ack"),
    path(
        "alerts/<int:alert_id>/resolve/",
        AlertViewSet.as_view({"post": "resolve"}),
        name="api-alert-resolve",
    ),
    path(
        "alert-rules/",
        RuleViewSet.as_view({"get": "list", "post": "create"}),
        name="api-alert-rules",
    ),
    path(
        "alert-rules/preview/",
        RuleViewSet.as_view({"post": "preview"}),
        name="api-alert-rule-preview",
    ),
    path(
        "alert-rules/<int:rule_id>/",
        RuleViewSet.as_view(
            {"get": "retrieve", "put": "update", "patch": "partial_update", "delete": "destroy"}
        ),
        name="api-alert-rule",
    ),
    path(
        "alert-rules/<int:rule_id>/reach/",
        RuleViewSet.as_view({"get": "reach"}),
        name="api-alert-rule-reach",
    ),
    path(
        "alert-channels/",
        ChannelViewSet.as_view({"get": "list", "post": "create"}),
        name="api-alert-channels",
    ),
    path(
        "alert-channels/<int:channel_id>/",
        ChannelViewSet.as_view(
            {"get": "retrieve", "put": "update", "patch": "partial_update", "delete": "destroy"}
        ),
        name="api-alert-channel",
    ),
    path(
        "alert-channels/<int:channel_id>/test/",
        ChannelViewSet.as_view({"post": "test"}),
        name="api-alert-channel-test",
    ),
]
