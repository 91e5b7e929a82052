"""Writes of rollups: folding ingest batches into minute rollups and SLA counters.

Every stored span is counted exactly once: a fold claims pending ingest batches, adds their
spans to the minute rows and the SLA counters and marks the batches rolled up, all in one
transaction. Coarser rows are recomputed from finer ones, never added to, so compacting again
changes nothing (:mod:`~latencyboard.rollups.compaction`).

Three kinds of writer share the fold lock (:mod:`latencyboard.storage.fold_lock`): folds take
it shared and run side by side; compaction, rebuilds (:mod:`~latencyboard.rollups.rebuild`) and SLA objective
back-fills take it exclusively, so they see no fold half done, and "the spans of batches
already rolled up" is exactly what the minute rows hold.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import psycopg
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.live.coalescing import Coalescer, Touched
from latencyboard.rollups import folding
from latencyboard.rollups.folding import Fold
from latencyboard.rollups.publishing import publish_touched
from latencyboard.rollups.rows import (
    ADD_NEW,
    SAME_BUCKET,
    add_sla_minutes,
    of_existing_stages,
    read_spans,
    rows_of_keys,
    write_rows,
)
from latencyboard.sketches.sketch import Sketch
from latencyboard.storage import fold_lock

logger = logging.getLogger(__name__)

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
# Locks in the order the rows were inserted in, so that two folds never wait on each other
# in a cycle.
_LOCK_ROWS = f"""
SELECT id, pipeline_id, stage_id, extract(epoch FROM bucket_start)::int8, error_count, sketch
FROM rollups_rollup
WHERE id IN ({rows_of_keys("r.id", SAME_BUCKET)})
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


# Live pages hear of new minutes at most this often (per group and fold worker).
PUBLISH_INTERVAL_SECONDS: Final = 0.25


@dataclass(frozen=True, slots=True)
class FoldResult:
    """Ingest batches marked rolled up, and the spans counted into rollups from them; and
    which minutes of which pipelines changed (not part of what a fold counted)."""

    batches: int
    spans: int
    touched: tuple[Touched, ...] = field(default=(), compare=False)


def fold_pending_batches(
    now: dt.datetime, max_batches: int = 200, max_spans: int = 250_000
) -> FoldResult:
    """Fold the spans of up to ``max_batches`` pending ingest batches into the minute rollups
    and the SLA counters, and mark the batches rolled up, in one transaction.

    Batches are claimed oldest first with ``SKIP LOCKED``, so concurrent workers share the
    backlog and never fold a batch twice; claimed batches past ``max_spans`` stored spans
    (always at least one batch) are left pending for the next fold. The result names the
    minutes touched, for :func:`fold_until_idle` to tell the live pages once committed.
    """
    started = time.monotonic()
    with transaction.atomic():
        cursor = psycopg_cursor()
        fold_lock.take_shared(cursor)
        batches = _within_budget(cursor.execute(_CLAIM, [max_batches]).fetchall(), max_spans)
        if not batches:
            return FoldResult(0, 0)
        spans, teams = of_existing_stages(
            cursor,
            read_spans(
                cursor,
                _BATCH_SPANS,
                {"batches": batches, "first": batches[0], "last": batches[-1]},
            ),
        )
        folds = folding.fold_minutes(spans)
        _add_minutes(cursor, folds, teams)
        add_sla_minutes(cursor, spans)
        cursor.execute(
            "UPDATE spans_ingestbatch SET rolled_up_at = %s WHERE id = ANY(%b::int8[])",
            [now, batches],
        )
    logger.info(
        "rollup.done",
        extra={
            "batches": len(batches),
            "spans": len(spans),
            "rows": len(folds),
            "seconds": round(time.monotonic() - started, 3),
        },
    )
    return FoldResult(len(batches), len(spans), _touched(folds, teams))


def fold_until_idle(clock: Callable[[], dt.datetime], seconds: float) -> FoldResult:
    """Fold batch after batch until none is left to claim or ``seconds`` have passed.

    After each committed fold the live pages hear of the minutes it touched, coalesced to at
    most one event per group every ``PUBLISH_INTERVAL_SECONDS``; an unreachable Redis drops
    the events, never the fold.
    """
    deadline = time.monotonic() + seconds
    coalescer = Coalescer(PUBLISH_INTERVAL_SECONDS)
    batches = spans = 0
    while True:
        result = fold_pending_batches(clock())
        batches, spans = batches + result.batches, spans + result.spans
        coalescer.add(result.touched)
        idle = not result.batches or time.monotonic() >= deadline
        publish_touched(coalescer.drain() if idle else coalescer.due())
        if idle:
            return FoldResult(batches, spans)


def _touched(folds: Sequence[Fold], teams: dict[int, int]) -> tuple[Touched, ...]:
    """The first and last minute of each pipeline in ``folds``."""
    span: dict[int, tuple[int, int]] = {}
    for fold in folds:
        first, last = span.get(fold.pipeline_id, (fold.bucket, fold.bucket))
        span[fold.pipeline_id] = (min(first, fold.bucket), max(last, fold.bucket))
    return tuple(
        Touched(pipeline, teams[pipeline], first, last) for pipeline, (first, last) in span.items()
    )


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


def _add_minutes(cursor: psycopg.Cursor[Any], folds: Sequence[Fold], teams: dict[int, int]) -> None:
    """Insert the minutes nobody has yet; merge the others into their rows, under row locks."""
    inserted = set(write_rows(cursor, ADD_NEW, "minute", folds, teams))
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
