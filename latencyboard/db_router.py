"""Dashboard reads from a streaming read replica; everything else on the primary.

With ``DATABASE_REPLICA_URL`` set, the reads of a GET or HEAD request (pages and the API) of
the derived tables (rollups, cohort rollups, stage shares, SLA minutes, raw spans) go to the
``replica`` database: the ORM's through :class:`ReplicaRouter`, raw SQL's through
``latencyboard.db.read_connection``. Every write, and every read outside such a request (the
fold, ingest, alert evaluation, reports, live sockets), stays on the primary, and so do the
tables people edit (users, sessions, teams, pipelines, SLA objectives, alert rules…), so a
page shown after a change shows the change.

A replica lags its primary: a dashboard may be up to ``DATABASE_REPLICA_MAX_LAG_SECONDS``
behind (usually well under a second). Each request asks the replica how far behind it is
(one round trip); past the limit, or when the replica cannot be reached, the request reads
the primary instead, and an unreachable replica is not tried again for
``DATABASE_REPLICA_RETRY_SECONDS``, so an outage costs one connect timeout per process and
period rather than one per request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections
from django.http import HttpRequest, HttpResponse

from latencyboard.storage import replica_lag

logger = logging.getLogger(__name__)

REPLICA: Final = "replica"
"""The alias of the read replica in ``settings.DATABASES`` (present when configured)."""

REPLICA_MODELS: Final = frozenset(
    {
        "rollups.rollup",
        "rollups.cohortrollup",
        "rollups.stageshare",
        "sla.slaminute",
        "spans.span",
    }
)
"""The models whose reads go to the replica inside :func:`replica_reads`: rows that only
the fold and ingest write, never a person, so no page reads its own writes from them."""

_READ_METHODS: Final = frozenset({"GET", "HEAD"})

_read_alias: ContextVar[str] = ContextVar("latencyboard_read_alias", default=DEFAULT_DB_ALIAS)
_outage_lock = threading.Lock()
_down_until = 0.0  # time.monotonic() before which the replica is not tried


def read_alias() -> str:
    """The database that dashboard reads go to now: the replica inside :func:`replica_reads`
    when it is up and caught up, else the primary."""
    return _read_alias.get()


@contextmanager
def replica_reads() -> Iterator[str]:
    """Send dashboard reads to the replica within the block, when it is configured, reachable
    and within the lag limit; yields the alias chosen."""
    token = _read_alias.set(_usable_replica())
    try:
        yield _read_alias.get()
    finally:
        _read_alias.reset(token)


def _usable_replica() -> str:
    global _down_until
    if REPLICA not in settings.DATABASES or time.monotonic() < _down_until:
        return DEFAULT_DB_ALIAS
    replica = connections[REPLICA]
    try:
        with replica.cursor() as cursor:
            lag = replica_lag.lag_seconds(cursor)
    except (OperationalError, InterfaceError) as exc:
        replica.close()
        with _outage_lock:
            _down_until = time.monotonic() + settings.DATABASE_REPLICA_RETRY_SECONDS
        logger.warning("replica.unreachable", extra={"error": str(exc).strip()})
        return DEFAULT_DB_ALIAS
    if lag > settings.DATABASE_REPLICA_MAX_LAG_SECONDS:
        logger.warning("replica.lagging", extra={"lag_seconds": lag})
        return DEFAULT_DB_ALIAS
    return REPLICA


class ReplicaRouter:
    """Reads of :data:`REPLICA_MODELS` to :func:`read_alias`; everything else, and every write
    and migration, to the primary."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if model._meta.label_lower in REPLICA_MODELS:
            return read_alias()
        return DEFAULT_DB_ALIAS

    def db_for_write(self, model: type[Any], **hints: Any) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool:
        return True  # the replica is a copy of the primary: the same rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == DEFAULT_DB_ALIAS


class ReplicaReads:
    """Middleware: the reads of GET and HEAD requests go through :func:`replica_reads`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method not in _READ_METHODS:
            return self.get_response(request)
        with replica_reads():
            return self.get_response(request)
