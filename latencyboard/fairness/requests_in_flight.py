"""At most ``WEB_TEAM_MAX_REQUESTS`` requests of one team at once in a web process.

A web process serves each request on a thread of its own, over one of its
``WEB_DB_POOL_SIZE`` pooled connections. A team's heavy reads beyond its bound wait for a slot
holding both, so a team sending many requests at once would take the pool and leave the
other teams' requests waiting for a connection. Beyond its bound a team's request gets
``429`` with ``Retry-After`` and a JSON body at once: after the lookup of the user's teams,
before any other work. The count is per process, as the pool and the threads are. Signed-out
requests are not counted (sign-in has its own lockout); an API token's requests count against its
user's teams, as a session's do.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import ClassVar, Final

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from latencyboard.apitokens.authentication import acting_user
from latencyboard.fairness.heavy_read_time import HEAVY_READ_TIME
from latencyboard.teams.queries import teams_of

_TEAMS: Final = "_latencyboard_team_ids"
_STARTED: Final = "_latencyboard_started"


def team_ids(request: HttpRequest) -> list[int]:
    """The ids of the teams of the request's user (an API token's as a session's), looked up
    once per request (the count here and the heavy-read slots both need them)."""
    ids: list[int] | None = getattr(request, _TEAMS, None)
    if ids is None:
        ids = list(teams_of(acting_user(request)).values_list("pk", flat=True))
        setattr(request, _TEAMS, ids)
    return ids


def started_at(request: HttpRequest) -> float | None:
    """When the request was taken in (monotonic seconds), once counted here."""
    return getattr(request, _STARTED, None)


class TeamRequestsInFlight:
    """Middleware (after authentication) counting each team's requests in this process."""

    _lock: ClassVar = threading.Lock()
    _in_flight: ClassVar[Counter[int]] = Counter()

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        setattr(request, _STARTED, started)
        teams = team_ids(request)
        HEAVY_READ_TIME.saw(teams, started)
        bound = settings.WEB_TEAM_MAX_REQUESTS
        with self._lock:
            if any(self._in_flight[team] >= bound for team in teams):
                return self._refusal(bound)
            self._in_flight.update(teams)
        try:
            return self.get_response(request)
        finally:
            with self._lock:
                self._in_flight.subtract(teams)
                for team in teams:
                    if not self._in_flight[team]:
                        del self._in_flight[team]

    @staticmethod
    def _refusal(bound: int) -> JsonResponse:
        response = JsonResponse(
            {
                "detail": f"Your team already has {bound} requests in progress here; try "
                f"again in {settings.WEB_RETRY_AFTER_SECONDS} s."
            },
            status=429,
        )
        response["Retry-After"] = str(settings.WEB_RETRY_AFTER_SECONDS)
        return response
