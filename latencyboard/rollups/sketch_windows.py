"""The sketches of a window: the per-minute, hour and day rollup sketches of any window of
whole minutes merged into one sketch per series (end to end or a stage) of a pipeline, or per
value of a cohort attribute. Compare, the attribute breakdown, baselines, the evaluator, the
rule preview and the reports all read windows through here.

Every span the rollups hold for the window counts once: the rows read tile the window
(:func:`~latencyboard.windows.cover_window`). Callers scope the pipeline to the user's teams
first.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from latencyboard.db import read_connection as connection  # the replica for dashboards
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.queries import stored_rows
from latencyboard.sketches.sketch import Sketch, merge_many
from latencyboard.storage import cohort_reads, tables
from latencyboard.windows import Segment, cover_window

END_TO_END_KEY = cohort_reads.END_TO_END_KEY
"""The series key of end-to-end latency; other keys are stage ids."""

SeriesSketches = dict[int, Sketch]


def window_segments(pipeline: Pipeline, start: dt.datetime, end: dt.datetime) -> list[Segment]:
    """The rollup rows that tile ``[start, end)``; cohort rows are compacted with the rollups,
    so the same segments serve both."""
    return windows_segments(pipeline, [(start, end)])[0]


def windows_segments(
    pipeline: Pipeline, windows: Sequence[tuple[dt.datetime, dt.datetime]]
) -> list[list[Segment]]:
    """:func:`window_segments` of each window, from one look at the rows stored."""
    stored = stored_rows(tables.ROLLUP, pipeline.pk)
    return [cover_window(start, end, stored) for start, end in windows]


def series_sketches(pipeline_id: int, segments: Sequence[Segment]) -> SeriesSketches:
    """One sketch per series of the pipeline over the segments."""
    return windows_sketches(pipeline_id, [segments])[0]


def windows_sketches(
    pipeline_id: int, windows: Sequence[Sequence[Segment]]
) -> list[SeriesSketches]:
    """:func:`series_sketches` of each window (its segments), read in one statement: a
    compare's two sides cost one round trip."""
    parts = [(side, part) for side, segments in enumerate(windows) for part in segments]
    if not parts:
        return [{} for _ in windows]
    blobs: list[dict[int, list[bytes]]] = [defaultdict(list) for _ in windows]
    for side, series, blob in _fetch(*cohort_reads.rollup_sketches(pipeline_id, parts)):
        blobs[side][series].append(blob)
    return [{series: merge_many(group) for series, group in side.items()} for side in blobs]


def stage_sketches(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime
) -> dict[int | None, Sketch]:
    """:func:`series_sketches` of ``[start, end)`` keyed as the alert baselines store stages:
    by stage id, end to end by None."""
    return windows_stage_sketches(pipeline, [(start, end)])[0]


def windows_stage_sketches(
    pipeline: Pipeline, windows: Sequence[tuple[dt.datetime, dt.datetime]]
) -> list[dict[int | None, Sketch]]:
    """:func:`stage_sketches` of each window, read in one statement."""
    found = windows_sketches(pipeline.pk, windows_segments(pipeline, windows))
    return [
        {None if key == END_TO_END_KEY else key: sketch for key, sketch in side.items()}
        for side in found
    ]


@dataclass(frozen=True, slots=True)
class SeriesFigures:
    """A series merged over a window: its sketch and its exact error count."""

    sketch: Sketch
    errors: int


def cohort_series(
    pipeline_id: int, attribute: str, values: Sequence[str] | None, segments: Sequence[Segment]
) -> dict[str, dict[int, SeriesFigures]]:
    """One merged sketch and error count per value and series of a cohort attribute over
    the segments (only ``values`` unless None)."""
    if not segments:
        return {}
    rows = _fetch(*cohort_reads.cohort_sketches(pipeline_id, attribute, values, segments))
    blobs: dict[tuple[str, int], list[bytes]] = defaultdict(list)
    errors: dict[tuple[str, int], int] = defaultdict(int)
    for value, series, error_count, blob in rows:
        blobs[(value, series)].append(blob)
        errors[(value, series)] += error_count
    found: dict[str, dict[int, SeriesFigures]] = defaultdict(dict)
    for (value, series), group in blobs.items():
        found[value][series] = SeriesFigures(merge_many(group), errors[(value, series)])
    return dict(found)


def _fetch(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
