"""Each team's share of a web process's time in heavy reads, while other teams use it (pure:
no Django).

A team's heavy reads go one after another through its slots (:mod:`.heavy_reads`), but back to
back: a team that asks again as soon as it is answered keeps a read running in some web
process all the time, and a process runs Python one thread at a time, so the other teams'
requests in that process wait for it. Profiling ``make bench-fairness`` showed this: team A's
pages slowed under team B's expensive queries when both were served by the same processes,
not when B's were served by processes of their own, though B's reads used under a third of a
core.

So each process keeps, per team, its time in heavy-read requests (from the request's start,
sign-in check and team lookup included, to the read's end) over about the last
:data:`WINDOW_SECONDS` (decaying exponentially). When a team has spent more than its share of
that time, and another team has made a request here within it, each of its reads keeps its
slots for a rest after it ends (``seconds * (1 / share - 1)``, at most
:data:`WINDOW_SECONDS`): its reads then take at most ``share`` of the time. A team alone on
the process is never slowed, nor is one under its share (a page's charts loading together).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from typing import Final

WINDOW_SECONDS: Final = 10.0


class HeavyReadTime:
    """Per team: decayed seconds in heavy reads and when they were noted, and when the team
    was last seen making a request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: dict[int, tuple[float, float]] = {}
        self._seen: dict[int, float] = {}

    def saw(self, teams: Iterable[int], now: float) -> None:
        """``teams`` made a request ``now`` (monotonic seconds)."""
        with self._lock:
            for team in teams:
                self._seen[team] = now
            for team, at in list(self._seen.items()):
                if now - at > WINDOW_SECONDS:
                    del self._seen[team]

    def rest(self, teams: Iterable[int], seconds: float, now: float, share: float) -> float:
        """Note a heavy read of ``teams`` of ``seconds`` ended ``now``; the seconds its slots
        should rest before they are given back (0 within the share or alone)."""
        rest = 0.0
        with self._lock:
            for team in teams:
                busy, at = self._busy.get(team, (0.0, now))
                busy = busy * math.exp(-(now - at) / WINDOW_SECONDS) + seconds
                self._busy[team] = (busy, now)
                others = any(
                    other != team and now - seen <= WINDOW_SECONDS
                    for other, seen in self._seen.items()
                )
                if others and busy / WINDOW_SECONDS > share:
                    rest = max(rest, min(seconds * (1 / share - 1), WINDOW_SECONDS))
        return rest


HEAVY_READ_TIME: Final = HeavyReadTime()
"""This process's."""
