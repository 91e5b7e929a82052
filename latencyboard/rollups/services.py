"""Writes of rollups: folding ingest batches into minute rollups and SLA counters.

Every stored span is counted exactly once: a fold claims pending ingest batches, adds their
spans to the minute rows and the SLA counters and marks the batches rolled up, all in one
transaction. Coarser rows are recomputed from finer ones, never added to, so compacting again
changes nothing (:mod:`~latencyboard.rollups.compaction`).

Three kinds of writer share the fold lock (:mod:`latencyboard.storage.fold_lock`): folds take
it shared and run side by side; compaction, rebuilds (:mod:`~latencyboard.rollups.rebuild`)
and SLA objective back-fills take it exclusively, so they see no fold half done, and "the
spans of batches already rolled up" is exactly what the minute rows hold.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import psycopg
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.live.coalescing import Coalescer, Touched
from latencyboard.rollups import cohort_services, cohorts, folding
from latencyboard.rollups.cohorts import CohortFold, MinuteKey
from latencyboard.rollups.folding import Fold
from latencyboard.rollups.publishing import publish_touched
from latencyboard.sketches.sketch import Sketch
from latencyboard.sla import counters
from latencyboard.spans.columns import SpanColumns, span_columns
from latencyboard.storage import fold_lock, fold_spans, rollup_rows

logger = logging.getLogger(__name__)

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
        batches = _within_budget(fold_spans.claim_batches(cursor, max_batches), max_spans)
        if not batches:
            return FoldResult(0, 0)
        cohort_keys = cohort_services.cohort_keys(cursor)
        read = fold_spans.batch_spans(cursor, batches, cohort_keys)
        spans, teams, kept = of_existing_stages(cursor, read.records)
        folds = folding.fold_minutes(spans)
        cohort_groups = cohort_services.cohort_minutes(
            cursor,
            batches,
            spans,
            read.template_id[kept],
            read.own_cohort_key[kept],
            cohort_keys,
            teams,
        )
        counts = {(f.pipeline_id, f.stage_id, f.bucket): f.sketch.count for f in folds}
        sole = cohorts.sole_values(cohort_groups, counts)
        elided, materialized = _add_minutes(cursor, folds, teams, sole)
        counters.add_spans(cursor, spans)
        cohort_services.add_minutes(
            cursor, cohorts.to_store(cohort_groups, elided, materialized), teams
        )
        fold_spans.mark_rolled_up(cursor, batches, now)
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


def of_existing_stages(
    cursor: psycopg.Cursor[Any], records: fold_spans.SpanRecords
) -> tuple[SpanColumns, dict[int, int], npt.NDArray[np.bool_]]:
    """The spans whose stage still exists, the team of each of their pipelines, and which of
    ``records`` those spans are.

    Spans of a stage or pipeline deleted since they were stored would make the rollup rows
    point at nothing and the fold fail forever: they are left out, and logged.
    """
    spans = span_columns(records)
    rows = fold_spans.stage_owners(cursor, np.unique(spans.stage_id).tolist())
    keep = np.isin(spans.stage_id, np.array([stage_id for stage_id, _, _ in rows], np.int64))
    if not keep.all():
        logger.warning("rollup.spans_of_deleted_stages", extra={"spans": int((~keep).sum())})
        spans = spans.select(keep)
    return spans, {pipeline_id: team_id for _, pipeline_id, team_id in rows}, keep


Elided = dict[MinuteKey, dict[str, str]]


def _add_minutes(
    cursor: psycopg.Cursor[Any], folds: Sequence[Fold], teams: dict[int, int], sole: Elided
) -> tuple[Elided, list[CohortFold]]:
    """Insert the minutes nobody has yet; merge the others into their rows, under row locks.

    A new row stands for the cohorts ``sole`` gives its key (``Rollup.cohorts``); a row
    merged into keeps standing for those the added spans all share, and each cohort it
    stops standing for becomes a cohort row of its own, what the row held until now.
    Returns the cohorts rows stand for after this fold, and those cohort rows."""
    inserted = rollup_rows.add_new(cursor, "minute", folds, teams, sole)
    elided = {key: sole[key] for key in inserted if key in sole}
    existing = [f for f in folds if (f.pipeline_id, f.stage_id, f.bucket) not in inserted]
    if not existing:
        return elided, []
    rows = rollup_rows.lock_minutes(
        cursor, [(f.pipeline_id, f.stage_id, f.bucket) for f in existing]
    )
    merged = []
    materialized: list[CohortFold] = []
    for fold in existing:
        key = (fold.pipeline_id, fold.stage_id, fold.bucket)
        row_id, errors, blob, stored = rows[key]
        kept = cohorts.still_sole(stored, sole.get(key, {}))
        if len(kept) < len(stored):
            held = Sketch.from_bytes(blob)
            materialized.extend(
                CohortFold(fold.pipeline_id, a, v, fold.stage_id, fold.bucket, errors, held)
                for a, v in stored.items()
                if a not in kept
            )
        if kept:
            elided[key] = kept
        sketch = Sketch.from_bytes(blob)
        sketch.merge(fold.sketch)
        merged.append((row_id, errors + fold.error_count, sketch, kept))
    rollup_rows.update(cursor, merged)
    return elided, materialized
