"""One ingest process's capacity (request bytes in flight, gRPC handler threads) shared out
among teams, work-conserving: a team alone may use all of it, and its share bounds it only
while another team is waiting.

The rule, the same for both protocols:

* nobody holds more than the capacity: a take past it is refused (:class:`CapacityTaken`,
  503 / ``UNAVAILABLE``) or, when the caller may wait and its team is within its share,
  waits for a release;
* a team that is refused or waits while within its share is *waiting* for a short while
  (``patience_s``) or until it is served;
* while another team is waiting, a team past its share is refused (:class:`ShareTaken`,
  429 / ``RESOURCE_EXHAUSTED``: the refusal is its own), and what it holds that can be given
  back (a gRPC call still waiting for its message) is reclaimed, newest first.

So a lone team (most installations) is never held back by the share, and under contention
each team still finds its share: what another team holds beyond it is refused growth at
once, and given back as it finishes. Pure of Django; thread-safe (gRPC handlers run on a
thread pool, the HTTP listener on its event loop thread).
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["CapacityShares", "CapacityTaken", "Claim", "ShareTaken", "share_of"]

# How long a refused team counts as waiting: the answer's Retry-After is a second or two, so
# its retry finds the room others were refused growth into.
DEFAULT_PATIENCE_S = 3.0


class ShareTaken(Exception):
    """The team holds its share and another team is waiting: its own refusal (429)."""


class CapacityTaken(Exception):
    """The process holds all it may: refused for now (503). ``may_wait``: the team is within
    its share, so it counts as waiting and may ask again soon."""

    def __init__(self, *, may_wait: bool) -> None:
        super().__init__("capacity taken")
        self.may_wait = may_wait


def share_of(capacity: int, percent: int) -> int:
    """A team's share of ``capacity`` at ``percent`` (at least one unit)."""
    return max(1, math.floor(capacity * percent / 100))


@dataclass(eq=False)
class Claim:
    """Units one request holds; ``reclaim``, while set, gives them back early when asked."""

    team: Hashable
    units: int
    reclaim: Callable[[], None] | None = None


class CapacityShares:
    def __init__(
        self,
        capacity: int,
        share: int,
        *,
        patience_s: float = DEFAULT_PATIENCE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 0 < share <= capacity:
            raise ValueError(f"need 0 < share <= capacity, got {share} of {capacity}")
        self.capacity = capacity
        self.share = share
        self.patience_s = patience_s
        self.clock = clock
        self.held = 0
        self._by_team: dict[Hashable, int] = {}
        self._claims: dict[Hashable, list[Claim]] = defaultdict(list)
        self._waiting_until: dict[Hashable, float] = {}
        self._releases = 0  # releases so far: a waiter sees one it did not wait for
        self._changed = threading.Condition()

    def take(self, team: Hashable, units: int, *, wait_s: float = 0.0) -> Claim:
        """Hold ``units`` more for ``team``, or raise (holding nothing more).

        With ``wait_s`` a team within its share waits up to that long for room (a team past
        it never waits: it holds more than its share already)."""
        with self._changed:
            deadline = self.clock() + wait_s
            while True:
                now = self.clock()
                releases = self._releases
                if self._admit(team, units, now):
                    claim = Claim(team, units)
                    self._claims[team].append(claim)
                    return claim
                left = deadline - now
                if left <= 0:
                    raise CapacityTaken(may_wait=True)
                if releases == self._releases:  # else a release came while reclaiming
                    self._changed.wait(min(left, self.patience_s / 2))

    def release(self, claim: Claim) -> None:
        with self._changed:
            claims = self._claims[claim.team]
            claims.remove(claim)
            if not claims:
                del self._claims[claim.team]
            left = self._by_team[claim.team] - claim.units
            if left:
                self._by_team[claim.team] = left
            else:
                del self._by_team[claim.team]
            self.held -= claim.units
            self._releases += 1
            self._changed.notify_all()

    def grow(self, claim: Claim, units: int) -> None:
        """Hold ``units`` more under ``claim`` (a body's next bytes), or raise."""
        with self._changed:
            if not self._admit(claim.team, units, self.clock()):
                raise CapacityTaken(may_wait=True)
            claim.units += units

    def _admit(self, team: Hashable, units: int, now: float) -> bool:
        """The rule, with the lock held: hold ``units`` more for ``team`` (True); or, when
        the process is full and the team within its share, count it as waiting and ask
        others for what they hold past theirs (False); else raise."""
        within = self._by_team.get(team, 0) + units <= self.share
        if not within and self._others_waiting(team, now):
            raise ShareTaken
        if self.held + units <= self.capacity:
            self._waiting_until.pop(team, None)
            self._by_team[team] = self._by_team.get(team, 0) + units
            self.held += units
            return True
        if not within:
            raise CapacityTaken(may_wait=False)
        self._waiting_until[team] = now + self.patience_s
        self._reclaim_from_others(team)
        return False

    def settle(self, claim: Claim) -> None:
        """``claim`` can no longer be given back early (its request is being served)."""
        with self._changed:
            claim.reclaim = None

    def held_by(self, team: Hashable) -> int:
        with self._changed:
            return self._by_team.get(team, 0)

    def _others_waiting(self, team: Hashable, now: float) -> bool:
        expired = [other for other, until in self._waiting_until.items() if until <= now]
        for other in expired:
            del self._waiting_until[other]
        return any(other != team for other in self._waiting_until)

    def _reclaim_from_others(self, team: Hashable) -> None:
        """Ask the newest reclaimable claim of each other team past its share to give its
        units back; it releases them itself, which wakes the waiters. Called with the lock
        held, which the callbacks run without."""
        callbacks = []
        for other, claims in self._claims.items():
            if other == team or self._by_team.get(other, 0) <= self.share:
                continue
            for claim in reversed(claims):
                if claim.reclaim is not None:
                    callbacks.append(claim.reclaim)
                    claim.reclaim = None
                    break
        if not callbacks:
            return
        self._changed.release()
        try:
            for reclaim in callbacks:
                reclaim()
        finally:
            self._changed.acquire()
