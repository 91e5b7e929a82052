from django.apps import AppConfig


class PipelinesConfig(AppConfig):
    name = "latencyboard.pipelines"
    label = "pipelines"
