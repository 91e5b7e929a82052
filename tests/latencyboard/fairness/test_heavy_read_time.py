"""While other teams use a web process, a team whose heavy reads run back to back is held to
its share of the process's time: its slots rest after each read. Alone, or within its share,
it is never slowed."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections

from latencyboard.fairness import heavy_reads, requests_in_flight
from latencyboard.fairness.heavy_read_time import WINDOW_SECONDS, HeavyReadTime
from tests.factories import make_team
from tests.latencyboard.fairness.test_heavy_reads import team_member, with_read_only_token

A, B = 1, 2


def reads_back_to_back(shares: HeavyReadTime, team: int, count: int, seconds: float) -> list[float]:
    """The rests of ``count`` reads of ``seconds`` one after another (each after the rest
    before it), team A making a request every second meanwhile."""
    rests, now = [], 0.0
    for _ in range(count):
        shares.saw([A], now)
        now += seconds
        rests.append(shares.rest([team], seconds, now, share=0.25))
        now += rests[-1]
    return rests


def test_a_team_reading_back_to_back_beside_another_rests_three_times_its_read():
    rests = reads_back_to_back(HeavyReadTime(), B, 200, 0.05)
    # once over its quarter, each 50 ms read rests 150 ms: reads run a quarter of the time
    assert rests[0] == 0
    assert rests[-1] == pytest.approx(0.15)
    busy = 100 * 0.05  # the last hundred reads, long past the first ones within the share
    assert busy / (busy + sum(rests[-100:])) == pytest.approx(0.25, abs=0.01)


def test_a_team_alone_on_the_process_never_rests():
    shares = HeavyReadTime()
    now = 0.0
    for _ in range(200):
        shares.saw([B], now)
        now += 0.05
        assert shares.rest([B], 0.05, now, share=0.25) == 0


def test_a_page_of_charts_within_the_share_does_not_rest():
    # ten 100 ms charts, one after another, with team A about: a second of a ten-second window
    shares = HeavyReadTime()
    assert reads_back_to_back(shares, B, 10, 0.1) == [0] * 10


def test_the_other_team_counts_only_while_recently_seen():
    shares = HeavyReadTime()
    shares.saw([A], 0.0)
    now = 2 * WINDOW_SECONDS
    for _ in range(200):
        now += 0.05
        assert shares.rest([B], 0.05, now, share=0.25) == 0


def test_a_rest_is_at_most_the_window():
    shares = HeavyReadTime()
    shares.saw([A], 30.0)
    assert shares.rest([B], 30.0, 30.0, share=0.01) == WINDOW_SECONDS


@pytest.mark.django_db(transaction=True)
def test_a_resting_team_keeps_its_slot_and_the_others_are_served(settings, monkeypatch):
    """Over its share (1 %), a team's 100 ms read keeps its slot for 9.9 s after it ends: a
    second later its next read is still refused, while another team's read is served."""
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 1
    settings.WEB_HEAVY_WAIT_SECONDS = 0
    settings.WEB_TEAM_HEAVY_SHARE_PERCENT = 1
    shares = HeavyReadTime()
    monkeypatch.setattr(heavy_reads, "HEAVY_READ_TIME", shares)
    a, b = make_team().pk, make_team().pk
    shares.saw([a], time.monotonic())
    shares.rest([b], WINDOW_SECONDS, time.monotonic(), share=0.01)  # b read all along
    read_ended = threading.Event()

    def read() -> None:
        try:
            with heavy_reads.team_slots([b]):
                time.sleep(0.1)  # the read itself, whose time sets the rest
                read_ended.set()
        finally:
            connections.close_all()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert read_ended.wait(60)
        # No event marks the rest: a second is long past when the slot would be given back
        # without one, and well within its 9.9 s.
        time.sleep(1)
        with pytest.raises(heavy_reads.Busy), heavy_reads.team_slots([b]):
            pass
        with heavy_reads.team_slots([a]):
            served = True
    finally:
        reader.join(60)
    assert served


@pytest.mark.django_db(transaction=True)
def test_a_token_reading_over_its_share_rests_while_another_teams_token_is_about(
    settings, monkeypatch
):
    """API tokens count as sessions do: team A, seen only through its token, makes team B's
    token read (B over its 1 % share) keep its slot for a rest before it is answered."""
    settings.WEB_TEAM_MAX_HEAVY_REQUESTS = 1
    settings.WEB_HEAVY_WAIT_SECONDS = 0
    settings.WEB_TEAM_HEAVY_SHARE_PERCENT = 1
    shares = HeavyReadTime()
    monkeypatch.setattr(heavy_reads, "HEAVY_READ_TIME", shares)
    monkeypatch.setattr(requests_in_flight, "HEAVY_READ_TIME", shares)
    (a, _), (b, b_pipeline) = team_member(with_read_only_token), team_member(with_read_only_token)
    shares.rest([b_pipeline.team_id], WINDOW_SECONDS, time.monotonic(), share=0.01)
    assert a.get("/api/pipelines/").status_code == 200

    began = time.monotonic()
    read = b.get(f"/api/pipelines/{b_pipeline.id}/percentiles/?window=1h&step=1m")
    answered_after = time.monotonic() - began

    # any read takes over a millisecond, and rests 99 times its length (at most the window)
    assert read.status_code == 200
    assert answered_after > 0.1
