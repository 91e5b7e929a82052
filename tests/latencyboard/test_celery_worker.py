"""Through a real Redis broker to a real Celery worker process and back to PostgreSQL."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.retention import tasks as retention_tasks
from latencyboard.retention.models import ThinnedDay
from latencyboard.rollups.models import Resolution, Rollup, StageShare
from latencyboard.rollups.services import fold_pending_batches
from latencyboard.rollups.tasks import compact, stage_shares
from latencyboard.spans import partitions, tasks
from latencyboard.spans.models import Span
from latencyboard.spans.services import existing_partitions
from tests.factories import make_team
from tests.latencyboard import test_retention
from tests.support import PYTHON, RunningProcess, start_process, stop_process, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]


WORKER_ARGV = [
    *(PYTHON, "-m", "celery", "-A", "latencyboard", "worker", "--pool", "solo"),
    *("--loglevel", "INFO", "--without-heartbeat", "--without-gossip", "--without-mingle"),
    # Both queues: the alert tests follow a notification from evaluation to receiver.
    *("--queues", "celery,notifications"),
]


@pytest.fixture(scope="module")
def worker(
    child_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningProcess]:
    running = start_process(
        WORKER_ARGV, child_env, tmp_path_factory.mktemp("worker") / "worker.log"
    )
    yield running
    stop_process(running)


def test_partition_task_runs_in_the_worker(worker: RunningProcess):
    # given the partition for the last day ahead is missing
    last = partitions.wanted(timezone.now(), ahead_days=3)[-1]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {last.name}")
    assert last.name not in existing_partitions()

    # when the maintenance task is sent through the broker
    tasks.ensure_partitions.delay()

    # then the worker process creates it
    wait_until(lambda: last.name in existing_partitions(), timeout=30, message=worker.log)
    assert "spans.ensure_partitions" in worker.log()


def test_expired_partitions_are_dropped_by_the_worker(worker: RunningProcess):
    # given a partition far older than the retention window
    old = partitions.DayPartition.of(timezone.now() - dt.timedelta(days=400))
    with connection.cursor() as cursor:
        cursor.execute(old.create_sql())

    # when the retention task goes through the broker
    tasks.drop_expired_partitions.delay()

    # then the worker drops it
    wait_until(lambda: old.name not in existing_partitions(), timeout=30, message=worker.log)


def test_compaction_and_stage_share_tasks_run_in_the_worker(worker: RunningProcess):
    # given three requests of a pipeline, stored and folded into minute rollups, an hour ago
    team = make_team()
    hour = timezone.now().replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=2)
    spans = []
    for request in range(3):
        trace, root = os.urandom(16), os.urandom(8)
        start = int((hour + dt.timedelta(minutes=request)).timestamp() * 1e9)
        for name, parent, offset, duration in [
            ("POST /score", None, 0, 30_000_000),
            ("model_forward", root, 5_000_000, 20_000_000),
        ]:
            spans.append(
                DecodedSpan(
                    trace,
                    root if parent is None else os.urandom(8),
                    parent,
                    name,
                    2 if parent is None else 1,
                    start + offset,
                    start + offset + duration,
                    0,
                    "",
                    "svc",
                    "",
                    name,
                    {},
                    0,
                )
            )
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        writer.write(team.id, spans, rejected=0, protocol="test", received_at=timezone.now())
    finally:
        writer.close()
    fold_pending_batches(timezone.now())

    # when compaction and stage shares are sent through the broker
    compact.delay()
    stage_shares.delay()

    # then the worker writes the hour rollup and the per-minute stage shares
    def hour_row_count() -> int | None:
        row = Rollup.objects.filter(
            team=team, resolution=Resolution.HOUR, bucket_start=hour, stage=None
        ).first()
        return None if row is None else row.count

    wait_until(lambda: hour_row_count() == 3, timeout=30, message=worker.log)
    wait_until(
        lambda: StageShare.objects.filter(team=team).exists(), timeout=30, message=worker.log
    )


def test_thinning_task_runs_in_the_worker(worker: RunningProcess, settings):
    # given a folded day of demo traffic long past the hot period
    settings.RETENTION_DAYS = 4000
    team = make_team()
    test_retention.backfill_day(team)
    test_retention.fold_everything()
    spans = Span.objects.filter(team=team).count()

    # when the thinning task goes through the broker
    task = retention_tasks.thin_spans.delay()

    # then the worker thins the day and records it, and the task ends (it goes on to the other
    # past days; the database is flushed after the test, which must not meet it mid-swap)
    wait_until(
        lambda: ThinnedDay.objects.filter(day=test_retention.DAY).exists(),
        timeout=120,
        message=worker.log,
    )
    wait_until(lambda: f"{task.id}] succeeded" in worker.log(), timeout=120, message=worker.log)
    assert 0 < Span.objects.filter(team=team).count() < spans / 5
