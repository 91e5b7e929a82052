"""Connection details for code that talks to PostgreSQL with psycopg directly (bulk paths)."""

from __future__ import annotations

from django.conf import settings
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
