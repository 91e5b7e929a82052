"""The rollup tasks through a real Redis broker and real Celery worker processes.

The worker is killed with SIGKILL in the middle of a fold: the fold's transaction must vanish
without a trace, and the next worker must fold every span exactly once.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from ingest.decoding import DecodedSpan
from ingest.writer import SpanWriter
from latencyboard.db import conninfo
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import tasks
from latencyboard.rollups.models import Rollup
from latencyboard.sla.models import Objective, SlaMinute
from latencyboard.spans.models import IngestBatch
from latencyboard.storage.locks import FOLD
from latencyboard.teams.models import Team
from tests.factories import make_team
from tests.support import PYTHON, RunningProcess, start_process, stop_process, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.celery]

SPANS_PER_BATCH = 512
STAGES = ("queue_wait", "model_forward", "serialize")
# Two days ago 10:00 UTC: its day is closed for compaction at any time of today, even in
# the first minutes after midnight (compaction waits out a grace period), and its minutes
# are within minute retention.
T0 = dt.datetime.combine(
    dt.datetime.now(dt.UTC).date() - dt.timedelta(days=2), dt.time(10), tzinfo=dt.UTC
)

Counts = dict[tuple[int, int | None, dt.datetime], tuple[int, int]]


@pytest.fixture
def start_worker(
    child_env: dict[str, str], tmp_path: Path
) -> Iterator[Callable[[], RunningProcess]]:
    """Starts ``celery worker --pool solo`` processes on the test database; stops them after."""
    started: list[RunningProcess] = []

    def start() -> RunningProcess:
        argv = [PYTHON, "-m", "celery", "-A", "latencyboard", "worker", "--pool", "solo"]
        argv += ["--loglevel", "INFO", "--without-heartbeat", "--without-gossip"]
        argv += ["--without-mingle"]
        log_path = tmp_path / f"worker-{len(started)}.log"
        started.append(start_process(argv, child_env, log_path))
        return started[-1]

    yield start
    for running in started:
        stop_process(running)


def batch_of_requests(number: int, minutes: int) -> list[DecodedSpan]:
    """``SPANS_PER_BATCH`` spans: requests of a root span and one child per stage, spread over
    ``minutes``, alternating between two services, one in eight failed."""
    spans = []
    for request in range(SPANS_PER_BATCH // (1 + len(STAGES))):
        n = number * SPANS_PER_BATCH + request
        trace, root = os.urandom(16), os.urandom(8)
        at = int(T0.timestamp()) * 10**9 + (n * 7_919_000_003) % (minutes * 60 * 10**9)
        service = "recommender" if n % 2 else "fraud"
        failed = n % 8 == 0
        durations = [1_000_000 + (n * 37 + i * 1_000_003) % 9_000_000 for i in range(3)]
        spans.append(_span(trace, root, None, "predict", at, sum(durations), failed, service))
        for stage, duration in zip(STAGES, durations, strict=True):
            spans.append(_span(trace, os.urandom(8), root, stage, at, duration, failed, service))
            at += duration
    return spans


def _span(
    trace: bytes,
    span_id: bytes,
    parent: bytes | None,
    name: str,
    start_ns: int,
    duration_ns: int,
    failed: bool,
    service: str,
) -> DecodedSpan:
    return DecodedSpan(
        trace_id=trace,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=2 if parent is None else 1,
        start_ns=start_ns,
        end_ns=start_ns + duration_ns,
        status_code=2 if failed else 0,
        status_message="",
        service_name=service,
        environment="",
        stage=None if parent is None else name,
        attributes={},
        dropped_attributes=0,
    )


def store_batches(team: Team, batches: int, minutes: int = 30) -> int:
    """Write ``batches`` ingest batches as live ingest does; returns the spans stored."""
    writer = SpanWriter(conninfo(), max_connections=3)

    def write(number: int) -> int:
        spans = batch_of_requests(number, minutes)
        return writer.write(team.pk, spans, rejected=0, protocol="test", received_at=T0).stored

    try:
        # The first batch alone: it creates the pipelines and stages, which the writer's
        # threads share through a cache before the creating transaction has committed.
        first = write(0)
        with ThreadPoolExecutor(3) as pool:
            return first + sum(pool.map(write, range(1, batches)))
    finally:
        writer.close()


def raw_counts(team: Team, folded_only: bool = False) -> Counts:
    """(spans, errors) per (pipeline, stage, minute) and per (pipeline, minute) of root spans,
    counted in SQL from the raw spans, optionally only those of rolled-up batches."""
    folded = (
        "AND batch_id IN (SELECT id FROM spans_ingestbatch WHERE rolled_up_at IS NOT NULL)"
        if folded_only
        else ""
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT pipeline_id, stage_id, date_trunc('minute', start_time, 'UTC'),
                   count(*), count(*) FILTER (WHERE status_code = 2)
            FROM spans_span WHERE team_id = %(team)s {folded} GROUP BY 1, 2, 3
            UNION ALL
            SELECT pipeline_id, NULL::bigint, date_trunc('minute', start_time, 'UTC'),
                   count(*), count(*) FILTER (WHERE status_code = 2)
            FROM spans_span WHERE team_id = %(team)s AND is_root {folded} GROUP BY 1, 2, 3
            """,  # noqa: S608 - one of two constant filters
            {"team": team.pk},
        )
        return {(p, s, m): (n, e) for p, s, m, n, e in cursor.fetchall()}


def rollup_counts(team: Team, resolution: str = "minute") -> Counts:
    rows = Rollup.objects.filter(team=team, resolution=resolution)
    return {(r.pipeline_id, r.stage_id, r.bucket_start): (r.count, r.error_count) for r in rows}


def raw_sla_counts(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT date_trunc('minute', start_time, 'UTC'),
                   count(*) FILTER (WHERE duration_ns <= %s), count(*)
            FROM spans_span WHERE pipeline_id = %s AND stage_id = %s GROUP BY 1
            """,
            [round(objective.threshold_ms * 1e6), objective.pipeline_id, objective.stage_id],
        )
        return {minute: (good, total) for minute, good, total in cursor.fetchall()}


def sla_counts(objective: Objective) -> dict[dt.datetime, tuple[int, int]]:
    rows = SlaMinute.objects.filter(objective=objective)
    return {row.minute: (row.good, row.total) for row in rows}


def pending(team: Team) -> int:
    return IngestBatch.objects.filter(team=team, rolled_up_at=None).count()


def folds(writing: str = "") -> list[int]:
    """Backends inside a fold (holding the advisory lock folds take shared) whose transaction
    is open and whose latest statement mentions ``writing``."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = %s
              AND l.objsubid = 1 AND l.mode = 'ShareLock' AND l.granted
              AND a.state IN ('active', 'idle in transaction') AND strpos(a.query, %s) > 0
            """,
            [FOLD, writing],
        )
        return [pid for (pid,) in cursor.fetchall()]


def fold_through_the_worker(team: Team, worker: RunningProcess, timeout: float = 120) -> None:
    """Send ``rollups.fold`` (as beat would, every few seconds) until no batch is pending."""
    next_beat = 0.0

    def folded() -> bool:
        nonlocal next_beat
        if time.monotonic() >= next_beat:
            tasks.fold.apply_async(expires=10)
            next_beat = time.monotonic() + 5
        return pending(team) == 0

    wait_until(folded, timeout=timeout, interval=0.2, message=worker.log)


def test_killed_fold_leaves_no_trace_and_the_next_worker_folds_each_span_once(start_worker):
    # given 200k spans in 400 pending batches and an SLA objective defined before the run
    team = make_team()
    pipeline = Pipeline.objects.create(team=team, service_name="recommender")
    forward = Stage.objects.create(pipeline=pipeline, name="model_forward")
    objective = Objective.objects.create(
        team=team, pipeline=pipeline, stage=forward, name="fwd", threshold_ms=5.0, target_percent=99
    )
    stored = store_batches(team, 400)
    assert (stored, pending(team)) == (400 * SPANS_PER_BATCH, 400)

    # when a worker is SIGKILLed while its open fold transaction is writing rollup rows
    first = start_worker()
    tasks.fold.delay()
    wait_until(
        lambda: folds(writing="rollups_rollup"), timeout=60, interval=0.002, message=first.log
    )
    os.killpg(first.process.pid, signal.SIGKILL)
    first.process.wait()

    # then PostgreSQL rolls the fold back: what is rolled up is whole batches, counted once
    wait_until(lambda: not folds(), timeout=30, message="the killed fold still holds its lock")
    assert pending(team) in {400, 200}, "the kill should land inside a 200-batch fold"
    assert rollup_counts(team) == raw_counts(team, folded_only=True)

    # when another worker folds until nothing is pending
    second = start_worker()
    fold_through_the_worker(team, second)

    # then every (pipeline, stage, minute) and end-to-end minute equals the raw count, and so
    # do the objective's exact counters
    assert rollup_counts(team) == raw_counts(team)
    assert sum(n for (_, stage, _), (n, _) in rollup_counts(team).items() if stage) == stored
    assert sla_counts(objective) == raw_sla_counts(objective)
    assert sum(total for _, total in sla_counts(objective).values()) == stored // 4 // 2


def test_without_a_worker_the_wait_times_out_and_the_counts_differ():
    # given pending spans and a fold task sent, but no worker to run it
    team = make_team()
    store_batches(team, 4)
    tasks.fold.apply_async(expires=3)

    # when we wait for the rollups as the other tests do, then the wait gives up
    with pytest.raises(AssertionError, match="not within 5 s"):
        wait_until(lambda: pending(team) == 0, timeout=5)

    # and the counts tell rollups and raw spans apart
    assert rollup_counts(team) == {}
    assert rollup_counts(team) != raw_counts(team)


def test_compact_task_runs_in_the_worker(start_worker):
    # given spans of two days ago folded into minutes
    team = make_team()
    store_batches(team, 6)
    worker = start_worker()
    fold_through_the_worker(team, worker)

    # when compaction goes through the broker
    tasks.compact.delay()

    # then the worker writes their hours and day, each the sum of its minutes
    wait_until(lambda: rollup_counts(team, "day"), timeout=30, message=worker.log)
    minutes = rollup_counts(team)
    for resolution, unit in (("hour", dt.timedelta(hours=1)), ("day", dt.timedelta(days=1))):
        expected: Counts = {}
        for (pipeline, stage, minute), (count, errors) in minutes.items():
            start = T0 - dt.timedelta(hours=10) if unit.days else minute.replace(minute=0)
            n, e = expected.get((pipeline, stage, start), (0, 0))
            expected[(pipeline, stage, start)] = (n + count, e + errors)
        assert rollup_counts(team, resolution) == expected
    assert "rollups.compact" in worker.log()
