"""Writes of rollups: folding ingest batches into minutes, compacting, rebuilding from spans.

Every stored span is counted exactly once: a fold claims pending ingest batches, adds their
spans to the minute rows and the SLA counters and marks the batches rolled up, all in one
transaction. Coarser rows are recomputed from finer ones, never added to, so compacting again
changes nothing.

Three kinds of writer share ``sla.counting.ADVISORY_LOCK_KEY``: folds take it shared and run
side by side; compaction, rebuilds (and SLA objective back-fills) take it exclusively, so
they see no fold half done, and "the spans of batches already rolled up" is exactly what the
minute rows hold.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import psycopg
from django.conf import settings
from django.db import connection, transaction

from latencyboard.live.services import publish
from latencyboard.rollups import folding
from latencyboard.rollups.folding import Fold, SpanColumns
from latencyboard.sketch import Sketch
from latencyboard.sla.counting import ADVISORY_LOCK_KEY, ObjectiveSpec, count_minutes
from latencyboard.teams.models import Team

logger = logging.getLogger(__name__)

HOUR: Final = dt.timedelta(hours=1)
DAY: Final = dt.timedelta(days=1)
GRACE: Final = dt.timedelta(minutes=5)
"""How long after its end an hour is compacted: spans in flight by then are late spans."""

_CANDIDATES_PER_STATEMENT: Final = 500

_CLAIM = """
SELECT id, stored_spans FROM spans_ingestbatch
WHERE rolled_up_at IS NULL
ORDER BY id
LIMIT %s
FOR UPDATE SKIP LOCKED
"""
# The count guards the aggregate, which would skip a record silently were it NULL. The
# BETWEEN lets the block-range index on batch_id skip most of each partition.
_BATCH_SPANS = f"""
SELECT count(*), string_agg({folding.SPAN_RECORD}, ''::bytea) FROM spans_span
WHERE batch_id = ANY(%(batches)b::int8[]) AND batch_id BETWEEN %(first)s AND %(last)s
"""  # noqa: S608 - the record expression is a constant, not input
# Spans of batches not rolled up yet are left to the folds that will claim them.
_FOLDED_SPANS = f"""
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
_ADD_NEW = (
    _INSERT_ROWS + "NOTHING RETURNING pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8"
)
_REPLACE = (
    _INSERT_ROWS
    + """UPDATE SET count = EXCLUDED.count, error_count = EXCLUDED.error_count,
    sum_ms = EXCLUDED.sum_ms, min_ms = EXCLUDED.min_ms, max_ms = EXCLUDED.max_ms,
    sketch = EXCLUDED.sketch"""
)


def _rows_of_keys(columns: str, bucket_match: str) -> str:
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


_SAME_BUCKET = "r.bucket_start = to_timestamp(k.bucket)"
_WITHIN_BUCKET = (
    "r.bucket_start >= to_timestamp(k.bucket)"
    " AND r.bucket_start < to_timestamp(k.bucket) + %(width)s"
)
# Locks in the order the rows were inserted in, so that two folds never wait on each other
# in a cycle.
_LOCK_ROWS = f"""
SELECT id, pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8, error_count, sketch
FROM rollups_rollup
WHERE id IN ({_rows_of_keys("r.id", _SAME_BUCKET)})
ORDER BY pipeline_id, stage_id NULLS FIRST, bucket_start
FOR UPDATE
"""  # noqa: S608 - constant fragments
_UPDATE_ROWS = """
UPDATE rollups_rollup r
SET count = u.count, error_count = u.error_count, sum_ms = u.sum_ms, min_ms = u.min_ms,
    max_ms = u.max_ms, sketch = u.sketch
FROM unnest(
    %(id)b::int8[], %(count)b::int8[], %(errors)b::int8[], %(sum)b::float8[],
    %(min)b::float8[], %(max)b::float8[], %(sketch)b::bytea[]
) AS u(id, count, error_count, sum_ms, min_ms, max_ms, sketch)
WHERE r.id = u.id
"""
_ADD_SLA_MINUTES = """
INSERT INTO sla_slaminute (objective_id, minute, good, total)
SELECT u.objective_id, to_timestamp(u.minute * 60), u.good, u.total
FROM unnest(%b::int8[], %b::int8[], %b::int8[], %b::int8[])
    WITH ORDINALITY AS u(objective_id, minute, good, total, position)
ORDER BY u.position
ON CONFLICT ON CONSTRAINT sla_minute_unique DO UPDATE
SET good = sla_slaminute.good + EXCLUDED.good, total = sla_slaminute.total + EXCLUDED.total
"""
# A coarse bucket needs recomputing when its row is missing or its count is not the sum of
# its finer rows' (a fold adds at least one span to every row it touches, so the sum moved
# since the last recompute), and is checked whenever its finer rows are about to expire.
_CANDIDATES = """
SELECT f.pipeline_id, f.stage_id, extract(epoch FROM f.bucket)::int8
FROM (
    SELECT pipeline_id, stage_id, date_bin(%(width)s, bucket_start, 'epoch') AS bucket,
           sum(count) AS count
    FROM rollups_rollup
    WHERE resolution = %(fine)s AND bucket_start >= %(start)s AND bucket_start < %(end)s
      AND (%(pipelines)b::int8[] IS NULL OR pipeline_id = ANY(%(pipelines)b::int8[]))
    GROUP BY 1, 2, 3
) f
LEFT JOIN rollups_rollup c
  ON c.pipeline_id = f.pipeline_id AND c.stage_id IS NOT DISTINCT FROM f.stage_id
 AND c.resolution = %(coarse)s AND c.bucket_start = f.bucket
WHERE c.id IS NULL OR c.count <> f.count OR f.bucket < %(kept_from)s
ORDER BY f.pipeline_id, f.stage_id NULLS FIRST, f.bucket
"""
_FINE_ROWS = (
    _rows_of_keys("r.pipeline_id, r.stage_id, k.bucket, r.error_count, r.sketch", _WITHIN_BUCKET)
    + "ORDER BY k.position, r.bucket_start"
)
_COARSE_ROWS = _rows_of_keys(
    "r.pipeline_id, r.stage_id, k.bucket, r.count, r.error_count, r.sketch", _SAME_BUCKET
)

Key = tuple[int, int | None, int]  # pipeline, stage (None: end to end), bucket (Unix seconds)


@dataclass(frozen=True, slots=True)
class FoldResult:
    """Ingest batches marked rolled up, and the spans counted into rollups from them."""

    batches: int
    spans: int


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction run wrote and deleted."""

    hours: int  # hour rows written
    days: int  # day rows written
    from_spans: int  # of those, recomputed from raw spans (late spans past minute retention)
    deleted: int  # rows past retention


@dataclass(frozen=True, slots=True)
class RebuildResult:
    """What a rebuild recomputed: spans read, rows written per resolution."""

    start: dt.datetime  # the range, widened to whole hours
    end: dt.datetime
    spans: int
    minutes: int
    hours: int
    days: int
    sla_minutes: int


@dataclass(frozen=True, slots=True)
class _Level:
    fine: str
    coarse: str
    width: dt.timedelta


_HOURS = _Level("minute", "hour", HOUR)
_DAYS = _Level("hour", "day", DAY)


@dataclass(frozen=True, slots=True)
class _Stored:
    count: int
    error_count: int
    sketch: bytes


def fold_pending_batches(
    now: dt.datetime, max_batches: int = 200, max_spans: int = 250_000
) -> FoldResult:
    """Fold the spans of up to ``max_batches`` pending ingest batches into the minute rollups
    and the SLA counters, and mark the batches rolled up, in one transaction.

    Batches are claimed oldest first with ``SKIP LOCKED``, so concurrent workers share the
    backlog and never fold a batch twice; claimed batches past ``max_spans`` stored spans
    (always at least one batch) are left pending for the next fold. After commit each team
    with new figures hears ``{"type": "rollup", "pipelines": [...]}`` on its live channel.
    """
    started = time.monotonic()
    with transaction.atomic():
        cursor = _cursor()
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [ADVISORY_LOCK_KEY])
        batches = _within_budget(cursor.execute(_CLAIM, [max_batches]).fetchall(), max_spans)
        if not batches:
            return FoldResult(0, 0)
        spans, teams = _of_existing_stages(
            cursor,
            _read_spans(
                cursor,
                _BATCH_SPANS,
                {"batches": batches, "first": batches[0], "last": batches[-1]},
            ),
        )
        folds = folding.fold_minutes(spans)
        _add_minutes(cursor, folds, teams)
        _add_sla_minutes(cursor, spans)
        cursor.execute(
            "UPDATE spans_ingestbatch SET rolled_up_at = %s WHERE id = ANY(%b::int8[])",
            [now, batches],
        )
        pipelines_of: dict[int, set[int]] = {}
        for pipeline_id, team_id in teams.items():
            pipelines_of.setdefault(team_id, set()).add(pipeline_id)
        for team_id, pipelines in pipelines_of.items():
            # robust: the rollups are committed whether or not a live page hears of them.
            transaction.on_commit(_announcer(team_id, sorted(pipelines)), robust=True)
    logger.info(
        "rollup.done",
        extra={
            "batches": len(batches),
            "spans": len(spans),
            "rows": len(folds),
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return FoldResult(len(batches), len(spans))


def fold_until_idle(clock: Callable[[], dt.datetime], seconds: float) -> FoldResult:
    """Fold batch after batch until none is left to claim or ``seconds`` have passed."""
    deadline = time.monotonic() + seconds
    batches = spans = 0
    while True:
        result = fold_pending_batches(clock())
        batches, spans = batches + result.batches, spans + result.spans
        if not result.batches or time.monotonic() >= deadline:
            return FoldResult(batches, spans)


def compact_rollups(now: dt.datetime) -> CompactionResult:
    """Recompute the hours and days whose finer rows changed, then apply retention.

    Hours are compacted once ``GRACE`` past their end, days once all their hours are. A
    coarse row is replaced by the merge of its finer rows, so rerunning is harmless and a late
    span folded into an old minute reaches its hour and day at the next run. Finer rows about
    to expire are checked against their coarse row first: those that do not add up to it
    belong to spans later than the finer retention, and their coarse row is recomputed from
    the raw spans. Retention then deletes minutes older than ``ROLLUP_MINUTE_DAYS``, hours
    older than ``ROLLUP_HOUR_DAYS`` and days older than ``ROLLUP_DAY_DAYS`` (each rounded
    down to a whole hour or day, so a coarser row is always whole).
    """
    complete = _floor(now - GRACE, HOUR)
    minutes_from = _floor(now - dt.timedelta(days=settings.ROLLUP_MINUTE_DAYS), HOUR)
    hours_from = _floor(now - dt.timedelta(days=settings.ROLLUP_HOUR_DAYS), DAY)
    days_from = _floor(now - dt.timedelta(days=settings.ROLLUP_DAY_DAYS), DAY)
    with transaction.atomic():
        cursor = _cursor()
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        hours, hours_raw = _compact_level(cursor, _HOURS, end=complete, kept_from=minutes_from)
        days, days_raw = _compact_level(
            cursor, _DAYS, end=_floor(complete, DAY), kept_from=hours_from
        )
        deleted = 0
        for resolution, before in (
            ("minute", minutes_from),
            ("hour", hours_from),
            ("day", days_from),
        ):
            cursor.execute(
                "DELETE FROM rollups_rollup WHERE resolution = %s AND bucket_start < %s",
                [resolution, before],
            )
            deleted += cursor.rowcount
    result = CompactionResult(hours, days, hours_raw + days_raw, deleted)
    logger.info(
        "rollup.compacted",
        extra={
            "hours": result.hours,
            "days": result.days,
            "from_spans": result.from_spans,
            "deleted": result.deleted,
        },
    )
    return result


def rebuild_rollups(
    team: Team, start: dt.datetime, end: dt.datetime, *, now: dt.datetime
) -> RebuildResult:
    """Recompute ``team``'s rollups and SLA counters over ``[start, end)`` from raw spans.

    The range is widened to whole hours. Minute rows and SLA minutes of the range are
    replaced, then the range's complete hours and days are recomputed from them. Spans of
    batches not rolled up yet are left to the folds that will claim them. Runs in one
    transaction that folds wait for. Raises ValueError for an empty range or one reaching
    back past ``RETENTION_DAYS``, whose raw spans are gone.
    """
    start, end = _floor(start, HOUR), _ceil(end, HOUR)
    kept_from = now - dt.timedelta(days=settings.RETENTION_DAYS)
    if start >= end:
        raise ValueError("The range must end after it starts.")
    if start < kept_from:
        raise ValueError(
            f"Raw spans before {kept_from.isoformat()} are gone (RETENTION_DAYS): "
            f"cannot rebuild from {start.isoformat()}."
        )
    complete = _floor(now - GRACE, HOUR)
    days_start, days_end = _floor(start, DAY), min(_ceil(end, DAY), _floor(complete, DAY))
    pipelines = list(team.pipelines.values_list("pk", flat=True))
    with transaction.atomic():
        cursor = _cursor()
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        teams = {pipeline_id: team.pk for pipeline_id in pipelines}
        cursor.execute(
            """
            DELETE FROM rollups_rollup
            WHERE pipeline_id = ANY(%(pipelines)b::int8[]) AND (
                (resolution IN ('minute', 'hour')
                 AND bucket_start >= %(start)s AND bucket_start < %(end)s)
                OR (resolution = 'day'
                    AND bucket_start >= %(days_start)s AND bucket_start < %(days_end)s))
            """,
            {
                "pipelines": pipelines,
                "start": start,
                "end": end,
                "days_start": days_start,
                "days_end": days_end,
            },
        )
        cursor.execute(
            """
            DELETE FROM sla_slaminute m USING sla_objective o
            WHERE m.objective_id = o.id AND o.pipeline_id = ANY(%b::int8[])
              AND m.minute >= %s AND m.minute < %s
            """,
            [pipelines, start, end],
        )
        spans = minutes = sla_minutes = 0
        for hour in _steps(start, end, HOUR):
            columns, _ = _of_existing_stages(
                cursor,
                _read_spans(
                    cursor,
                    _FOLDED_SPANS,
                    {"pipelines": pipelines, "start": hour, "end": hour + HOUR},
                ),
            )
            folds = folding.fold_minutes(columns)
            _write_rows(cursor, _REPLACE, "minute", folds, teams)
            sla_minutes += _add_sla_minutes(cursor, columns)
            spans, minutes = spans + len(columns), minutes + len(folds)
        hours, _ = _compact_level(
            cursor, _HOURS, start=start, end=min(end, complete), kept_from=start, scope=pipelines
        )
        days, _ = _compact_level(
            cursor, _DAYS, start=days_start, end=days_end, kept_from=days_start, scope=pipelines
        )
    result = RebuildResult(start, end, spans, minutes, hours, days, sla_minutes)
    logger.info(
        "rollup.rebuilt",
        extra={
            "team": team.pk,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "spans": spans,
            "minutes": minutes,
            "hours": hours,
            "days": days,
            "sla_minutes": sla_minutes,
        },
    )
    return result


def _cursor() -> psycopg.Cursor[Any]:
    """A psycopg cursor in Django's current transaction, binding parameters server-side (so
    arrays travel as arrays and results may be binary), unlike Django's client-side ones."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def _announcer(team_id: int, pipelines: list[int]) -> Callable[[], None]:
    def announce() -> None:
        publish(team_id, {"type": "rollup", "pipelines": pipelines})

    return announce


def _within_budget(claimed: Sequence[tuple[int, int]], max_spans: int) -> list[int]:
    """Ids of the claimed batches up to ``max_spans`` stored spans, at least one."""
    ids: list[int] = []
    total = 0
    for batch_id, stored in claimed:
        if ids and total + stored > max_spans:
            break
        ids.append(batch_id)
        total += stored
    return ids


def _read_spans(cursor: psycopg.Cursor[Any], query: str, params: dict[str, Any]) -> SpanColumns:
    row = cursor.execute(query, params, binary=True).fetchone()
    assert row is not None  # an aggregate without GROUP BY returns one row
    count, data = row
    spans = folding.decode_spans(data or b"")
    if len(spans) != count:
        raise ValueError(f"read {len(spans)} of {count} spans")
    return spans


def _of_existing_stages(
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


def _teams_of(cursor: psycopg.Cursor[Any], pipelines: set[int]) -> dict[int, int]:
    rows = cursor.execute(
        "SELECT id, team_id FROM pipelines_pipeline WHERE id = ANY(%b::int8[])", [list(pipelines)]
    ).fetchall()
    return dict(rows)


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


def _write_rows(
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


def _add_minutes(cursor: psycopg.Cursor[Any], folds: Sequence[Fold], teams: dict[int, int]) -> None:
    """Insert the minutes nobody has yet; merge the others into their rows, under row locks."""
    inserted = set(_write_rows(cursor, _ADD_NEW, "minute", folds, teams))
    existing = [f for f in folds if (f.pipeline_id, f.stage_id, f.bucket) not in inserted]
    if not existing:
        return
    cursor.execute(
        _LOCK_ROWS,
        {
            "resolution": "minute",
            "pipeline": [f.pipeline_id for f in existing],
            "stage": [f.stage_id for f in existing],
            "bucket": [f.bucket for f in existing],
        },
    )
    rows = {(p, s, b): (row_id, errors, blob) for row_id, p, s, b, errors, blob in cursor}
    merged = []
    for fold in existing:
        row_id, errors, blob = rows[(fold.pipeline_id, fold.stage_id, fold.bucket)]
        sketch = Sketch.from_bytes(blob)
        sketch.merge(fold.sketch)
        merged.append((row_id, errors + fold.error_count, sketch))
    cursor.execute(
        _UPDATE_ROWS,
        {
            "id": [row_id for row_id, _, _ in merged],
            "count": [sketch.count for _, _, sketch in merged],
            "errors": [errors for _, errors, _ in merged],
            "sum": [sketch.sum for _, _, sketch in merged],
            "min": [sketch.min for _, _, sketch in merged],
            "max": [sketch.max for _, _, sketch in merged],
            "sketch": [sketch.to_bytes() for _, _, sketch in merged],
        },
    )


def _add_sla_minutes(cursor: psycopg.Cursor[Any], spans: SpanColumns) -> int:
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


def _compact_level(
    cursor: psycopg.Cursor[Any],
    level: _Level,
    *,
    end: dt.datetime,
    kept_from: dt.datetime,
    start: dt.datetime | None = None,
    scope: list[int] | None = None,
) -> tuple[int, int]:
    """Recompute the coarse rows of ``level`` that need it, in ``[start, end)`` and for the
    ``scope`` pipelines (None: all); returns (rows written, of which from raw spans).

    A candidate (see ``_CANDIDATES``) from at or after ``kept_from`` becomes the merge of its
    finer rows. Before ``kept_from`` the finer rows are about to expire and may be only the
    late ones of a bucket whose other finer rows expired already: the coarse row is kept
    when it equals their merge (nothing changed), else recomputed from the raw spans. So is
    a merge that would shrink a row, which no fold can cause.
    """
    params = {
        "width": level.width,
        "fine": level.fine,
        "coarse": level.coarse,
        "start": start or dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        "end": end,
        "kept_from": kept_from,
        "pipelines": scope,
    }
    candidates: list[Key] = cursor.execute(_CANDIDATES, params).fetchall()
    teams = _teams_of(cursor, {pipeline_id for pipeline_id, _, _ in candidates})
    written = from_spans = 0
    for first in range(0, len(candidates), _CANDIDATES_PER_STATEMENT):
        chunk = candidates[first : first + _CANDIDATES_PER_STATEMENT]
        keys = {
            "pipeline": [key[0] for key in chunk],
            "stage": [key[1] for key in chunk],
            "bucket": [key[2] for key in chunk],
        }
        cursor.execute(_FINE_ROWS, {**keys, "resolution": level.fine, "width": level.width})
        merged = {(f.pipeline_id, f.stage_id, f.bucket): f for f in folding.combine(cursor)}
        cursor.execute(_COARSE_ROWS, {**keys, "resolution": level.coarse})
        stored = {(p, s, b): _Stored(n, e, blob) for p, s, b, n, e, blob in cursor}
        replace, doubtful = [], []
        for key in chunk:
            fold, row = merged[key], stored.get(key)
            if row is None:
                replace.append(fold)
            elif _same(row, fold):
                continue
            elif key[2] >= kept_from.timestamp() and fold.sketch.count >= row.count:
                replace.append(fold)
            else:
                doubtful.append((key, max(row.count, fold.sketch.count)))
        recomputed = _from_spans(cursor, level, doubtful)
        _write_rows(cursor, _REPLACE, level.coarse, replace + recomputed, teams)
        written += len(replace) + len(recomputed)
        from_spans += len(recomputed)
    return written, from_spans


def _same(row: _Stored, fold: Fold) -> bool:
    return (row.count, row.error_count, row.sketch) == (
        fold.sketch.count,
        fold.error_count,
        fold.sketch.to_bytes(),
    )


def _from_spans(
    cursor: psycopg.Cursor[Any], level: _Level, doubtful: Sequence[tuple[Key, int]]
) -> list[Fold]:
    """Coarse rows recomputed from the raw spans of rolled-up batches, one pipeline and
    bucket at a time. One that would hold fewer spans than its rows already did (the raw
    spans expired) is left as it is and logged."""
    width = int(level.width.total_seconds())
    recomputed = []
    by_bucket = sorted(doubtful, key=_pipeline_and_bucket)
    for (pipeline_id, bucket), group in itertools.groupby(by_bucket, key=_pipeline_and_bucket):
        start = dt.datetime.fromtimestamp(bucket, dt.UTC)
        minute_folds: list[Fold] = []
        for hour in _steps(start, start + level.width, HOUR):
            columns = _read_spans(
                cursor,
                _FOLDED_SPANS,
                {"pipelines": [pipeline_id], "start": hour, "end": hour + HOUR},
            )
            minute_folds.extend(folding.fold_minutes(columns))
        minute_folds.sort(key=lambda f: (f.stage_id or 0, f.bucket))
        raw = {
            (f.pipeline_id, f.stage_id, f.bucket): f
            for f in folding.combine(
                (f.pipeline_id, f.stage_id, f.bucket - f.bucket % width, f.error_count, f.sketch)
                for f in minute_folds
            )
        }
        for key, at_least in group:
            fold = raw.get(key)
            if fold is not None and fold.sketch.count >= at_least:
                recomputed.append(fold)
            else:
                logger.error(
                    "rollup.spans_missing",
                    extra={
                        "pipeline": key[0],
                        "stage": key[1],
                        "resolution": level.coarse,
                        "bucket": start.isoformat(),
                        "expected_at_least": at_least,
                        "found": 0 if fold is None else fold.sketch.count,
                    },
                )
    return recomputed


def _pipeline_and_bucket(doubtful: tuple[Key, int]) -> tuple[int, int]:
    (pipeline_id, _, bucket), _ = doubtful
    return pipeline_id, bucket


def _steps(start: dt.datetime, end: dt.datetime, step: dt.timedelta) -> Iterator[dt.datetime]:
    moment = start
    while moment < end:
        yield moment
        moment += step


def _floor(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    seconds = int(step.total_seconds())
    epoch = int(moment.timestamp())
    return dt.datetime.fromtimestamp(epoch - epoch % seconds, dt.UTC)


def _ceil(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    floor = _floor(moment, step)
    return floor if floor == moment else floor + step
