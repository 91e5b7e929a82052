"""Writing the exact SLA counters from folded spans, with the one rule of
:func:`latencyboard.sla.counting.count_minutes`.

Folds and rebuilds add the spans they fold; a new objective is back-filled from the spans
already folded, read back hour by hour, so every counter comes from the same numpy rule.
All of it runs under the fold lock, in the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any, Final

import psycopg

from latencyboard.sla.counting import ObjectiveSpec, count_minutes
from latencyboard.spans.columns import SpanColumns, span_columns
from latencyboard.storage import fold_spans, sla_minutes, thinning
from latencyboard.windows import DAY, steps

_BACKFILL_STEP: Final = dt.timedelta(hours=1)
logger = logging.getLogger(__name__)


def add_spans(
    cursor: psycopg.Cursor[Any],
    spans: SpanColumns,
    objectives: Sequence[ObjectiveSpec] | None = None,
) -> int:
    """Add the spans to the counters of ``objectives`` (None: every objective of their
    pipelines); returns the counter rows touched.

    Objectives are read here, under the fold lock: one created meanwhile has either counted
    these spans' batches already or is seen by this read.
    """
    if not len(spans):
        return 0
    if objectives is None:
        rows = sla_minutes.objectives_of(cursor, sorted(set(spans.pipeline_id.tolist())))
        objectives = [ObjectiveSpec(*row) for row in rows]
    counts = count_minutes(
        objectives,
        spans.pipeline_id,
        spans.stage_id,
        spans.is_root,
        spans.minute,
        spans.duration_ms,
    )
    sla_minutes.add(cursor, counts)
    return len(counts)


def backfill(
    cursor: psycopg.Cursor[Any], objective: ObjectiveSpec, since: dt.datetime | None = None
) -> int:
    """Count every retained span (from ``since`` on, if given) of batches already folded for
    a new ``objective``, but for thinned days; returns the minutes written. Folds count the
    other batches themselves, after this transaction, as they read the objectives under the
    fold lock."""
    extent = fold_spans.span_extent(cursor, objective.pipeline_id)
    if extent is None:
        return 0
    first, end = extent
    first = first if since is None else max(first, since)
    # A thinned day keeps a sample of its spans: counting them would understate every
    # minute, so its counters stay unwritten for this objective.
    thinned = set(thinning.thinned_days(cursor, first.date(), end.date() + DAY))
    if thinned:
        logger.warning(
            "sla.backfill_skipped_thinned",
            extra={"objective": objective.objective_id, "days": sorted(map(str, thinned))},
        )
    minutes = 0
    for start in steps(first, end, _BACKFILL_STEP):
        if start.date() in thinned:
            continue
        records = fold_spans.folded_stage_spans(
            cursor, objective.pipeline_id, objective.stage_id, start, start + _BACKFILL_STEP
        )
        minutes += add_spans(cursor, span_columns(records), [objective])
    return minutes


def recount(cursor: psycopg.Cursor[Any], objective: ObjectiveSpec, since: dt.datetime) -> int:
    """Replace the counters of ``objective`` for minutes from ``since`` (a whole minute) on,
    after its threshold changed: the counters before stay those of the old threshold."""
    sla_minutes.delete_since(cursor, objective.objective_id, since)
    return backfill(cursor, objective, since)
