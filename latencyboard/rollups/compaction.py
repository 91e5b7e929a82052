"""Writes of rollups: compacting minutes into hours and hours into days, and retention.

Coarse rows are recomputed from their finer rows, never added to, so compacting again changes
nothing. Compaction takes the fold lock exclusively, so it sees no fold
half done (see :mod:`latencyboard.rollups.services`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import psycopg
from django.conf import settings
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.rollups import folding
from latencyboard.rollups.folding import Fold
from latencyboard.rollups.rows import (
    FOLDED_SPANS,
    REPLACE,
    SAME_BUCKET,
    read_spans,
    rows_of_keys,
    steps,
    write_rows,
)
from latencyboard.rollups.windows import floor_to
from latencyboard.storage import fold_lock

logger = logging.getLogger(__name__)

HOUR: Final = dt.timedelta(hours=1)
DAY: Final = dt.timedelta(days=1)
GRACE: Final = dt.timedelta(minutes=5)
"""How long after its end an hour is compacted: spans in flight by then are late spans."""

_CANDIDATES_PER_STATEMENT: Final = 500

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
_WITHIN_BUCKET = (
    "r.bucket_start >= to_timestamp(k.bucket)"
    " AND r.bucket_start < to_timestamp(k.bucket) + %(width)s"
)
_FINE_ROWS = (
    rows_of_keys("r.pipeline_id, r.stage_id, k.bucket, r.error_count, r.sketch", _WITHIN_BUCKET)
    + "ORDER BY k.position, r.bucket_start"
)
_COARSE_ROWS = rows_of_keys(
    "r.pipeline_id, r.stage_id, k.bucket, r.count, r.error_count, r.sketch", SAME_BUCKET
)

Key = tuple[int, int | None, int]  # pipeline, stage (None: end to end), bucket (Unix seconds)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction run wrote and deleted."""

    hours: int  # hour rows written
    days: int  # day rows written
    from_spans: int  # of those, recomputed from raw spans (late spans past minute retention)
    deleted: int  # rows past retention


@dataclass(frozen=True, slots=True)
class Level:
    """A step of compaction: ``fine`` rows merged into ``coarse`` rows ``width`` wide."""

    fine: str
    coarse: str
    width: dt.timedelta


HOURS = Level("minute", "hour", HOUR)
DAYS = Level("hour", "day", DAY)


@dataclass(frozen=True, slots=True)
class _Stored:
    count: int
    error_count: int
    sketch: bytes


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
    complete = floor_to(now - GRACE, HOUR)
    minutes_from = floor_to(now - dt.timedelta(days=settings.ROLLUP_MINUTE_DAYS), HOUR)
    hours_from = floor_to(now - dt.timedelta(days=settings.ROLLUP_HOUR_DAYS), DAY)
    days_from = floor_to(now - dt.timedelta(days=settings.ROLLUP_DAY_DAYS), DAY)
    with transaction.atomic():
        cursor = psycopg_cursor()
        fold_lock.take_exclusive(cursor)
        hours, hours_raw = compact_level(cursor, HOURS, end=complete, kept_from=minutes_from)
        days, days_raw = compact_level(
            cursor, DAYS, end=floor_to(complete, DAY), kept_from=hours_from
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


def _teams_of(cursor: psycopg.Cursor[Any], pipelines: set[int]) -> dict[int, int]:
    rows = cursor.execute(
        "SELECT id, team_id FROM pipelines_pipeline WHERE id = ANY(%b::int8[])", [list(pipelines)]
    ).fetchall()
    return dict(rows)


def compact_level(
    cursor: psycopg.Cursor[Any],
    level: Level,
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
        write_rows(cursor, REPLACE, level.coarse, replace + recomputed, teams)
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
    cursor: psycopg.Cursor[Any], level: Level, doubtful: Sequence[tuple[Key, int]]
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
        for hour in steps(start, start + level.width, HOUR):
            columns = read_spans(
                cursor,
                FOLDED_SPANS,
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
