from django.apps import AppConfig


class LocalConfig(AppConfig):
    name = "latencyboard.local"
    label = "local"
    verbose_name = "Local start"
