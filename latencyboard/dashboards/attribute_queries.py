"""Reads of latency by attribute value, for the pipeline page's breakdown by
``model.version``, ``cache_hit``, …: from the cohort rollups, over the whole chosen window.

Only cohort attributes have sketches per value (``model.version``, ``service.version`` and
those an admin adds to the pipeline); for another attribute the breakdown says so. The
caller has checked the user may see the pipeline (``queries.pipeline_of``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from latencyboard.pipelines.models import Pipeline, cohort_attributes
from latencyboard.rollups import sketch_windows
from latencyboard.rollups.sketch_windows import END_TO_END_KEY
from latencyboard.storage import span_reads
from latencyboard.windows import floor_minute

MAX_VALUES: Final = 12
"""Values of an attribute shown, the most frequent first."""
KEY_SAMPLE: Final = 2000
"""Newest spans whose attribute keys are offered to add as cohort attributes."""
KEY_WINDOW: Final = dt.timedelta(hours=24)
_HIDDEN_KEYS: Final = frozenset({"inference.stage"})  # the stage itself


@dataclass(frozen=True, slots=True)
class AttributeGroup:
    """Latency of the spans of one stage (None: the root spans, end to end) carrying one
    value of the attribute: exact count and error rate, quantiles from the sketch (the order
    statistic of rank ``floor(q * (n - 1))`` within 1%)."""

    stage_id: int | None
    value: str
    n: int
    error_rate: float
    quantiles_ms: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class AttributeBreakdown:
    """Latency by value of ``key`` over ``[start, end)`` (whole minutes). ``cohort`` says
    whether ``key`` has sketches per value; without, ``groups`` is empty. ``values`` are
    the most frequent values by end-to-end spans (else by spans), at most
    :data:`MAX_VALUES`; ``groups`` holds those only. ``spans`` counts every span of every
    value and stage in the window."""

    key: str
    cohort: bool
    start: dt.datetime
    end: dt.datetime
    spans: int
    quantiles: tuple[float, ...]
    values: tuple[str, ...]
    groups: tuple[AttributeGroup, ...]


def attribute_breakdown(
    pipeline: Pipeline,
    key: str,
    start: dt.datetime,
    end: dt.datetime,
    quantiles: Sequence[float],
) -> AttributeBreakdown:
    """Percentiles of each stage's spans per value of the cohort attribute ``key`` over the
    window, merged from the cohort rollups (every span counts, whatever the window)."""
    start, end = floor_minute(start), floor_minute(end)
    levels = tuple(sorted(set(quantiles)))
    if key not in cohort_attributes(pipeline):
        return AttributeBreakdown(key, False, start, end, 0, levels, (), ())
    segments = sketch_windows.window_segments(pipeline, start, end)
    by_value = sketch_windows.cohort_series(pipeline.pk, key, None, segments)

    def weight(value: str) -> tuple[int, int]:
        series = by_value[value]
        end_to_end = series.get(END_TO_END_KEY)
        total = sum(f.sketch.count for f in series.values())
        return (end_to_end.sketch.count if end_to_end else 0, total)

    values = tuple(sorted(by_value, key=lambda v: (*(-w for w in weight(v)), v))[:MAX_VALUES])
    groups = [
        AttributeGroup(
            None if series == END_TO_END_KEY else series,
            value,
            figures.sketch.count,
            figures.errors / figures.sketch.count,
            tuple(np.asarray(figures.sketch.quantiles(levels)).tolist()),
        )
        for value in values
        for series, figures in by_value[value].items()
        if figures.sketch.count
    ]
    groups.sort(key=lambda g: (g.stage_id is not None, g.stage_id or 0, values.index(g.value)))
    spans = sum(
        figures.sketch.count
        for series in by_value.values()
        for key_, figures in series.items()
        if key_ != END_TO_END_KEY
    )
    return AttributeBreakdown(key, True, start, end, spans, levels, values, tuple(groups))


def attribute_keys(pipeline: Pipeline, end: dt.datetime) -> tuple[str, ...]:
    """The attribute keys of the pipeline's newest :data:`KEY_SAMPLE` spans in the day
    before ``end``, sorted: attributes an admin could add as cohorts."""
    keys = span_reads.attribute_keys(pipeline.pk, end - KEY_WINDOW, end, KEY_SAMPLE)
    return tuple(sorted(key for key in keys if key not in _HIDDEN_KEYS))
