from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "latencyboard.teams"
    label = "teams"
    verbose_name = "Teams and access"
