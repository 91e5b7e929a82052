"""Token buckets shared through a table file: one limit for every process of a host."""

from __future__ import annotations

import logging
import multiprocessing as mp
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from ingest.ratelimit import SpanRateLimiter, create_table

KEY = "a" * 64
FROZEN = 1000.0


def _frozen_clock() -> float:
    return FROZEN


def _take_one_span_many_times(path: str, attempts: int, start: Event) -> int:
    limiter = SpanRateLimiter(burst_seconds=100.0, clock=_frozen_clock, table_path=path)
    start.wait(timeout=30)
    return sum(limiter.retry_after(KEY, 1.0, 1) == 0.0 for _ in range(attempts))


def _worker(path: str, attempts: int, start: Event, results: Queue[int]) -> None:
    results.put(_take_one_span_many_times(path, attempts, start))


def test_two_processes_share_one_bucket_per_key(tmp_path: Path):
    # given a table and two OS processes that each open it, with a frozen clock so that no
    # span is refilled: a burst of 100 spans (1 span/s for 100 s) is all the key may send
    path = create_table(str(tmp_path))
    spawn = mp.get_context("spawn")
    start, results = spawn.Event(), spawn.Queue()
    processes = [spawn.Process(target=_worker, args=(path, 150, start, results)) for _ in range(2)]
    for process in processes:
        process.start()

    # when both take one span at a time, 150 times each, at once
    start.set()
    accepted = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=30)

    # then together they were allowed the one burst, not one each
    assert sum(accepted) == 100
    assert [process.exitcode for process in processes] == [0, 0]


def test_refused_spans_are_told_how_long_to_wait():
    # given a key allowed 10 spans/s with a burst of 20, all taken
    clock = [FROZEN]
    limiter = SpanRateLimiter(burst_seconds=2.0, clock=lambda: clock[0])
    assert limiter.retry_after(KEY, 10.0, 20) == 0.0

    # when 15 more arrive half a second later (5 spans refilled)
    clock[0] += 0.5
    wait = limiter.retry_after(KEY, 10.0, 15)

    # then they must wait the second it takes to refill the other 10
    assert wait == pytest.approx(1.0)


def test_a_bucket_idle_for_its_burst_gives_its_slot_to_another_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # given a one-slot table whose slot holds an emptied bucket of one key
    path = create_table(str(tmp_path), slots=1)
    clock = [FROZEN]
    limiter = SpanRateLimiter(burst_seconds=2.0, clock=lambda: clock[0], table_path=path)
    assert limiter.retry_after("first", 10.0, 20) == 0.0

    # when another key sends its burst once the first has been idle for as long as a burst
    # takes to refill
    clock[0] += 2.0
    with caplog.at_level(logging.WARNING, logger="ingest.ratelimit"):
        second = limiter.retry_after("second", 10.0, 20)

    # then it got the slot with a full bucket, and the table was not found full
    assert second == 0.0
    assert caplog.records == []


def test_a_full_table_falls_back_to_a_bucket_of_this_process_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # given a one-slot table held by a busy key
    path = create_table(str(tmp_path), slots=1)
    limiter = SpanRateLimiter(clock=_frozen_clock, table_path=path)
    assert limiter.retry_after("busy", 10.0, 1) == 0.0

    # when another key sends its burst twice
    with caplog.at_level(logging.WARNING, logger="ingest.ratelimit"):
        first = limiter.retry_after("other", 10.0, 20)
        second = limiter.retry_after("other", 10.0, 20)

    # then it is still limited (by a bucket of its own in this process), and that was said once
    assert first == 0.0
    assert second == pytest.approx(2.0)
    assert [r.message for r in caplog.records] == ["ingest.rate_limit_table_full"]


def test_a_table_that_cannot_be_opened_leaves_limits_per_process_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    # given a path where no table is
    missing = str(tmp_path / "missing")

    # when a limiter is made for it
    with caplog.at_level(logging.WARNING, logger="ingest.ratelimit"):
        limiter = SpanRateLimiter(clock=_frozen_clock, table_path=missing)

    # then it limits on its own, and the log says why
    assert not limiter.shared
    assert limiter.retry_after(KEY, 10.0, 20) == 0.0
    assert limiter.retry_after(KEY, 10.0, 1) == pytest.approx(0.1)
    assert [r.message for r in caplog.records] == ["ingest.rate_limit_table_unavailable"]


def test_hosts_divide_the_rate():
    # given a limiter on one of 4 ingest hosts
    limiter = SpanRateLimiter(burst_seconds=2.0, clock=_frozen_clock, hosts=4)

    # when a token allowed 100 spans/s sends 50 spans twice
    first = limiter.retry_after(KEY, 100.0, 50)
    second = limiter.retry_after(KEY, 100.0, 50)

    # then this host allowed a burst of 2 s of 25 spans/s, and the rest refill at 25/s
    assert first == 0.0
    assert second == pytest.approx(2.0)
