from django.apps import AppConfig


class DashboardsConfig(AppConfig):
    name = "latencyboard.dashboards"
    label = "dashboards"
    verbose_name = "Dashboards"
