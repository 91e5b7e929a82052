from django.apps import AppConfig


class SlaConfig(AppConfig):
    name = "latencyboard.sla"
    label = "sla"
    verbose_name = "SLAs"
