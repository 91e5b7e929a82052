"""A worker's share of the host's keep-alive connections (pure)."""

from __future__ import annotations

from pathlib import Path

from ingest.balance import ConnectionCounts, create_counts


def test_a_worker_past_its_share_of_the_connections_sheds_until_even(tmp_path: Path) -> None:
    # given two workers' counters, the first holding three connections and the second one
    path = create_counts(2, directory=str(tmp_path))
    first, second = ConnectionCounts(path, 0), ConnectionCounts(path, 1)
    for _ in range(3):
        first.opened()
    second.opened()

    # when the first sheds one, and the client's next connection lands on the second
    shedding = first.over_share()
    first.closed()
    second.opened()

    # then only the first was past its share (four over two), and now neither is
    assert (shedding, second.over_share()) == (True, False)
    assert (first.over_share(), second.over_share()) == (False, False)


def test_an_odd_connection_stays_where_it_is(tmp_path: Path) -> None:
    # given three connections over two workers, two on the first
    path = create_counts(2, directory=str(tmp_path))
    first, second = ConnectionCounts(path, 0), ConnectionCounts(path, 1)
    first.opened()
    first.opened()
    second.opened()

    # then nobody sheds: two is the first's share of three, rounded up
    assert (first.over_share(), second.over_share()) == (False, False)


def test_a_process_alone_never_sheds() -> None:
    alone = ConnectionCounts()
    for _ in range(5):
        alone.opened()
    assert alone.over_share() is False
