"""One ingest process's capacity (request bytes in flight, gRPC handler threads) shared out
among teams: each team may hold at most its share, all of them together at most the whole.

So one team's clients (a token that opens silent gRPC streams, or trickles huge bodies) take
at most their share and are refused beyond it, while other teams still find room. Pure of
Django; thread-safe (gRPC handlers run on a thread pool).
"""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from collections.abc import Hashable

__all__ = ["CapacityTaken", "ShareTaken", "Shares", "share_of"]


class ShareTaken(Exception):
    """The team holds its share already: the refusal is the team's own (429)."""


class CapacityTaken(Exception):
    """The process holds all it may: every team is refused for now (503)."""


def share_of(capacity: int, percent: int) -> int:
    """A team's share of ``capacity`` at ``percent`` (at least one unit)."""
    return max(1, math.floor(capacity * percent / 100))


class Shares:
    def __init__(self, capacity: int, share: int) -> None:
        if not 0 < share <= capacity:
            raise ValueError(f"need 0 < share <= capacity, got {share} of {capacity}")
        self.capacity = capacity
        self.share = share
        self.held = 0
        self._by_team: defaultdict[Hashable, int] = defaultdict(int)
        self._lock = threading.Lock()

    def take(self, team: Hashable, units: int) -> None:
        """Hold ``units`` more for ``team``, or raise (holding nothing more)."""
        with self._lock:
            if self._by_team[team] + units > self.share:
                raise ShareTaken
            if self.held + units > self.capacity:
                raise CapacityTaken
            self._by_team[team] += units
            self.held += units

    def release(self, team: Hashable, units: int) -> None:
        with self._lock:
            left = self._by_team[team] - units
            if left:
                self._by_team[team] = left
            else:
                del self._by_team[team]
            self.held -= units

    def held_by(self, team: Hashable) -> int:
        with self._lock:
            return self._by_team.get(team, 0)
