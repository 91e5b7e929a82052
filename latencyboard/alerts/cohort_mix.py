"""Is a firing stage's change a regression or a change of traffic mix? Its cohort sketches
(``model.version``, ``service.version`` and the pipeline's other cohort attributes) over the
baseline's window (its same hours of the previous days when it is seasonal) and the evaluated
window, split by :func:`latencyboard.detectors.mix.decompose`.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings

from latencyboard.detectors import seasonal
from latencyboard.detectors.mix import Label, MixDecomposition, decompose
from latencyboard.detectors.regression import Baseline, RegressionRule
from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.rollups.sketch_windows import (
    END_TO_END_KEY,
    cohort_series,
    window_segments,
    windows_segments,
)
from latencyboard.sketches.sketch import Sketch

logger = logging.getLogger(__name__)

NAMING = (Label.MIX_SHIFT, Label.MIX_SHIFT_AND_REGRESSION, Label.REGRESSION)


def assess_mix(
    pipeline: Pipeline,
    stage_id: int | None,
    baseline: Baseline,
    start: dt.datetime,
    end: dt.datetime,
    q: float,
    rule: RegressionRule,
) -> tuple[str, MixDecomposition] | None:
    """The split of ``stage_id``'s change at ``q`` (``None``: end to end) over the window
    ``[start, end)`` against ``baseline``, by the first cohort attribute that names a cohort
    (a mix shift, or a regression inside one cohort), else by the first with cohort rows on
    both sides; ``None`` when no attribute has any (mix not assessed)."""
    series = END_TO_END_KEY if stage_id is None else stage_id
    # The cohorts' baselines cover what the stage's does: its same hours of the previous
    # days (the job's spans, from its hour), else its trailing window.
    spans = (
        seasonal.day_spans(baseline.window_end, settings.ALERT_BASELINE_DAYS)
        if baseline.seasonal
        else [(baseline.window_start, baseline.window_end)]
    )
    before = [segment for segments in windows_segments(pipeline, spans) for segment in segments]
    now = window_segments(pipeline, start, end)
    found: list[tuple[str, MixDecomposition]] = []
    for attribute in cohort_attributes(pipeline):
        baselines = {
            value: Baseline(figures[series].sketch, baseline.window_start, baseline.window_end)
            for value, figures in cohort_series(pipeline.pk, attribute, None, before).items()
            if series in figures
        }
        windows: dict[str, Sketch] = {
            value: figures[series].sketch
            for value, figures in cohort_series(pipeline.pk, attribute, None, now).items()
            if series in figures
        }
        if not baselines or not windows:
            continue
        split = decompose(baselines, windows, q, rule, attribute)
        if split.cohort is not None and split.label in NAMING:
            return attribute, split
        found.append((attribute, split))
    logger.info(
        "alerts.mix_unnamed",
        extra={"pipeline_id": pipeline.pk, "stage_id": stage_id, "attributes": len(found)},
    )
    return found[0] if found else None
