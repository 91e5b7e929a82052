from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from latencyboard.dashboards import services

# Under a 60 s beat interval, so runs rarely overlap; when they do, each pipeline is scanned
# by one worker at a time.
SCAN_SECONDS = 45.0


@shared_task(name="dashboards.scan_versions", ignore_result=True)
def scan_versions() -> None:
    services.scan_versions(timezone.now(), seconds=SCAN_SECONDS)
