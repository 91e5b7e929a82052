"""The SQL that writes cohort rollups: reading a fold's spans by cohort, inserting and
merging minute rows, compacting them into hours and days, and retention (pure: no Django).

Cohort rows are keyed by (pipeline, attribute, value, stage, resolution, bucket); the stage
is NULL for end to end. Each key is looked up on its own (a LATERAL subquery the planner may
not flatten, hence ``OFFSET 0``), its stage matched as "equal, or both NULL" so that both arms
probe the identity index on the whole key: ``IS NOT DISTINCT FROM`` cannot use the index
past the value, so each probe read every row of the value (10 ms each with 90 days stored,
against 0.2 ms), and joined as a whole the keys were matched by a scan of the whole table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from latencyboard.storage.span_templates import attribute_sql, joins_sql
from latencyboard.storage.tables import (
    COHORT_ATTRIBUTE,
    COHORT_ROLLUP,
    COHORT_ROWS,
    PIPELINE,
    RESOURCE,
    ROLLUP,
    SPAN,
    SPAN_TEMPLATE,
)

MAX_VALUE_LENGTH: Final = 255

# The spans of a fold's batches whose own attributes hold a cohort attribute, by cohort: one
# row per pipeline, stage, root or not, minute, attribute and value, the spans' COHORT_SPAN
# concatenated. A span counts once for each cohort attribute it carries itself (or its
# template or resource does); a JSON null is no value. The other spans of the fold take their
# values from their templates (TEMPLATE_VALUES).
_VALUE: Final = attribute_sql("c.key")
COHORT_SPAN: Final = "int8send(s.duration_ns) || boolsend(s.status_code = 2)"
COHORT_SPAN_BYTES: Final = 9
SPANS_BY_COHORT: Final = f"""
SELECT s.pipeline_id, s.stage_id, s.is_root,
       floor(extract(epoch FROM s.start_time) / 60)::int8,
       c.key, left({_VALUE}, {MAX_VALUE_LENGTH}),
       string_agg({COHORT_SPAN}, ''::bytea)
FROM {SPAN} s
JOIN (
    SELECT p.id AS pipeline_id, d.key FROM {PIPELINE} p
    CROSS JOIN unnest(%(defaults)b::text[]) AS d(key)
    WHERE p.id = ANY(%(pipelines)b::int8[])
    UNION
    SELECT pipeline_id, key FROM {COHORT_ATTRIBUTE} WHERE pipeline_id = ANY(%(pipelines)b::int8[])
) c ON c.pipeline_id = s.pipeline_id
{joins_sql()}
WHERE s.batch_id = ANY(%(batches)b::int8[]) AND s.batch_id BETWEEN %(first)s AND %(last)s
  AND s.stage_id = ANY(%(stages)b::int8[])
  AND s.attributes ?| %(cohort_keys)b::text[]
  AND {_VALUE} IS NOT NULL
GROUP BY 1, 2, 3, 4, 5, 6
"""  # noqa: S608 - table names are constants, not input

# Every attribute that is a cohort attribute of some pipeline (besides the defaults).
COHORT_KEYS: Final = f"SELECT DISTINCT key FROM {COHORT_ATTRIBUTE}"  # noqa: S608
# The cohort attributes the pipelines add to the defaults.
PIPELINE_KEYS: Final = (
    f"SELECT pipeline_id, key FROM {COHORT_ATTRIBUTE} WHERE pipeline_id = ANY(%s::int8[])"  # noqa: S608
)
# The value of each key each template has, from the template or else its resource, as
# attribute_sql reads it for a span whose own attributes lack the key.
_TEMPLATE_VALUE: Final = "coalesce(t.attributes -> k.key, r.attributes -> k.key) #>> '{}'"
TEMPLATE_VALUES: Final = f"""
SELECT t.id, k.key, left({_TEMPLATE_VALUE}, {MAX_VALUE_LENGTH})
FROM {SPAN_TEMPLATE} t
LEFT JOIN {RESOURCE} r ON r.id = t.resource_id
CROSS JOIN unnest(%(keys)b::text[]) AS k(key)
WHERE t.id = ANY(%(templates)b::int8[]) AND {_TEMPLATE_VALUE} IS NOT NULL
"""  # noqa: S608

# Values already kept apart on the days a fold touches (the cardinality cap).
STORED_VALUES: Final = f"""
SELECT DISTINCT pipeline_id, attribute,
       extract(epoch FROM date_bin('1 day', bucket_start, 'epoch'))::int8, value
FROM {COHORT_ROWS}
WHERE pipeline_id = ANY(%(pipelines)b::int8[]) AND resolution IN ('minute', 'hour')
  AND bucket_start >= to_timestamp(%(first_day)s) AND bucket_start < to_timestamp(%(end_day)s)
"""  # noqa: S608

_INSERT: Final = f"""
INSERT INTO {COHORT_ROLLUP} AS r (
    team_id, pipeline_id, attribute, value, stage_id, resolution, bucket_start,
    count, error_count, sum_ms, min_ms, max_ms, sketch
)
SELECT u.team_id, u.pipeline_id, u.attribute, u.value, u.stage_id, %(resolution)s,
       to_timestamp(u.bucket), u.count, u.error_count, u.sum_ms, u.min_ms, u.max_ms, u.sketch
FROM unnest(
    %(team)b::int8[], %(pipeline)b::int8[], %(attribute)b::text[], %(value)b::text[],
    %(stage)b::int8[], %(bucket)b::int8[], %(count)b::int8[], %(errors)b::int8[],
    %(sum)b::float8[], %(min)b::float8[], %(max)b::float8[], %(sketch)b::bytea[]
) WITH ORDINALITY AS u(
    team_id, pipeline_id, attribute, value, stage_id, bucket, count, error_count, sum_ms,
    min_ms, max_ms, sketch, position
)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT cohort_rollup_identity_unique DO
"""  # noqa: S608
ADD_NEW: Final = (
    _INSERT
    + " NOTHING RETURNING pipeline_id, attribute, value, stage_id,"
    + " extract(epoch FROM bucket_start)::int8"
)
REPLACE: Final = (
    _INSERT
    + """ UPDATE SET count = EXCLUDED.count, error_count = EXCLUDED.error_count,
    sum_ms = EXCLUDED.sum_ms, min_ms = EXCLUDED.min_ms, max_ms = EXCLUDED.max_ms,
    sketch = EXCLUDED.sketch"""
)

_KEYS: Final = """unnest(
    %(pipeline)b::int8[], %(attribute)b::text[], %(value)b::text[], %(stage)b::int8[],
    %(bucket)b::int8[]
) WITH ORDINALITY AS k(pipeline_id, attribute, value, stage_id, bucket, position)"""


def _rows_of_each_key(buckets: str) -> str:
    """The cohort table's rows of each key of :data:`_KEYS` whose bucket start meets
    ``buckets``, as ``r``."""
    return f"""CROSS JOIN LATERAL (
    SELECT * FROM {COHORT_ROLLUP} c
    WHERE c.pipeline_id = k.pipeline_id AND c.attribute = k.attribute
      AND c.resolution = %(resolution)s AND {buckets}
      AND c.value = k.value
      AND (c.stage_id = k.stage_id OR (c.stage_id IS NULL AND k.stage_id IS NULL))
    OFFSET 0
) r"""  # noqa: S608 - a constant table name, values are parameters


def _in_bucket(row: str) -> str:
    """Row ``row``'s bucket starts within the ``%(width)s`` wide bucket of key ``k``."""
    return (
        f"{row}.bucket_start >= to_timestamp(k.bucket)"
        f" AND {row}.bucket_start < to_timestamp(k.bucket) + %(width)s"
    )


def _cohort_rows_in_each_key() -> str:
    """Every cohort row within the bucket of each key of :data:`_KEYS`, as ``r`` (bucket
    start, error count, sketch): the cohort table's, and the rollup rows that stand for the
    key's cohort (``Rollup.cohorts``), each probed through its identity index (for rollups,
    one arm for stages and one, run only for None, for end to end)."""
    rollups = f"""SELECT r.bucket_start, r.error_count, r.sketch FROM {ROLLUP} r
    WHERE r.pipeline_id = k.pipeline_id AND r.resolution = %(resolution)s
      AND {_in_bucket("r")} AND r.cohorts ->> k.attribute = k.value"""  # noqa: S608
    return f"""CROSS JOIN LATERAL (
    SELECT c.bucket_start, c.error_count, c.sketch FROM {COHORT_ROLLUP} c
    WHERE c.pipeline_id = k.pipeline_id AND c.attribute = k.attribute
      AND c.resolution = %(resolution)s AND {_in_bucket("c")}
      AND c.value = k.value
      AND (c.stage_id = k.stage_id OR (c.stage_id IS NULL AND k.stage_id IS NULL))
    UNION ALL
    {rollups} AND r.stage_id = k.stage_id
    UNION ALL
    {rollups} AND k.stage_id IS NULL AND r.stage_id IS NULL
) r"""  # noqa: S608 - constant table names, values are parameters


# Locked in the order the rows were inserted in, so two folds never wait in a cycle.
LOCK_ROWS: Final = f"""
SELECT r.id, k.position, r.error_count, r.sketch
FROM {_KEYS}
{_rows_of_each_key("c.bucket_start = to_timestamp(k.bucket)")}
ORDER BY k.position
FOR UPDATE OF r
"""  # noqa: S608
UPDATE_ROWS: Final = f"""
UPDATE {COHORT_ROLLUP} r
SET count = u.count, error_count = u.error_count, sum_ms = u.sum_ms, min_ms = u.min_ms,
    max_ms = u.max_ms, sketch = u.sketch
FROM unnest(
    %(id)b::int8[], %(count)b::int8[], %(errors)b::int8[], %(sum)b::float8[],
    %(min)b::float8[], %(max)b::float8[], %(sketch)b::bytea[]
) AS u(id, count, error_count, sum_ms, min_ms, max_ms, sketch)
WHERE r.id = u.id
"""  # noqa: S608

# Coarse cohort rows to recompute, among the coarse buckets of the pipelines passed: those
# whose finer rows hold more spans than the coarse row (or it is missing). Fewer means finer
# rows expired: the coarse row is kept as it is. Only the passed buckets are read, each by
# one range scan of the window index per attribute the pipeline has rows of (found with a
# skip scan of that index: there are a few), so the cost follows the buckets, not the table.
CANDIDATES: Final = f"""
WITH RECURSIVE dirty AS (
    SELECT DISTINCT pipeline_id, bucket
    FROM unnest(%(pipelines)b::int8[], %(buckets)b::int8[]) AS d(pipeline_id, bucket)
), attributes AS (
    SELECT p.pipeline_id,
           (SELECT min(attribute) FROM {COHORT_ROLLUP} WHERE pipeline_id = p.pipeline_id)
               AS attribute
    FROM (SELECT DISTINCT pipeline_id FROM dirty) p
    UNION ALL
    SELECT a.pipeline_id,
           (SELECT min(attribute) FROM {COHORT_ROLLUP}
            WHERE pipeline_id = a.pipeline_id AND attribute > a.attribute)
    FROM attributes a WHERE a.attribute IS NOT NULL
)
SELECT f.pipeline_id, f.attribute, f.value, f.stage_id, f.bucket
FROM (
    SELECT pipeline_id, attribute, value, stage_id, bucket, sum(count) AS count
    FROM (
        SELECT r.pipeline_id, r.attribute, r.value, r.stage_id, d.bucket, r.count
        FROM dirty d
        JOIN attributes a ON a.pipeline_id = d.pipeline_id AND a.attribute IS NOT NULL
        JOIN {COHORT_ROLLUP} r
          ON r.pipeline_id = d.pipeline_id AND r.attribute = a.attribute
         AND r.resolution = %(fine)s AND r.bucket_start >= to_timestamp(d.bucket)
         AND r.bucket_start < to_timestamp(d.bucket) + %(width)s
        UNION ALL
        SELECT r.pipeline_id, e.key, e.value, r.stage_id, d.bucket, r.count
        FROM dirty d
        JOIN {ROLLUP} r
          ON r.pipeline_id = d.pipeline_id AND r.resolution = %(fine)s
         AND r.bucket_start >= to_timestamp(d.bucket)
         AND r.bucket_start < to_timestamp(d.bucket) + %(width)s
        CROSS JOIN LATERAL jsonb_each_text(r.cohorts) AS e(key, value)
        WHERE r.cohorts IS NOT NULL
    ) fine
    GROUP BY 1, 2, 3, 4, 5
) f
LEFT JOIN {COHORT_ROLLUP} c
  ON c.pipeline_id = f.pipeline_id AND c.attribute = f.attribute AND c.value = f.value
 AND c.stage_id IS NOT DISTINCT FROM f.stage_id AND c.resolution = %(coarse)s
 AND c.bucket_start = to_timestamp(f.bucket)
WHERE c.id IS NULL OR c.count < f.count
ORDER BY 1, 2, 3, 4 NULLS FIRST, 5
"""  # noqa: S608
FINE_ROWS: Final = f"""
SELECT k.pipeline_id, k.attribute, k.value, k.stage_id, k.bucket, r.error_count, r.sketch
FROM {_KEYS}
{_cohort_rows_in_each_key()}
ORDER BY k.position, r.bucket_start
"""  # noqa: S608
TEAMS: Final = f"SELECT id, team_id FROM {PIPELINE} WHERE id = ANY(%s::int8[])"  # noqa: S608
EXPIRE: Final = f"DELETE FROM {COHORT_ROLLUP} WHERE resolution = %s AND bucket_start < %s"  # noqa: S608
# The cohort rows the pipelines' rollup minutes in [start, end) stand for, stored apart:
# before a rebuild replaces those minutes from raw spans (cohort rows are never rebuilt).
MATERIALIZE: Final = f"""
INSERT INTO {COHORT_ROLLUP} (
    team_id, pipeline_id, attribute, value, stage_id, resolution, bucket_start,
    count, error_count, sum_ms, min_ms, max_ms, sketch
)
SELECT r.team_id, r.pipeline_id, e.key, e.value, r.stage_id, r.resolution, r.bucket_start,
       r.count, r.error_count, r.sum_ms, r.min_ms, r.max_ms, r.sketch
FROM {ROLLUP} r
CROSS JOIN LATERAL jsonb_each_text(r.cohorts) AS e(key, value)
WHERE r.pipeline_id = ANY(%(pipelines)s::int8[]) AND r.resolution = 'minute'
  AND r.bucket_start >= %(start)s AND r.bucket_start < %(end)s AND r.cohorts IS NOT NULL
"""  # noqa: S608 - constant table names, no input


@dataclass(frozen=True, slots=True)
class CohortSpanRecords:
    duration_ms: npt.NDArray[np.float64]
    is_error: npt.NDArray[np.bool_]


_COHORT_SPAN: Final = np.dtype([("duration_ns", ">i8"), ("is_error", "u1")])


def cohort_spans(concatenated: bytes) -> CohortSpanRecords:
    """The spans of groups' concatenated :data:`COHORT_SPAN` values; ValueError for
    anything else."""
    if len(concatenated) % COHORT_SPAN_BYTES:
        raise ValueError(f"{len(concatenated)} bytes are not whole cohort span records")
    records = np.frombuffer(concatenated, dtype=_COHORT_SPAN)
    if np.any(records["is_error"] > 1):
        raise ValueError("cohort span records do not have the COHORT_SPAN layout")
    return CohortSpanRecords(
        records["duration_ns"].astype(np.float64) / 1e6, records["is_error"].astype(np.bool_)
    )
