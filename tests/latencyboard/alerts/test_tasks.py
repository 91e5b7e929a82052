"""The alert tasks through a real Redis broker and Celery worker process."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from latencyboard.alerts.models import Alert, Baseline
from latencyboard.alerts.tasks import compute_baselines, evaluate
from tests.latencyboard.alerts.scenes import make_scene, put_history, put_minutes
from tests.latencyboard.test_celery_worker import worker  # noqa: F401 - fixture
from tests.support import RunningProcess, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]


def test_the_worker_computes_baselines_then_fires_the_regression(worker: RunningProcess):  # noqa: F811 - the fixture
    now = timezone.now()
    scene = make_scene()
    # Whole hours before the current one: the baseline reads hours ending at this hour.
    put_history(scene, now=now + dt.timedelta(hours=1))
    put_minutes(scene, 10, scale=1.5, now=now)

    compute_baselines.delay()
    wait_until(lambda: Baseline.objects.filter(ready=True).exists(), timeout=30, message=worker.log)
    evaluate.delay()

    wait_until(
        lambda: Alert.objects.filter(status="firing").exists(), timeout=30, message=worker.log
    )
    assert Alert.objects.get().stage == scene.stage
    assert "alerts.evaluate" in worker.log()
