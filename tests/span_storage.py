"""The span table between tests."""

from __future__ import annotations


def empty_span_table() -> None:
    """Delete every stored span, as Django's flush does every model's table. The span table
    has no model of its own (rows are written by COPY and read through a view), so the flush
    between tests leaves it alone. Resources and span templates stay: they are content-addressed,
    never deleted, and cached by long-lived ingest processes."""
    from django.db import connection

    from latencyboard.storage import tables

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT EXISTS (SELECT FROM {tables.SPAN})")  # noqa: S608 (a constant)
        if cursor.fetchone()[0]:
            cursor.execute(f"TRUNCATE {tables.SPAN}")
