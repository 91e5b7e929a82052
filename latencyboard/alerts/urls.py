"""The on-call pages, included under ``/alerts/``: route kwargs alert_id, rule_id and
channel_id."""

from django.urls import path

from latencyboard.alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.oncall, name="oncall"),
    path("<int:alert_id>/", views.alert_detail, name="detail"),
    path("<int:alert_id>/ack/", views.acknowledge, name="ack"),
    path("<int:alert_id>/resolve/", views.resolve, name="resolve"),
    path("<int:alert_id>/silence/", views.silence, name="silence"),
    path("settings/", views.settings_page, name="settings"),
    path("rules/new/", views.rule_edit, name="rule-new"),
    path("rules/<int:rule_id>/", views.rule_edit, name="rule-edit"),
    path("channels/new/", views.channel_edit, name="channel-new"),
    path("channels/<int:channel_id>/", views.channel_edit, name="channel-edit"),
    path("channels/<int:channel_id>/test/", views.channel_test, name="channel-test"),
]
