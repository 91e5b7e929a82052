"""Committed ingest batches wake the fold: a real ingest process, Redis broker, Celery worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from latencyboard.local.embedded import EmbeddedRedis, free_port
from latencyboard.rollups.waking import WAKE_INTERVAL_SECONDS
from latencyboard.spans.models import IngestBatch, Span
from tests.factories import make_team_with_token
from tests.ingest.otlp import SpanSpec, export_request, post
from tests.support import (
    PYTHON,
    RunningProcess,
    start_process,
    start_worker,
    stop_process,
    wait_until,
)

pytestmark = pytest.mark.django_db(transaction=True)

PROTOBUF = "application/x-protobuf"


def start_ingest(env: dict[str, str], log: Path) -> tuple[RunningProcess, str]:
    http_port, grpc_port = free_port(), free_port()
    running = start_process(
        [PYTHON, "-m", "ingest", "--http-port", str(http_port), "--grpc-port", str(grpc_port)],
        env,
        log,
        ready_port=http_port,
    )
    return running, f"http://127.0.0.1:{http_port}/v1/traces"


@pytest.fixture
def ingest(child_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    running, url = start_ingest(child_env, tmp_path / "ingest.log")
    yield url
    stop_process(running)


@pytest.fixture
def worker(child_env: dict[str, str], tmp_path: Path) -> Iterator[RunningProcess]:
    """A Celery worker and no beat: only a wake can start a fold."""
    running = start_worker(child_env, tmp_path / "worker.log")
    yield running
    stop_process(running)


def export(url: str, token: str, spans: int) -> int:
    body = export_request(*(SpanSpec() for _ in range(spans))).SerializeToString()
    headers = {"content-type": PROTOBUF, "authorization": f"Bearer {token}"}
    return post(url, body, headers).status


def seconds_until_folded(team_id: int, timeout: float = 10) -> float:
    started = time.monotonic()
    wait_until(
        lambda: not IngestBatch.objects.filter(team_id=team_id, rolled_up_at=None).exists(),
        timeout=timeout,
        interval=0.02,
        message="the batch was never folded",
    )
    return time.monotonic() - started


@pytest.mark.celery
def test_an_ingest_commit_wakes_the_fold_well_before_the_next_beat(ingest, worker):
    # given a worker without beat, and a team exporting spans
    sender = make_team_with_token()

    # when three exports are answered 200, each after a quiet spell (the ingest process wakes
    # the fold at once after one, then at most once per interval: this test is about the former)
    statuses, waits = [], []
    for _ in range(3):
        statuses.append(export(ingest, sender.token, 50))
        waits.append(seconds_until_folded(sender.team.pk))
        time.sleep(WAKE_INTERVAL_SECONDS)

    # then each was folded within a second of its 200 (the beat runs every 5 s)
    assert statuses == [200, 200, 200]
    assert max(waits) < 1.0, waits
    assert IngestBatch.objects.filter(team=sender.team, rolled_up_at__isnull=False).count() == 3


def test_with_redis_stopped_ingest_keeps_storing_and_answering_200(child_env, tmp_path):
    # given an ingest process whose Redis has stopped
    redis = EmbeddedRedis(tmp_path / "redis", free_port(), log_path=tmp_path / "redis.log")
    redis.start()
    running, url = start_ingest({**child_env, "REDIS_URL": redis.url}, tmp_path / "ingest.log")
    sender = make_team_with_token()
    try:
        redis.stop()

        # when spans are exported, twice (the second while the first wake is failing)
        started = time.monotonic()
        statuses = [export(url, sender.token, 20), export(url, sender.token, 20)]
        answered = time.monotonic() - started
        # the wake gives up on its own thread, after the broker client's retries
        wait_until(lambda: "rollup.wake_failed" in running.log(), timeout=30, interval=0.2)
    finally:
        stop_process(running)

    # then both are stored and acknowledged at once, and the failed wake was logged
    assert statuses == [200, 200]
    assert answered < 2
    assert Span.objects.filter(team=sender.team).count() == 40
    assert "rollup.wake_failed" in running.log()
