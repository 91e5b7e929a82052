from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from latencyboard.spans import services


@shared_task(name="spans.ensure_partitions", ignore_result=True)
def ensure_partitions() -> None:
    services.ensure_partitions(timezone.now())


@shared_task(name="spans.drop_expired_partitions", ignore_result=True)
def drop_expired_partitions() -> None:
    services.drop_expired_partitions(timezone.now())
