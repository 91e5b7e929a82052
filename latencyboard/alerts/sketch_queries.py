"""Reads of merged rollup sketches per stage over a window, for baselines and evaluations."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import windows
from latencyboard.rollups.models import Rollup
from latencyboard.rollups.queries import stored_rows
from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.storage import tables


def stage_sketches(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime, step: dt.timedelta
) -> dict[int | None, Sketch]:
    """Each stage's latencies over ``[start, end)`` (key ``None``: end to end), merged from
    the rollup rows the percentile pages would read for a ``step`` grid (coarse rows where
    they exist, finer ones for the newest part): so a baseline counts every span once."""
    plan = windows.plan_window(
        start, end, int(step.total_seconds()), stored_rows(tables.ROLLUP, pipeline.pk)
    )
    blobs: dict[int | None, list[bytes]] = defaultdict(list)
    for segment in plan.segments:
        rows = Rollup.objects.filter(
            pipeline=pipeline,
            resolution=segment.resolution,
            bucket_start__gte=segment.start,
            bucket_start__lt=segment.end,
        ).values_list("stage_id", "sketch")
        for stage_id, sketch in rows.iterator():
            blobs[stage_id].append(bytes(sketch))
    return {stage_id: merge_many(parts) for stage_id, parts in blobs.items()}
