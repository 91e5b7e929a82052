from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SpansConfig(AppConfig):
    name = "latencyboard.spans"
    label = "spans"

    def ready(self) -> None:
        from latencyboard.spans.signals import create_partitions_after_migrate

        post_migrate.connect(create_partitions_after_migrate, sender=self)
