"""Maintenance of the span table."""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.db import connection, transaction

from latencyboard.spans import partitions
from latencyboard.storage import partitions as storage_partitions
from latencyboard.storage import thinning

logger = logging.getLogger(__name__)


def existing_partitions() -> list[str]:
    with connection.cursor() as cursor:
        return storage_partitions.existing(cursor)


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
    """Drop the day partitions that fell out of the retention window; returns their names.

    Each drop waits for a thinning in progress: both lock the span table and its partitions,
    in orders that can deadlock, so they take the thinner's lock first."""
    retention = settings.RETENTION_DAYS if retention_days is None else retention_days
    dropped = []
    for partition in partitions.expired(existing_partitions(), now, retention):
        with transaction.atomic(), connection.cursor() as cursor:
            thinning.lock(cursor)
            cursor.execute(partition.drop_sql())
        dropped.append(partition.name)
    if dropped:
        logger.info("spans.partitions_dropped", extra={"partitions": dropped})
    return dropped
