"""PostgreSQL through psycopg directly, for the bulk paths (binary COPY, array parameters)."""

from __future__ import annotations

from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from psycopg.conninfo import make_conninfo


def conninfo(alias: str = "default") -> str:
    """A libpq connection string for the Django database ``alias``."""
    db = settings.DATABASES[alias]
    params = {
        "host": db.get("HOST") or None,
        "port": db.get("PORT") or None,
        "dbname": db.get("NAME") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        **db.get("OPTIONS", {}),
    }
    return make_conninfo(**{k: v for k, v in params.items() if v is not None})


def psycopg_cursor(*, server_side_binding: bool = True) -> psycopg.Cursor[Any]:
    """A psycopg cursor in Django's current transaction, returning plain tuples.

    By default it binds parameters server side, so arrays travel as arrays and results may
    be binary, unlike Django's cursors. With ``server_side_binding=False`` it is of the
    connection's own cursor class, which binds client side as Django's cursors do (unless the
    database ``OPTIONS`` ask for server-side binding).
    """
    connection.ensure_connection()
    if server_side_binding:
        return psycopg.Cursor(connection.connection)
    cursor: psycopg.Cursor[Any] = connection.connection.cursor()
    return cursor
