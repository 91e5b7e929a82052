"""Writes of tiered retention: thinning the days of raw spans past the hot period.

A day is thinned only once everything derived from its spans is written (every batch with
spans in it folded into rollups, cohort sketches and SLA counters; its stage shares
computed): from then on those figures are final, and rebuilds and back-fills leave the day
alone. Thinning takes the fold lock shared, so folds go on while rebuilds, back-fills and
compaction (which take it exclusive) wait for the day to be either whole or thinned.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import psycopg
from django.conf import settings
from django.db import transaction

from latencyboard.db import psycopg_cursor
from latencyboard.retention import sampling
from latencyboard.retention.models import ThinnedDay
from latencyboard.storage import fold_lock, thinning
from latencyboard.storage import partitions as storage_partitions
from latencyboard.storage.partitions import DayPartition

logger = logging.getLogger(__name__)

TRACE_REACH: Final = dt.timedelta(hours=1)
"""How far past midnight a trace's spans are looked for, to judge the trace whole (as far
as stage shares look for a request's spans)."""
_RECORD: Final = np.dtype([("trace_id", "V16"), ("error", "u1"), ("slow", "u1"), ("nearby", "u1")])


class NotThinnable(ValueError):
    """The day cannot be thinned (yet): the message says why."""


@dataclass(frozen=True, slots=True)
class ThinResult:
    day: dt.date
    spans_before: int
    spans_after: int
    traces_before: int
    selection: sampling.Selection


def thin_day(day: dt.date, now: dt.datetime, percent: int | None = None) -> ThinResult | None:
    """Thin ``day`` to its error traces, slow traces and ``percent`` (default
    ``SPAN_SAMPLE_PERCENT``) of the rest; None when it is thinned already.

    Raises :class:`NotThinnable` for a day inside the hot period, without a partition, or
    whose spans are not all folded (unfolded batches, stage shares behind, minute rollups
    gone), and changes nothing then.
    """
    percent = settings.SPAN_SAMPLE_PERCENT if percent is None else percent
    partition = DayPartition(day)
    if not sampling.due_days([day], [], now, settings.SPAN_HOT_DAYS):
        raise NotThinnable(f"{day} is within the hot period (SPAN_HOT_DAYS).")
    with transaction.atomic():
        cursor = psycopg_cursor()
        thinning.lock(cursor)
        if ThinnedDay.objects.filter(day=day).exists():
            return None
        if partition.name not in storage_partitions.existing(cursor):
            raise NotThinnable(f"{day} has no span partition.")
        fold_lock.take_shared(cursor)
        thinning.hold_day(cursor, partition)
        _check_folded(cursor, partition)
        minutes = thinning.minute_sketches(
            cursor, partition.lower - TRACE_REACH, partition.upper + TRACE_REACH
        )
        neighbours = set(
            ThinnedDay.objects.filter(
                day__in=[day - dt.timedelta(days=1), day + dt.timedelta(days=1)]
            ).values_list("day", flat=True)
        )
        traces, records = thinning.trace_flags(
            cursor,
            lower=partition.lower,
            upper=partition.upper,
            reach=TRACE_REACH,
            slow=(
                [pipeline_id for pipeline_id, _, _ in minutes],
                [minute for _, minute, _ in minutes],
                sampling.slow_thresholds_ms(sketch for _, _, sketch in minutes),
            ),
            before_thinned=day - dt.timedelta(days=1) in neighbours,
            after_thinned=day + dt.timedelta(days=1) in neighbours,
        )
        flags = _decode(records)
        if len(flags) != traces:
            raise ValueError(f"read {len(flags)} of {traces} traces")
        selection = sampling.select(flags, percent)
        kept_ids = np.frombuffer(flags.trace_ids, dtype="V16")[selection.keep].tobytes()
        before, after = thinning.swap_in_kept(cursor, partition, kept_ids)
        thinning.record(
            cursor,
            day,
            now,
            percent,
            (before, after),
            traces,
            (selection.errors, selection.slow, selection.sampled),
        )
    result = ThinResult(day, before, after, traces, selection)
    logger.info(
        "retention.thinned",
        extra={
            "day": day.isoformat(),
            "percent": percent,
            "spans_before": before,
            "spans_after": after,
            "traces": traces,
            "error_traces": selection.errors,
            "slow_traces": selection.slow,
            "sampled_traces": selection.sampled,
        },
    )
    return result


def thin_due(now: dt.datetime) -> list[ThinResult]:
    """Thin every day past the hot period not thinned yet, oldest first; a day that cannot be
    thinned yet is logged and left for the next run. A hot period as long as the retention
    thins nothing: days are dropped whole instead."""
    if settings.SPAN_HOT_DAYS >= settings.RETENTION_DAYS:
        return []
    with transaction.atomic():
        existing = storage_partitions.existing(psycopg_cursor())
    days = [p.day for name in existing if (p := DayPartition.from_name(name)) is not None]
    thinned = ThinnedDay.objects.values_list("day", flat=True)
    results = []
    for day in sampling.due_days(days, thinned, now, settings.SPAN_HOT_DAYS):
        try:
            result = thin_day(day, now)
        except NotThinnable as exc:
            logger.warning("retention.not_thinned", extra={"day": day.isoformat(), "why": str(exc)})
            continue
        if result is not None:
            results.append(result)
    return results


def _check_folded(cursor: psycopg.Cursor[Any], partition: DayPartition) -> None:
    unfolded = thinning.unfolded_batches(cursor, partition.name)
    if unfolded:
        raise NotThinnable(f"{partition.day} has spans in {unfolded} batches not folded yet.")
    behind = thinning.shares_behind(cursor, partition.name, partition.upper + TRACE_REACH)
    if behind:
        raise NotThinnable(f"{partition.day}: stage shares not computed yet for {behind}.")
    gone = thinning.without_minutes(cursor, partition.name, partition.lower, partition.upper)
    if gone:
        raise NotThinnable(
            f"{partition.day}: no minute rollups left for pipelines {gone} (ROLLUP_MINUTE_DAYS)."
        )


def _decode(records: bytes) -> sampling.TraceFlags:
    rows = np.frombuffer(records, dtype=_RECORD)
    return sampling.TraceFlags(
        rows["trace_id"].tobytes(),
        rows["error"].astype(np.bool_),
        rows["slow"].astype(np.bool_),
        rows["nearby"].astype(np.bool_),
    )
