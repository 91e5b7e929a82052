from django.apps import AppConfig


class AlertsConfig(AppConfig):
    name = "latencyboard.alerts"
    label = "alerts"
    verbose_name = "Alerts"
