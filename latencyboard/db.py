"""PostgreSQL through psycopg directly, for the bulk paths (binary COPY, array parameters)."""

from __future__ import annotations

from typing import Any, cast

import psycopg
from django.conf import settings
from django.db import connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from psycopg.conninfo import make_conninfo

from latencyboard.db_router import read_alias
from latencyboard.storage import heavy_read_lock


class _ReadConnection:
    """Stands for the Django connection of :func:`latencyboard.db_router.read_alias`, looked
    up on each use, as ``django.db.connection`` stands for the default one."""

    def __getattr__(self, name: str) -> Any:
        return getattr(connections[read_alias()], name)


read_connection = cast(BaseDatabaseWrapper, _ReadConnection())


def bound_statements(seconds: int) -> None:
    """From now on, PostgreSQL cancels any statement of this process's new connections after
    ``seconds`` (0: never). The web process calls it, so that no page or API read holds a
    connection and a core for minutes; a cancelled statement is answered 503 with
    Retry-After (:mod:`latencyboard.web.errors`)."""

    def bound(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, false)", [f"{seconds}s"])

    uid = "latencyboard.db.bound_statements"
    connection_created.disconnect(dispatch_uid=uid)  # the latest bound holds
    connection_created.connect(bound, weak=False, dispatch_uid=uid)


def pool_connections(size: int, wait_seconds: int) -> None:
    """From now on, this process's connections to each database come from a pool of at most
    ``size``, waited for up to ``wait_seconds`` (then Django's ``OperationalError``, answered
    503 with Retry-After); with ``size`` 0, from Django's per-thread persistent connections
    again. The latest call holds; call it before the process's first query.

    The web process pools. It serves each request on a thread of its own (Django's ASGI
    handler), and Django's persistent connections are per thread: without a pool every
    request, even a refused one, started a PostgreSQL backend and filled its catalog caches.
    A connection goes back to the pool holding no advisory lock, so that a heavy read's slot
    never outlives its request."""
    for alias, database in settings.DATABASES.items():
        options = database.setdefault("OPTIONS", {})
        _unpooled_max_age.setdefault(alias, database["CONN_MAX_AGE"])
        if size:
            database["CONN_MAX_AGE"] = 0  # the pool keeps the connections
            options["pool"] = pool_options(size, wait_seconds)
        else:
            database["CONN_MAX_AGE"] = _unpooled_max_age[alias]
            options.pop("pool", None)


_unpooled_max_age: dict[str, Any] = {}


def pool_options(size: int, wait_seconds: int) -> dict[str, Any]:
    """The options of :func:`pool_connections`'s pools (psycopg_pool's ``ConnectionPool``)."""
    return {
        "min_size": 1,
        "max_size": size,
        "timeout": wait_seconds,
        "reset": heavy_read_lock.release_all,
    }


"""The connection for dashboard reads in raw SQL: the read replica inside a dashboard request
when it is up (see :mod:`latencyboard.db_router`), else the primary's ``connection``."""


_DJANGO_OPTIONS = frozenset({"assume_role", "isolation_level", "pool", "server_side_binding"})
"""Keys of a database's ``OPTIONS`` that Django's backend takes for itself, not libpq."""


def conninfo(alias: str = "default") -> str:
    """A libpq connection string for the Django database ``alias``."""
    db = settings.DATABASES[alias]
    params = {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "dbname": db.get("NAME") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        **{k: v for k, v in db.get("OPTIONS", {}).items() if k not in _DJANGO_OPTIONS},
    }
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


def psycopg_cursor(
    *, server_side_binding: bool = True, db: BaseDatabaseWrapper = connection
) -> psycopg.Cursor[Any]:
    """A psycopg cursor in Django's current transaction, returning plain tuples.

    By default it binds parameters server side, so arrays travel as arrays and results may
    be binary, unlike Django's cursors. With ``server_side_binding=False`` it is of the
    connection's own cursor class, which binds client side as Django's cursors do (unless the
    database ``OPTIONS`` ask for server-side binding). ``db`` is the Django connection to use
    (``read_connection`` for dashboard reads).
    """
    db.ensure_connection()
    if server_side_binding:
        return psycopg.Cursor(db.connection)
    cursor: psycopg.Cursor[Any] = db.connection.cursor()
    return cursor
