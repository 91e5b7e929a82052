from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from latencyboard.retention import services


@shared_task(name="retention.thin_spans", ignore_result=True)
def thin_spans() -> None:
    services.thin_due(timezone.now())
