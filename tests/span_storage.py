"""The span table between tests."""

from __future__ import annotations


def empty_span_table() -> None:
    """Delete every stored span and span event, as Django's flush does every model's table.
    The span table has no model of its own (rows are written by COPY and read through a
    view), so the flush between tests leaves it alone. Resources and span templates stay: they
    are content-addressed, never deleted, and cached by long-lived ingest processes."""
    from django.db import connection

    from latencyboard.storage import tables

    with connection.cursor() as cursor:
        spans, events = tables.SPAN, tables.SPAN_EVENTS
        cursor.execute(f"SELECT EXISTS (SELECT FROM {spans}) OR EXISTS (SELECT FROM {events})")  # noqa: S608
        if cursor.fetchone()[0]:
            cursor.execute(f"TRUNCATE {tables.SPAN}, {tables.SPAN_EVENTS}")
