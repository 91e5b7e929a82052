"""Recounting an objective's exact counters from a minute on, after its threshold changed.

The same rule as ``latencyboard.sla.counting.count_minutes`` and the creation back-fill
(``duration_ns <= threshold_ns``, minutes truncated in UTC, only batches already folded: the
rollup worker counts the others itself with the objective's new threshold).
"""

from __future__ import annotations

import datetime as dt

from django.db import connection

from latencyboard.storage.tables import INGEST_BATCH, SLA_MINUTE, SPAN

_DELETE = f"DELETE FROM {SLA_MINUTE} WHERE objective_id = %(objective)s AND minute >= %(since)s"  # noqa: S608 - a constant table name, values are parameters
_INSERT = f"""
INSERT INTO {SLA_MINUTE} (objective_id, minute, good, total)
SELECT %(objective)s,
       date_trunc('minute', start_time, 'UTC'),
       count(*) FILTER (WHERE duration_ns <= %(threshold_ns)s),
       count(*)
FROM {SPAN}
WHERE pipeline_id = %(pipeline)s
  AND {{match}}
  AND start_time >= %(since)s
  AND batch_id IN (SELECT id FROM {INGEST_BATCH} WHERE rolled_up_at IS NOT NULL)
GROUP BY date_trunc('minute', start_time, 'UTC')
"""  # noqa: S608 - constant table names, values are parameters


def recount_since(
    objective_id: int,
    pipeline_id: int,
    stage_id: int | None,
    threshold_ns: int,
    since: dt.datetime,
) -> int:
    """Replace the counters of ``objective_id`` for minutes from ``since`` (a whole minute)
    with counts at ``threshold_ns``; returns how many minutes were counted. Run it inside the
    transaction holding the SLA advisory lock, as the creation back-fill does."""
    params = {
        "objective": objective_id,
        "pipeline": pipeline_id,
        "stage": stage_id,
        "threshold_ns": threshold_ns,
        "since": since,
    }
    match = "is_root" if stage_id is None else "stage_id = %(stage)s"
    with connection.cursor() as cursor:
        cursor.execute(_DELETE, params)
        cursor.execute(_INSERT.format(match=match), params)
        return cursor.rowcount
