"""Through a real Redis broker to a real Celery worker process and back to PostgreSQL."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from latencyboard.spans import partitions, tasks
from latencyboard.spans.services import existing_partitions
from tests.support import PYTHON, RunningProcess, start_process, stop_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]


@pytest.fixture(scope="module")
def worker(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningProcess]:
    running = start_process(
        [
            PYTHON,
            "-m",
            "celery",
            "-A",
            "latencyboard",
            "worker",
            "--pool",
            "solo",
            "--loglevel",
            "INFO",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        child_env,
        tmp_path_factory.mktemp("worker") / "worker.log",
    )
    yield running
    stop_process(running)


def _wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_partition_task_runs_in_the_worker(worker: RunningProcess):
    # given the partition for the last day ahead is missing
    last = partitions.wanted(timezone.now(), ahead_days=3)[-1]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {last.name}")
    assert last.name not in existing_partitions()

    # when the maintenance task is sent through the broker
    tasks.ensure_partitions.delay()

    # then the worker process creates it
    assert _wait_for(lambda: last.name in existing_partitions()), worker.log()
    assert "spans.ensure_partitions" in worker.log()


def test_expired_partitions_are_dropped_by_the_worker(worker: RunningProcess):
    # given a partition far older than the retention window
    old = partitions.DayPartition.of(timezone.now() - dt.timedelta(days=400))
    with connection.cursor() as cursor:
        cursor.execute(old.create_sql())

    # when the retention task goes through the broker
    tasks.drop_expired_partitions.delay()

    # then the worker drops it
    assert _wait_for(lambda: old.name not in existing_partitions()), worker.log()
