"""At most ``WEB_TEAM_MAX_HEAVY_REQUESTS`` heavy reads of one team at once, across every web
process of the database.

A heavy read is one whose cost grows with the window or the data asked for: the series
endpoints, compare, trace search, the Prometheus queries, the overview, and a rule's preview
and reach. A web process runs Python one thread at a time, so a team running many such reads at
once (each within its point cap) would slow every other team's pages. The web runs in several
processes (``WEB_CONCURRENCY`` under ``make run``), so that one team's read slows only the
process it runs in; the bound is shared by them all, or a team would get a slot in each. Each
heavy read holds a slot of each team of its user for its whole length: a PostgreSQL advisory
lock of the request's connection (a process that dies gives its slots back with it). When one
of them holds all its slots, the read waits in the database's lock queue, first come first
served and using no CPU, up to ``WEB_HEAVY_WAIT_SECONDS`` (so a page's charts fetched together
are served one after another, and a client asking again at once is slowed to the team's share
rather than flooding the processes); still without one it is refused with ``429``,
``Retry-After`` and a JSON body. Either way after one lookup of the user's teams and before any
query of the read itself. Views take the bound through :class:`HeavyRead` (DRF) or
:func:`heavy_read` (function views).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, ClassVar, Final

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, OperationalError, connections, transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from psycopg import errors
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.response import Response

from latencyboard.fairness.heavy_read_time import HEAVY_READ_TIME
from latencyboard.fairness.requests_in_flight import started_at, team_ids
from latencyboard.storage import heavy_read_lock
from latencyboard.teams.queries import teams_of

_GAVE_UP: Final = (errors.LockNotAvailable, errors.QueryCanceled)


class Busy(Exception):
    """A team of the user already runs its most heavy reads at once."""

    def __str__(self) -> str:
        return (
            f"Your team already runs {settings.WEB_TEAM_MAX_HEAVY_REQUESTS} heavy reads at "
            f"once; try again in {settings.WEB_RETRY_AFTER_SECONDS} s."
        )


def _take(team: int, deadline: float) -> tuple[int, int] | None:
    """A free slot of ``team`` (its lock, now held), else the first of a random one to free
    before ``deadline``, else None."""
    slots = [heavy_read_lock.key(n, team) for n in range(settings.WEB_TEAM_MAX_HEAVY_REQUESTS)]
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        for key in slots:
            if heavy_read_lock.try_take(cursor, key):
                return key
        wait_ms = int((deadline - time.monotonic()) * 1000)
        if wait_ms <= 0:
            return None
        key = random.choice(slots)  # noqa: S311 - spreading waiters, not a secret
        try:
            # A session lock outlives the transaction; the lock timeout ends with it.
            with transaction.atomic(using=DEFAULT_DB_ALIAS):
                heavy_read_lock.wait(cursor, key, wait_ms)
        except OperationalError as exc:
            if isinstance(exc.__cause__, _GAVE_UP):
                return None
            raise
        return key


@contextmanager
def team_slots(teams: Iterable[int], since: float | None = None) -> Iterator[None]:
    """Hold one heavy-read slot of each of ``teams`` for the block; raise :class:`Busy` on
    entry when one of them has none left within ``WEB_HEAVY_WAIT_SECONDS``. Teams are taken
    in order, so that users sharing teams never wait for each other in a cycle. A team over
    its share of the process's time keeps them for a rest after the block, in proportion to
    the block's time and, given ``since`` (the request's start), the request's before it asked
    for them (:mod:`.heavy_read_time`)."""
    waiting = time.monotonic()
    deadline = waiting + settings.WEB_HEAVY_WAIT_SECONDS
    held: list[tuple[int, int]] = []
    ordered = sorted(set(teams))
    try:
        for team in ordered:
            key = _take(team, deadline)
            if key is None:
                raise Busy
            held.append(key)
        taken = time.monotonic()
        try:
            yield
        finally:
            # The read's time: its request's before the slots were asked for, and the block.
            ended = time.monotonic()
            seconds = ended - taken + (0 if since is None else waiting - since)
            share = settings.WEB_TEAM_HEAVY_SHARE_PERCENT / 100
            time.sleep(HEAVY_READ_TIME.rest(ordered, seconds, ended, share))
    finally:
        _release(held)


def _release(held: list[tuple[int, int]]) -> None:
    connection = connections[DEFAULT_DB_ALIAS]
    try:
        with connection.cursor() as cursor:
            for key in held:
                heavy_read_lock.release(cursor, key)
    except DatabaseError:
        connection.close()  # its session's locks end with it


@contextmanager
def slot(user: Any) -> Iterator[None]:
    """Hold one heavy-read slot of each of ``user``'s teams for the block (:func:`team_slots`)."""
    with team_slots(teams_of(user).values_list("pk", flat=True)):
        yield


def heavy_read(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A function view bounded as a heavy read (after ``login_required``)."""

    @functools.wraps(view)
    def bounded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with ExitStack() as held:
            try:
                held.enter_context(team_slots(team_ids(request), started_at(request)))
            except Busy as busy:
                response = JsonResponse({"detail": str(busy)}, status=429)
                response["Retry-After"] = str(settings.WEB_RETRY_AFTER_SECONDS)
                return response
            return view(request, *args, **kwargs)

    return bounded


class HeavyRead:
    """DRF view mixin: the request, once authenticated, holds a heavy-read slot until its
    response is made; without one it gets DRF's 429 (``Retry-After``, JSON ``detail``). In a
    viewset whose other actions are light, ``heavy_actions`` names the heavy ones."""

    heavy_actions: ClassVar[frozenset[str] | None] = None
    _held: ExitStack | None = None

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        heavy = self.heavy_actions
        if heavy is not None and getattr(self, "action", None) not in heavy:
            return
        self.before_slot(request)
        held = ExitStack()
        try:
            held.enter_context(team_slots(team_ids(request), started_at(request)))
        except Busy as busy:
            raise Throttled(wait=settings.WEB_RETRY_AFTER_SECONDS, detail=str(busy)) from None
        self._held = held

    def before_slot(self, request: Request) -> None:
        """What a request is refused for without waiting for a slot (its parameters, what it
        would read): a bad request answered at once holds no thread in the slots' queue."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Response:
        try:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        finally:
            if self._held is not None:
                self._held.close()
