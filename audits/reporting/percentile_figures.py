"""The stage percentiles of a report: the rollups' sketches merged per pipeline, stage and
month, up to the report's cut-off (Django reads, returning plain frozen dataclasses).

Each month is merged by the one read of a window of rollups that compare and the alerts use
(:mod:`latencyboard.rollups.sketch_windows`): day rows where they exist, hour rows around them,
minute rows for the rest, up to the same minute as the SLA counters. So a report's percentiles
and attainment count the same spans' time span, whatever the hour it is built.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from django.db.models import Max
from django.db.models.functions import TruncDate

from audits.reporting.periods import Period
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups.models import Resolution, Rollup
from latencyboard.rollups.sketch_windows import END_TO_END_KEY, windows_segments, windows_sketches
from latencyboard.windows import DAY

QUANTILES = (0.5, 0.95, 0.99, 0.999)
QUANTILE_METHOD: Final = "lower"


@dataclass(frozen=True, slots=True)
class Percentiles:
    pipeline: str
    stage: str
    month: str
    days: int  # with any rollup
    n: int
    values: tuple[float, ...]  # one per QUANTILES


def _days(
    pipeline_ids: Sequence[int], start: dt.datetime, end: dt.datetime
) -> dict[tuple[int, int | None], set[dt.date]]:
    """The days of ``[start, end)`` with any rollup of each (pipeline, stage): the closed days'
    day rows, then the minute rows of the days after the last of them (no sketch is read)."""
    last_day = Rollup.objects.filter(
        pipeline_id__in=pipeline_ids,
        resolution=Resolution.DAY,
        bucket_start__gte=start,
        bucket_start__lte=end - DAY,
    ).aggregate(last=Max("bucket_start"))["last"]
    minutes_from = start if last_day is None else last_day + DAY
    found: dict[tuple[int, int | None], set[dt.date]] = {}
    for resolution, first, until in (
        (Resolution.DAY, start, minutes_from),
        (Resolution.MINUTE, minutes_from, end),
    ):
        rows = (
            Rollup.objects.filter(
                pipeline_id__in=pipeline_ids,
                resolution=resolution,
                bucket_start__gte=first,
                bucket_start__lt=until,
            )
            .annotate(day=TruncDate("bucket_start", tzinfo=dt.UTC))
            .values_list("pipeline_id", "stage_id", "day")
            .distinct()
        )
        for pipeline_id, stage_id, day in rows:
            found.setdefault((pipeline_id, stage_id), set()).add(day)
    return found


def collect(
    pipeline_ids: Sequence[int], months: Sequence[Period], data_end: dt.datetime
) -> tuple[Percentiles, ...]:
    """One row per pipeline, stage and month of the spans that ended before ``data_end``: each
    month's sketches merged by the one read of a window of rollups
    (:func:`~latencyboard.rollups.sketch_windows.windows_sketches`)."""
    start, end = months[0].start, min(months[-1].end, data_end)
    if end <= start:
        return ()
    spans = [(month, month.start, min(month.end, end)) for month in months if month.start < end]
    days = _days(pipeline_ids, start, end)
    stage_names = dict(Stage.objects.filter(pipeline_id__in=pipeline_ids).values_list("pk", "name"))
    table = []
    for pipeline in Pipeline.objects.filter(pk__in=pipeline_ids):
        windows = windows_segments(pipeline, [(first, until) for _, first, until in spans])
        for (month, first, _), sketches in zip(
            spans, windows_sketches(pipeline.pk, windows), strict=True
        ):
            for series, merged in sketches.items():
                stage_id = None if series == END_TO_END_KEY else series
                month_days = {d for d in days.get((pipeline.pk, stage_id), ()) if d >= first.date()}
                values = tuple(float(merged.quantile(q, QUANTILE_METHOD)) for q in QUANTILES)
                table.append(
                    Percentiles(
                        pipeline.service_name,
                        "end-to-end" if stage_id is None else stage_names[stage_id],
                        month.label,
                        sum(1 for d in month_days if d < month.end.date()),
                        merged.count,
                        values,
                    )
                )
    return tuple(sorted(table, key=lambda row: (row.pipeline, row.stage, row.month)))
