"""Where each value of a cohort attribute was seen: the buckets of the cohort rollups holding it.
Callers scope the pipeline to the user's teams first."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from latencyboard.db import read_connection as connection  # the replica for dashboards
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.queries import stored_rows
from latencyboard.storage import cohort_reads, tables
from latencyboard.windows import RESOLUTION_SECONDS, finest_cover


def version_buckets(
    pipeline: Pipeline, attributes: Sequence[str], start: dt.datetime, end: dt.datetime
) -> list[tuple[str, str, dt.datetime, int, int]]:
    """Each bucket of ``[start, end)`` in which a value of one of ``attributes`` was seen in
    the pipeline: ``(attribute, value, bucket_start, bucket seconds, spans)``, from the
    finest rows kept: minutes, hours before them, days before those."""
    segments = finest_cover(start, end, stored_rows(tables.ROLLUP, pipeline.pk))
    if not segments:
        return []
    sized = [(part, RESOLUTION_SECONDS[part.resolution]) for part in segments]
    sql, params = cohort_reads.version_buckets(pipeline.pk, attributes, sized)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [(a, v, b, int(s), int(n)) for a, v, b, s, n in rows]
