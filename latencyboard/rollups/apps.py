from django.apps import AppConfig


class RollupsConfig(AppConfig):
    name = "latencyboard.rollups"
    label = "rollups"
