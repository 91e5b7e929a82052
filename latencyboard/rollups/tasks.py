from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from latencyboard.rollups import compaction, services, stage_share_services

# Under the 5 s beat interval, so one worker's folds rarely overlap the next beat's.
FOLD_SECONDS = 4.0
# Under the 60 s beat interval (and its 50 s expiry), so runs rarely overlap; when they do,
# each pipeline is stepped by one worker at a time.
SHARE_SECONDS = 45.0


@shared_task(name="rollups.fold", ignore_result=True)
def fold() -> None:
    services.fold_until_idle(timezone.now, FOLD_SECONDS)


@shared_task(name="rollups.compact", ignore_result=True)
def compact() -> None:
    compaction.compact_rollups(timezone.now())


@shared_task(name="rollups.stage_shares", ignore_result=True)
def stage_shares() -> None:
    stage_share_services.compute_stage_shares(timezone.now(), seconds=SHARE_SECONDS)
