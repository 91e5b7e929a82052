"""Writes of cohort rollups, inside the transactions of the rollup fold and of compaction
(:mod:`latencyboard.rollups.services`, :mod:`latencyboard.rollups.compaction`), under the
same advisory lock: a batch's spans reach the cohort rows exactly when they reach the
rollups.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from django.conf import settings

from latencyboard.pipelines.models import FOLDED_COHORT_ATTRIBUTES
from latencyboard.rollups import cohorts
from latencyboard.rollups.cohorts import CohortFold, CohortGroup, CohortMinutes, DayKey
from latencyboard.sketches.sketch import Sketch, to_bytes_many
from latencyboard.spans.columns import SpanColumns
from latencyboard.storage import cohort_rows
from latencyboard.windows import DAY, HOUR

_PER_STATEMENT = 500


def cohort_keys(cursor: psycopg.Cursor[Any]) -> list[str]:
    """Every attribute that is a cohort attribute of some pipeline."""
    configured = [key for (key,) in cursor.execute(cohort_rows.COHORT_KEYS).fetchall()]
    return sorted({*FOLDED_COHORT_ATTRIBUTES, *configured})


def cohort_minutes(
    cursor: psycopg.Cursor[Any],
    batches: Sequence[int],
    spans: SpanColumns,
    template_id: npt.NDArray[np.int64],
    own_cohort_key: npt.NDArray[np.bool_],
    read_keys: Collection[str],
    teams: Mapping[int, int],
) -> CohortMinutes:
    """The cohort minute groups of ``spans`` (those of ``batches`` the fold counts), values past
    the cap as :data:`~latencyboard.rollups.cohorts.OTHER`; nothing written yet.
    ``template_id`` and ``own_cohort_key`` are the spans'
    (:class:`latencyboard.storage.fold_spans.BatchSpans`, flagged for ``read_keys``); an
    attribute configured since they were read waits for the next fold."""
    if not len(spans) or not teams:
        return CohortMinutes.none()
    keys_of: dict[int, set[str]] = {pipeline: set(FOLDED_COHORT_ATTRIBUTES) for pipeline in teams}
    for pipeline_id, key in cursor.execute(cohort_rows.PIPELINE_KEYS, [list(teams)]).fetchall():
        if key in read_keys:
            keys_of[pipeline_id].add(key)
    keys = sorted(set().union(*keys_of.values()))
    shared = ~own_cohort_key
    templates = np.unique(template_id[shared])
    values = {
        (template, key): value
        for template, key, value in cursor.execute(
            cohort_rows.TEMPLATE_VALUES, {"keys": keys, "templates": templates.tolist()}
        ).fetchall()
    }
    parts = [cohorts.from_templates(spans.select(shared), template_id[shared], keys_of, values)]
    if own_cohort_key.any():
        cursor.execute(
            cohort_rows.SPANS_BY_COHORT,
            {
                "defaults": list(FOLDED_COHORT_ATTRIBUTES),
                "pipelines": list(teams),
                "batches": list(batches),
                "first": batches[0],
                "last": batches[-1],
                "stages": np.unique(spans.stage_id).tolist(),
                "cohort_keys": keys,
            },
        )
        parts.append(cohorts.from_groups([CohortGroup(*row) for row in cursor.fetchall()]))
    entries = cohorts.joined(parts)
    if not len(entries):
        return CohortMinutes.none()
    minutes = entries.spans.minute
    cursor.execute(
        cohort_rows.STORED_VALUES,
        {
            "pipelines": list(teams),
            "first_day": cohorts.day_of(int(minutes.min())),
            "end_day": cohorts.day_of(int(minutes.max())) + cohorts.DAY_SECONDS,
        },
    )
    stored: dict[DayKey, set[str]] = defaultdict(set)
    for pipeline_id, attribute, day, value in cursor.fetchall():
        stored[(pipeline_id, attribute, day)].add(value)
    days = cohorts.cohort_days(entries)
    counts = cohorts.value_counts(days)
    stored_as = cohorts.admit_values(counts, stored, settings.COHORT_VALUES_PER_DAY)
    return cohorts.fold_cohort_minutes(entries, days, stored_as)


def add_minutes(
    cursor: psycopg.Cursor[Any], folds: Sequence[CohortFold], teams: Mapping[int, int]
) -> None:
    """Add ``folds`` (sorted as :func:`~latencyboard.rollups.cohorts.to_store` leaves them)
    to the cohort minute rows: insert the minutes nobody has yet, merge the others into their
    rows under row locks (as :func:`latencyboard.rollups.services.fold_pending_batches` does
    for rollups)."""
    if not folds:
        return
    cursor.execute(cohort_rows.ADD_NEW, {"resolution": "minute", **_columns(folds, teams)})
    inserted = set(cursor.fetchall())
    existing = [fold for fold in folds if fold.key not in inserted]
    if not existing:
        return
    cursor.execute(cohort_rows.LOCK_ROWS, {"resolution": "minute", **_keys(existing)})
    merged = []
    for row_id, position, errors, blob in cursor.fetchall():
        fold = existing[position - 1]
        sketch = Sketch.from_bytes(blob)
        sketch.merge(fold.sketch)
        merged.append((row_id, errors + fold.error_count, sketch))
    cursor.execute(
        cohort_rows.UPDATE_ROWS,
        {
            "id": [row_id for row_id, _, _ in merged],
            "count": [sketch.count for _, _, sketch in merged],
            "errors": [errors for _, errors, _ in merged],
            "sum": [sketch.sum for _, _, sketch in merged],
            "min": [sketch.min for _, _, sketch in merged],
            "max": [sketch.max for _, _, sketch in merged],
            "sketch": to_bytes_many([sketch for _, _, sketch in merged]),
        },
    )


Buckets = Collection[tuple[int, int]]  # (pipeline, coarse bucket start in Unix seconds)


def compact_cohorts(cursor: psycopg.Cursor[Any], *, hours: Buckets, days: Buckets) -> int:
    """Recompute the cohort hours and days of these (pipeline, bucket) pairs whose finer
    rows hold more spans than they do; rows written. Runs in the transaction of a rollup
    compaction or rebuild, under its exclusive lock.

    The pairs are those whose rollup rows that compaction or rebuild checked: a fold adds
    the same spans to the cohort minutes and the rollup minutes of a (pipeline, hour), so a
    cohort hour or day can only be stale where its rollup row is, and the cost follows the
    new spans, not the rows stored. Unlike rollups, a cohort row whose finer rows expired
    is never recomputed from raw spans: a late span past the minute retention stays out of
    its cohort's hour.
    """
    written = 0
    for fine, coarse, width, buckets in (
        ("minute", "hour", HOUR, hours),
        ("hour", "day", DAY, days),
    ):
        if not buckets:
            continue
        params = {
            "fine": fine,
            "coarse": coarse,
            "width": width,
            "pipelines": [pipeline_id for pipeline_id, _ in buckets],
            "buckets": [bucket for _, bucket in buckets],
        }
        candidates = cursor.execute(cohort_rows.CANDIDATES, params).fetchall()
        teams = dict(
            cursor.execute(cohort_rows.TEAMS, [list({c[0] for c in candidates})]).fetchall()
        )
        for first in range(0, len(candidates), _PER_STATEMENT):
            chunk = candidates[first : first + _PER_STATEMENT]
            keys = {name: [key[i] for key in chunk] for i, name in enumerate(_KEY_NAMES)}
            cursor.execute(cohort_rows.FINE_ROWS, {**keys, "resolution": fine, "width": width})
            folds = cohorts.combine(cursor.fetchall())
            cursor.execute(cohort_rows.REPLACE, {"resolution": coarse, **_columns(folds, teams)})
            written += len(folds)
    return written


def materialize(
    cursor: psycopg.Cursor[Any], pipelines: Sequence[int], start: dt.datetime, end: dt.datetime
) -> None:
    """Store apart the cohort rows the pipelines' rollup minutes in ``[start, end)`` stand
    for, before a rebuild replaces those minutes: cohort rows are never recomputed from raw
    spans, and the rebuilt minutes stand for none."""
    cursor.execute(
        cohort_rows.MATERIALIZE, {"pipelines": list(pipelines), "start": start, "end": end}
    )


def expire_cohorts(cursor: psycopg.Cursor[Any], kept_from: Mapping[str, dt.datetime]) -> int:
    """Delete the rows of each resolution older than ``kept_from[resolution]``; how many."""
    deleted = 0
    for resolution, before in kept_from.items():
        cursor.execute(cohort_rows.EXPIRE, [resolution, before])
        deleted += cursor.rowcount
    return deleted


_KEY_NAMES = ("pipeline", "attribute", "value", "stage", "bucket")


def _keys(folds: Sequence[CohortFold]) -> dict[str, list[Any]]:
    return {name: [fold.key[i] for fold in folds] for i, name in enumerate(_KEY_NAMES)}


def _columns(folds: Sequence[CohortFold], teams: Mapping[int, int]) -> dict[str, list[Any]]:
    return {
        **_keys(folds),
        "team": [teams[fold.pipeline_id] for fold in folds],
        "count": [fold.sketch.count for fold in folds],
        "errors": [fold.error_count for fold in folds],
        "sum": [fold.sketch.sum for fold in folds],
        "min": [fold.sketch.min for fold in folds],
        "max": [fold.sketch.max for fold in folds],
        "sketch": to_bytes_many([fold.sketch for fold in folds]),
    }
