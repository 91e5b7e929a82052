"""Coalescing a pipeline's new minutes into few live events (pure: no Django here).

A busy pipeline is folded many times a second; its pages need at most a few events a second,
each carrying every minute touched since the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Touched:
    """Minute buckets ``first``..``last`` (Unix seconds, inclusive) of a pipeline got spans."""

    pipeline_id: int
    team_id: int
    first: int
    last: int

    def union(self, other: Touched) -> Touched:
        return Touched(
            self.pipeline_id, self.team_id, min(self.first, other.first), max(self.last, other.last)
        )


class Coalescer:
    """Holds the touched minutes of each pipeline and lets them out together at most once per
    ``interval`` seconds: at once the first time, then merged until the interval is over. So
    every group, a pipeline's or a team's, hears at most one event per interval."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self.pending: dict[int, Touched] = {}
        self.released_at: float | None = None

    def add(self, touched: Iterable[Touched]) -> None:
        for item in touched:
            held = self.pending.get(item.pipeline_id)
            self.pending[item.pipeline_id] = item if held is None else held.union(item)

    def due(self) -> list[Touched]:
        """Every pending pipeline if the last release is at least ``interval`` ago, else none."""
        now = self.clock()
        if self.released_at is not None and now - self.released_at < self.interval:
            return []
        return self.drain()

    def drain(self) -> list[Touched]:
        """Every pending pipeline, whatever the interval (the folding has stopped)."""
        if not self.pending:
            return []
        self.released_at = self.clock()
        released, self.pending = list(self.pending.values()), {}
        return released
