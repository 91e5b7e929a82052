"""The stage percentiles of a report: the rollups' sketches merged per pipeline, stage and
month, up to the report's cut-off (Django reads, returning plain frozen dataclasses).

Closed days come from the day rollups; the days after the last day rollup (today, and
yesterday until compaction has made its day row) from the minute rollups, up to the same
minute as the SLA counters. So a report's percentiles and attainment count the same spans'
time span, whatever the hour it is built.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from django.db.models import Max

from audits.reporting.periods import Period
from latencyboard.rollups.models import Resolution, Rollup
from latencyboard.sketches.sketch import merge_many

QUANTILES = (0.5, 0.95, 0.99, 0.999)
QUANTILE_METHOD: Final = "lower"
DAY: Final = dt.timedelta(days=1)


@dataclass(frozen=True, slots=True)
class Percentiles:
    pipeline: str
    stage: str
    month: str
    days: int  # with any rollup
    n: int
    values: tuple[float, ...]  # one per QUANTILES


def _rows(
    pipeline_ids: Sequence[int], resolution: str, start: dt.datetime, end: dt.datetime
) -> list[tuple[str, str | None, dt.datetime, bytes]]:
    return list(
        Rollup.objects.filter(
            pipeline_id__in=pipeline_ids,
            resolution=resolution,
            bucket_start__gte=start,
            bucket_start__lt=end,
        )
        .order_by("pipeline__service_name", "stage__name", "bucket_start")
        .values_list("pipeline__service_name", "stage__name", "bucket_start", "sketch")
    )


def collect(
    pipeline_ids: Sequence[int], months: Sequence[Period], data_end: dt.datetime
) -> tuple[Percentiles, ...]:
    """One row per pipeline, stage and month of the spans that ended before ``data_end``."""
    start, end = months[0].start, min(months[-1].end, data_end)
    if end <= start:
        return ()
    last_day = Rollup.objects.filter(
        pipeline_id__in=pipeline_ids,
        resolution=Resolution.DAY,
        bucket_start__gte=start,
        bucket_start__lte=end - DAY,
    ).aggregate(last=Max("bucket_start"))["last"]
    minutes_from = start if last_day is None else last_day + DAY
    rows = _rows(pipeline_ids, Resolution.DAY, start, minutes_from)
    rows += _rows(pipeline_ids, Resolution.MINUTE, minutes_from, end)
    groups: dict[tuple[str, str, str], list[bytes]] = {}
    days: dict[tuple[str, str, str], set[dt.date]] = {}
    for pipeline, stage, bucket, sketch in rows:
        month = next(m.label for m in months if m.start <= bucket < m.end)
        key = (pipeline, stage or "end-to-end", month)
        groups.setdefault(key, []).append(bytes(sketch))
        days.setdefault(key, set()).add(bucket.date())
    table = []
    for (pipeline, stage, month), blobs in sorted(groups.items()):
        merged = merge_many(blobs)
        values = tuple(float(merged.quantile(q, QUANTILE_METHOD)) for q in QUANTILES)
        table.append(
            Percentiles(
                pipeline, stage, month, len(days[pipeline, stage, month]), merged.count, values
            )
        )
    return tuple(table)
