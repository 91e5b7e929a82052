"""At most ``WEB_TEAM_MAX_HEAVY_REQUESTS`` heavy reads of one team at once per web process.

A heavy read is one whose cost grows with the window or the data asked for: the series
endpoints, compare, trace search, the Prometheus queries and the overview. One web process
serves every team from one interpreter, so a team running many such reads at once (each
within its point cap) would slow every other team's pages. Each heavy read holds a slot of
each team of its user for its whole length. When one of them holds all its slots, the read
waits, using no CPU, up to ``WEB_HEAVY_WAIT_SECONDS`` for one (so a page's charts fetched
together are served one after another, and a client asking again at once is slowed to the
team's share rather than flooding the process); still without one it is refused with
``429``, ``Retry-After`` and a JSON body. Either way after one lookup of the user's teams
and before any query of the read itself. Views take the bound through
:class:`HeavyRead` (DRF) or :func:`heavy_read` (function views).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response

from latencyboard.teams.models import Membership

RETRY_AFTER_SECONDS: Final = 1

_changed = threading.Condition()
_running: Counter[int] = Counter()  # team id -> heavy reads running in this process


class Busy(Exception):
    """A team of the user already runs its most heavy reads at once."""

    def __str__(self) -> str:
        return (
            f"Your team already runs {settings.WEB_TEAM_MAX_HEAVY_REQUESTS} heavy reads at "
            f"once; try again in {RETRY_AFTER_SECONDS} s."
        )


@contextmanager
def slot(user: Any) -> Iterator[None]:
    """Hold one heavy-read slot of each of ``user``'s teams for the block; raise
    :class:`Busy` on entry when one of them has none left within ``WEB_HEAVY_WAIT_SECONDS``."""
    teams = set(Membership.objects.filter(user_id=user.pk).values_list("team_id", flat=True))
    deadline = time.monotonic() + settings.WEB_HEAVY_WAIT_SECONDS
    with _changed:
        while any(_running[team] >= settings.WEB_TEAM_MAX_HEAVY_REQUESTS for team in teams):
            left = deadline - time.monotonic()
            if left <= 0:
                raise Busy
            _changed.wait(left)
        _running.update(teams)
    try:
        yield
    finally:
        with _changed:
            _running.subtract(teams)
            for team in teams:
                if _running[team] <= 0:
                    del _running[team]
            _changed.notify_all()


def heavy_read(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A function view bounded as a heavy read (after ``login_required``)."""

    @functools.wraps(view)
    def bounded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with ExitStack() as held:
            try:
                held.enter_context(slot(request.user))
            except Busy as busy:
                response = JsonResponse({"detail": str(busy)}, status=429)
                response["Retry-After"] = str(RETRY_AFTER_SECONDS)
                return response
            return view(request, *args, **kwargs)

    return bounded


class HeavyRead:
    """DRF view mixin: the request, once authenticated, holds a heavy-read slot until its
    response is made; without one it gets DRF's 429 (``Retry-After``, JSON ``detail``)."""

    _held: ExitStack | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        held = ExitStack()
        try:
            held.enter_context(slot(request.user))
        except Busy as busy:
            raise Throttled(wait=RETRY_AFTER_SECONDS, detail=str(busy)) from None
        self._held = held

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Response:
        try:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        finally:
            if self._held is not None:
                self._held.close()
