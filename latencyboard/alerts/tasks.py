from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from latencyboard.alerts import baselines, evaluation, outbox, services

# Deliveries are started for this long per run; each has its own deadline (at most 60 s), so a
# run ends well inside the task's soft time limit.
DELIVERY_SECONDS = 60.0


@shared_task(name="alerts.compute_baselines", ignore_result=True)
def compute_baselines() -> None:
    baselines.compute_baselines(timezone.now())


@shared_task(name="alerts.evaluate", ignore_result=True)
def evaluate() -> None:
    evaluation.evaluate_rules(timezone.now())


@shared_task(name=services.SEND_DELIVERIES_TASK, ignore_result=True)
def send_deliveries() -> None:
    outbox.send_due(timezone.now, seconds=DELIVERY_SECONDS)
