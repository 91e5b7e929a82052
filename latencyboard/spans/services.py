"""Maintenance of the span table."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import connection, transaction

from latencyboard.spans import partitions

logger = logging.getLogger(__name__)


def existing_partitions() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT child.relname FROM pg_inherits
            JOIN pg_class parent ON parent.oid = pg_inherits.inhparent
            JOIN pg_class child ON child.oid = pg_inherits.inhrelid
            WHERE parent.relname = %s ORDER BY child.relname
            """,
            [partitions.PARENT_TABLE],
        )
        return [name for (name,) in cursor.fetchall()]


def ensure_partitions(now: dt.datetime, ahead_days: int | None = None) -> list[str]:
    """Create the day partitions live traffic lands in; returns the names it created."""
    ahead = settings.PARTITIONS_AHEAD_DAYS if ahead_days is None else ahead_days
    present = set(existing_partitions())
    created = []
    for partition in partitions.wanted(now, ahead):
        if partition.name in present:
            continue
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(partition.create_sql())
        created.append(partition.name)
    if created:
        logger.info("spans.partitions_created", extra={"partitions": created})
    return created


def drop_expired_partitions(now: dt.datetime, retention_days: int | None = None) -> list[str]:
    """Drop the day partitions that fell out of the retention window; returns their names."""
    retention = settings.RETENTION_DAYS if retention_days is None else retention_days
    dropped = []
    for partition in partitions.expired(existing_partitions(), now, retention):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {partition.name}")
        dropped.append(partition.name)
    if dropped:
        logger.info("spans.partitions_dropped", extra={"partitions": dropped})
    return dropped
