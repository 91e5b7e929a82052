"""The baseline job: each watched (pipeline, stage)'s latencies over a trailing window."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction

from latencyboard.alerts.models import Baseline, Rule
from latencyboard.detectors import seasonal
from latencyboard.detectors.regression import Baseline as DetectorBaseline
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.sketch_windows import stage_sketches, windows_stage_sketches
from latencyboard.sketches.sketch import Sketch
from latencyboard.windows import HOUR, floor_to

logger = logging.getLogger(__name__)

EMPTY = Sketch()


def compute_baselines(now: dt.datetime) -> int:
    """Recompute the baselines of every pipeline an enabled rule watches; returns how many
    were written."""
    pipelines = Pipeline.objects.filter(
        pk__in=Rule.objects.filter(enabled=True).values("pipeline")
    ).order_by("pk")
    return sum(compute_pipeline_baselines(pipeline, now) for pipeline in pipelines)


def compute_pipeline_baselines(pipeline: Pipeline, now: dt.datetime) -> int:
    """Merge ``pipeline``'s rollups per stage (end to end too) into its baselines: the same
    hours of the previous ``ALERT_BASELINE_DAYS`` days where they hold the values
    (:mod:`latencyboard.detectors.seasonal`), else the trailing ``ALERT_BASELINE_DAYS`` days of
    whole hours; ready when they hold ``ALERT_BASELINE_MIN_COUNT`` values. A stage without
    rows in the trailing window keeps no baseline."""
    end = floor_to(now, HOUR)
    start = end - dt.timedelta(days=settings.ALERT_BASELINE_DAYS)
    sketches = stage_sketches(pipeline, start, end)
    (seasonal_sketches,) = same_hours_sketches(pipeline, [now])
    with transaction.atomic():
        stale = Baseline.objects.filter(pipeline=pipeline).exclude(
            stage_id__in=[stage_id for stage_id in sketches if stage_id is not None]
        )
        if None in sketches:
            stale = stale.exclude(stage__isnull=True)
        stale.delete()
        for stage_id, trailing in sketches.items():
            same_hours = seasonal_sketches.get(stage_id)
            sketch = trailing if same_hours is None else same_hours
            Baseline.objects.update_or_create(
                pipeline=pipeline,
                stage_id=stage_id,  # type: ignore[misc]  # None: end to end, as stored
                defaults={
                    "window_start": start,
                    "window_end": end,
                    "n": sketch.count,
                    "sketch": sketch.to_bytes(),
                    "computed_at": now,
                    "ready": sketch.count >= settings.ALERT_BASELINE_MIN_COUNT,
                    "seasonal": same_hours is not None,
                },
            )
    logger.info("alerts.baselines", extra={"pipeline_id": pipeline.pk, "stages": len(sketches)})
    return len(sketches)


def same_hours_sketches(
    pipeline: Pipeline, runs: Sequence[dt.datetime]
) -> list[dict[int | None, Sketch]]:
    """For a baseline job running at each of ``runs``, the seasonal sketch of each stage
    (end to end: None) whose same hours of the previous ``ALERT_BASELINE_DAYS`` days hold
    enough values (:func:`latencyboard.alerts.seasonal.seasonal_sketch`); every run's days
    read in one statement."""
    days = settings.ALERT_BASELINE_DAYS
    merged = windows_stage_sketches(
        pipeline, [span for run in runs for span in seasonal.day_spans(run, days)]
    )
    found = []
    for index in range(len(runs)):
        same_hours = merged[index * days : (index + 1) * days]
        stages = {stage_id for day in same_hours for stage_id in day}
        sketches = {
            stage_id: seasonal.seasonal_sketch(
                [day.get(stage_id, EMPTY) for day in same_hours],
                settings.ALERT_BASELINE_MIN_COUNT,
            )
            for stage_id in stages
        }
        found.append({stage_id: s for stage_id, s in sketches.items() if s is not None})
    return found


def detector_baselines(pipeline: Pipeline) -> dict[int | None, DetectorBaseline]:
    """The stored baselines of ``pipeline`` as the regression detector takes them."""
    return {
        row.stage_id: DetectorBaseline(
            Sketch.from_bytes(bytes(row.sketch)), row.window_start, row.window_end, row.seasonal
        )
        for row in Baseline.objects.filter(pipeline=pipeline)
    }
