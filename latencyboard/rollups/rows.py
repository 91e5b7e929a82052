"""Reading spans and writing rollup rows over a psycopg cursor: what folds, compaction and
rebuilds share (see :mod:`latencyboard.rollups.services` for how they take turns)."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import psycopg

from latencyboard.rollups import folding
from latencyboard.rollups.folding import Fold, SpanColumns
from latencyboard.sla.counting import ObjectiveSpec, count_minutes

logger = logging.getLogger(__name__)

# Spans of batches not rolled up yet are left to the folds that will claim them.
FOLDED_SPANS = f"""
SELECT count(*), string_agg({folding.SPAN_RECORD}, ''::bytea) FROM spans_span s
WHERE s.pipeline_id = ANY(%(pipelines)b::int8[])
  AND s.start_time >= %(start)s AND s.start_time < %(end)s
  AND NOT EXISTS (
      SELECT 1 FROM spans_ingestbatch b WHERE b.id = s.batch_id AND b.rolled_up_at IS NULL
  )
"""  # noqa: S608 - the record expression is a constant, not input
_INSERT_ROWS = """
INSERT INTO rollups_rollup AS r (
    team_id, pipeline_id, stage_id, resolution, bucket_start,
    count, error_count, sum_ms, min_ms, max_ms, sketch
)
SELECT u.team_id, u.pipeline_id, u.stage_id, %(resolution)s, to_timestamp(u.bucket),
       u.count, u.error_count, u.sum_ms, u.min_ms, u.max_ms, u.sketch
FROM unnest(
    %(team)b::int8[], %(pipeline)b::int8[], %(stage)b::int8[], %(bucket)b::int8[],
    %(count)b::int8[], %(errors)b::int8[], %(sum)b::float8[], %(min)b::float8[],
    %(max)b::float8[], %(sketch)b::bytea[]
) WITH ORDINALITY AS u(
    team_id, pipeline_id, stage_id, bucket, count, error_count, sum_ms, min_ms, max_ms, sketch,
    position
)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT rollup_identity_unique DO
"""
ADD_NEW = (
    _INSERT_ROWS + "NOTHING RETURNING pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8"
)
REPLACE = (
    _INSERT_ROWS
    + """UPDATE SET count = EXCLUDED.count, error_count = EXCLUDED.error_count,
    sum_ms = EXCLUDED.sum_ms, min_ms = EXCLUDED.min_ms, max_ms = EXCLUDED.max_ms,
    sketch = EXCLUDED.sketch"""
)


def rows_of_keys(columns: str, bucket_match: str) -> str:
    """A query for ``columns`` of the rows of ``%(resolution)s`` matching the keys passed as
    ``%(pipeline)b``, ``%(stage)b`` (None: end to end) and ``%(bucket)b``, ``k`` being the key
    and ``r`` the row. One probe of the unique index per key: ``stage_id IS NOT DISTINCT FROM``
    cannot use it, hence an arm for stages and one, run only for None, for end to end."""
    return f"""
SELECT {columns}
FROM unnest(%(pipeline)b::int8[], %(stage)b::int8[], %(bucket)b::int8[])
    WITH ORDINALITY AS k(pipeline_id, stage_id, bucket, position)
CROSS JOIN LATERAL (
    SELECT * FROM rollups_rollup r
    WHERE r.pipeline_id = k.pipeline_id AND r.stage_id = k.stage_id
      AND r.resolution = %(resolution)s AND {bucket_match}
    UNION ALL
    SELECT * FROM rollups_rollup r
    WHERE k.stage_id IS NULL AND r.pipeline_id = k.pipeline_id AND r.stage_id IS NULL
      AND r.resolution = %(resolution)s AND {bucket_match}
) r
"""  # noqa: S608 - the caller's constant columns and conditions, not input


SAME_BUCKET = "r.bucket_start = to_timestamp(k.bucket)"
_ADD_SLA_MINUTES = """
INSERT INTO sla_slaminute (objective_id, minute, good, total)
SELECT u.objective_id, to_timestamp(u.minute * 60), u.good, u.total
FROM unnest(%b::int8[], %b::int8[], %b::int8[], %b::int8[])
    WITH ORDINALITY AS u(objective_id, minute, good, total, position)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT sla_minute_unique DO UPDATE
SET good = sla_slaminute.good + EXCLUDED.good, total = sla_slaminute.total + EXCLUDED.total
"""


def read_spans(cursor: psycopg.Cursor[Any], query: str, params: dict[str, Any]) -> SpanColumns:
    row = cursor.execute(query, params, binary=True).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    count, data = row
    spans = folding.decode_spans(data or b"")
    if len(spans) != count:
        raise ValueError(f"read {len(spans)} of {count} spans")
    return spans


def of_existing_stages(
    cursor: psycopg.Cursor[Any], spans: SpanColumns
) -> tuple[SpanColumns, dict[int, int]]:
    """The spans whose stage still exists, and the team of each of their pipelines.

    Spans of a stage or pipeline deleted since they were stored would make the rollup rows
    point at nothing and the fold fail forever: they are left out, and logged.
    """
    rows = cursor.execute(
        """
        SELECT s.id, p.id, p.team_id FROM pipelines_stage s
        JOIN pipelines_pipeline p ON p.id = s.pipeline_id
        WHERE s.id = ANY(%b::int8[])
        """,
        [np.unique(spans.stage_id).tolist()],
    ).fetchall()
    keep = np.isin(spans.stage_id, np.array([stage_id for stage_id, _, _ in rows], np.int64))
    if not keep.all():
        logger.warning("rollup.spans_of_deleted_stages", extra={"spans": int((~keep).sum())})
        spans = spans.select(keep)
    return spans, {pipeline_id: team_id for _, pipeline_id, team_id in rows}


def _row_columns(folds: Sequence[Fold], teams: dict[int, int]) -> dict[str, list[Any]]:
    return {
        "team": [teams[fold.pipeline_id] for fold in folds],
        "pipeline": [fold.pipeline_id for fold in folds],
        "stage": [fold.stage_id for fold in folds],
        "bucket": [fold.bucket for fold in folds],
        "count": [fold.sketch.count for fold in folds],
        "errors": [fold.error_count for fold in folds],
        "sum": [fold.sketch.sum for fold in folds],
        "min": [fold.sketch.min for fold in folds],
        "max": [fold.sketch.max for fold in folds],
        "sketch": [fold.sketch.to_bytes() for fold in folds],
    }


def write_rows(
    cursor: psycopg.Cursor[Any],
    statement: str,
    resolution: str,
    folds: Sequence[Fold],
    teams: dict[int, int],
) -> list[tuple[Any, ...]]:
    if not folds:
        return []
    cursor.execute(statement, {"resolution": resolution, **_row_columns(folds, teams)})
    return cursor.fetchall() if cursor.description else []


def add_sla_minutes(cursor: psycopg.Cursor[Any], spans: SpanColumns) -> int:
    """Add the spans to the exact counters of their pipelines' objectives; rows touched.

    Objectives are read here, under the advisory lock: one created meanwhile has either
    counted these spans' batches already or is seen by this read.
    """
    if not len(spans):
        return 0
    rows = cursor.execute(
        """
        SELECT id, pipeline_id, stage_id, threshold_ms FROM sla_objective
        WHERE pipeline_id = ANY(%b::int8[]) ORDER BY id
        """,
        [np.unique(spans.pipeline_id).tolist()],
    ).fetchall()
    objectives = [ObjectiveSpec(*row) for row in rows]
    counts = count_minutes(
        objectives,
        spans.pipeline_id,
        spans.stage_id,
        spans.is_root,
        spans.minute,
        spans.duration_ms,
    )
    if counts:
        cursor.execute(
            _ADD_SLA_MINUTES,
            [
                [c.objective_id for c in counts],
                [c.minute for c in counts],
                [c.good for c in counts],
                [c.total for c in counts],
            ],
        )
    return len(counts)


def steps(start: dt.datetime, end: dt.datetime, step: dt.timedelta) -> Iterator[dt.datetime]:
    moment = start
    while moment < end:
        yield moment
        moment += step
