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
from latencyboard.rollups import cohort_services, folding
from latencyboard.rollups.folding import Fold
from latencyboard.sketches.sketch import to_bytes_many
from latencyboard.spans.columns import span_columns
from latencyboard.storage import fold_lock, fold_spans, rollup_rows, thinning
from latencyboard.storage.rollup_rows import Key
from latencyboard.windows import DAY, HOUR, floor_to, steps

logger = logging.getLogger(__name__)

GRACE: Final = dt.timedelta(minutes=5)
"""How long after its end an hour is compacted: spans in flight by then are late spans."""

_CANDIDATES_PER_STATEMENT: Final = 500


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
class LevelResult:
    """What one level of compaction wrote, and which (pipeline, coarse bucket) it checked."""

    written: int
    from_spans: int  # of those, recomputed from raw spans
    buckets: set[tuple[int, int]]


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
        hours = compact_level(cursor, HOURS, end=complete, kept_from=minutes_from)
        days = compact_level(cursor, DAYS, end=floor_to(complete, DAY), kept_from=hours_from)
        # Before the minutes expire: rollup minutes stand for cohort minutes too.
        cohort_rows = cohort_services.compact_cohorts(
            cursor, hours=hours.buckets, days=days.buckets
        )
        deleted = sum(
            rollup_rows.delete_older(cursor, resolution, before)
            for resolution, before in (
                ("minute", minutes_from),
                ("hour", hours_from),
                ("day", days_from),
            )
        )
        cohort_deleted = cohort_services.expire_cohorts(
            cursor, {"minute": minutes_from, "hour": hours_from, "day": days_from}
        )
    result = CompactionResult(
        hours.written, days.written, hours.from_spans + days.from_spans, deleted
    )
    logger.info(
        "rollup.compacted",
        extra={
            "hours": result.hours,
            "days": result.days,
            "from_spans": result.from_spans,
            "deleted": result.deleted,
            "cohort_rows": cohort_rows,
            "cohort_deleted": cohort_deleted,
        },
    )
    return result


def compact_level(
    cursor: psycopg.Cursor[Any],
    level: Level,
    *,
    end: dt.datetime,
    kept_from: dt.datetime,
    start: dt.datetime | None = None,
    scope: list[int] | None = None,
) -> LevelResult:
    """Recompute the coarse rows of ``level`` that need it, in ``[start, end)`` and for the
    ``scope`` pipelines (None: all). The buckets checked are where cohort rows may need
    recomputing too (:func:`~latencyboard.rollups.cohort_services.compact_cohorts`).

    A candidate (see ``rollup_rows.compaction_candidates``) from at or after ``kept_from``
    becomes the merge of its finer rows. Before ``kept_from`` the finer rows are about to
    expire and may be only the late ones of a bucket whose other finer rows expired already:
    the coarse row is kept when it equals their merge (nothing changed), else recomputed from
    the raw spans. So is a merge that would shrink a row, which no fold can cause.
    """
    candidates = rollup_rows.compaction_candidates(
        cursor,
        fine=level.fine,
        coarse=level.coarse,
        width=level.width,
        start=start or dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        end=end,
        kept_from=kept_from,
        pipelines=scope,
    )
    teams = rollup_rows.teams_of(cursor, {pipeline_id for pipeline_id, _, _ in candidates})
    written = from_spans = 0
    for first in range(0, len(candidates), _CANDIDATES_PER_STATEMENT):
        chunk = candidates[first : first + _CANDIDATES_PER_STATEMENT]
        fine = rollup_rows.finer_rows(cursor, chunk, level.fine, level.width)
        merged = {(f.pipeline_id, f.stage_id, f.bucket): f for f in folding.combine(fine)}
        blobs = dict(zip(merged, to_bytes_many([f.sketch for f in merged.values()]), strict=True))
        stored = {
            (p, s, b): _Stored(n, e, blob)
            for p, s, b, n, e, blob in rollup_rows.stored_rows(cursor, chunk, level.coarse)
        }
        replace, doubtful = [], []
        for key in chunk:
            fold, row = merged[key], stored.get(key)
            if row is None:
                replace.append(fold)
            elif (row.count, row.error_count, row.sketch) == (
                fold.sketch.count,
                fold.error_count,
                blobs[key],
            ):
                continue
            elif key[2] >= kept_from.timestamp() and fold.sketch.count >= row.count:
                replace.append(fold)
            else:
                doubtful.append((key, max(row.count, fold.sketch.count)))
        recomputed = _from_spans(cursor, level, doubtful)
        rollup_rows.replace(cursor, level.coarse, replace + recomputed, teams)
        written += len(replace) + len(recomputed)
        from_spans += len(recomputed)
    return LevelResult(written, from_spans, {(p, b) for p, _, b in candidates})


def _from_spans(
    cursor: psycopg.Cursor[Any], level: Level, doubtful: Sequence[tuple[Key, int]]
) -> list[Fold]:
    """Coarse rows recomputed from the raw spans of rolled-up batches, one pipeline and
    bucket at a time. One that would hold fewer spans than its rows already did (the raw
    spans expired) is left as it is and logged."""
    width = int(level.width.total_seconds())
    recomputed = []
    by_bucket = sorted(doubtful, key=_pipeline_and_bucket)
    thinned: set[dt.date] = set()
    if by_bucket:
        first, last = min(k[2] for k, _ in by_bucket), max(k[2] for k, _ in by_bucket)
        thinned = set(
            thinning.thinned_days(
                cursor,
                dt.datetime.fromtimestamp(first, dt.UTC).date(),
                dt.datetime.fromtimestamp(last, dt.UTC).date() + DAY,
            )
        )
    for (pipeline_id, bucket), group in itertools.groupby(by_bucket, key=_pipeline_and_bucket):
        start = dt.datetime.fromtimestamp(bucket, dt.UTC)
        if start.date() in thinned:
            # A thinned day's spans are a sample: the row folded from all of them stays.
            logger.warning(
                "rollup.thinned_day_kept",
                extra={"pipeline": pipeline_id, "bucket": start.isoformat()},
            )
            continue
        minute_folds: list[Fold] = []
        for hour in steps(start, start + level.width, HOUR):
            records = fold_spans.folded_spans(cursor, [pipeline_id], hour, hour + HOUR)
            minute_folds.extend(folding.fold_minutes(span_columns(records)))
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
