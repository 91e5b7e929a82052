"""Folding spans into per-bucket latency rollups (pure: numpy and the sketch module, no Django).

The rollup worker reads the spans of a few ingest batches
(:mod:`latencyboard.storage.fold_spans`), takes them as columns
(:func:`latencyboard.spans.columns.span_columns`) and groups
them into one sketch per (pipeline, stage, minute) plus one per (pipeline, minute) of root
spans, the pipeline's end-to-end latency (:func:`fold_minutes`).
Coarser rows are merges of finer ones (:func:`combine`), so an hour holds exactly the buckets
of its minutes.

Folds come out sorted by (pipeline, stage with end to end first, bucket): the order in which
the worker inserts and locks rows, so that concurrent workers never wait on each other in a
cycle.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from latencyboard.sketches.sketch import Sketch, merge_many, sketches_by_group
from latencyboard.spans.columns import SpanColumns


@dataclass(frozen=True, slots=True)
class Fold:
    """Latency of one stage of one pipeline over one bucket; ``stage_id`` None is end to end.

    Count, sum, min and max are the sketch's own (exact, sum up to float rounding).
    """

    pipeline_id: int
    stage_id: int | None
    bucket: int  # start of the bucket, Unix seconds
    error_count: int
    sketch: Sketch


def fold_minutes(spans: SpanColumns) -> list[Fold]:
    """One fold per (pipeline, stage, minute), plus one per (pipeline, minute) of root spans.

    A root span counts twice, once for its stage and once end to end, as each is a latency the
    dashboard shows. Sorted by (pipeline, stage with end to end first, bucket).
    """
    root = spans.is_root
    # Stage 0 stands for end to end while grouping: database ids start at 1.
    pipeline = np.concatenate([spans.pipeline_id, spans.pipeline_id[root]])
    stage = np.concatenate([spans.stage_id, np.zeros(np.count_nonzero(root), dtype=np.int64)])
    minute = np.concatenate([spans.minute, spans.minute[root]])
    duration = np.concatenate([spans.duration_ms, spans.duration_ms[root]])
    error = np.concatenate([spans.is_error, spans.is_error[root]])
    if not len(pipeline):
        return []

    order = np.lexsort((minute, stage, pipeline))
    pipeline, stage, minute = pipeline[order], stage[order], minute[order]
    starts = np.empty(len(order), dtype=np.bool_)
    starts[0] = True
    starts[1:] = (
        (pipeline[1:] != pipeline[:-1]) | (stage[1:] != stage[:-1]) | (minute[1:] != minute[:-1])
    )
    group = np.cumsum(starts) - 1
    sketches = sketches_by_group(group, duration[order])
    errors = np.bincount(group, weights=error[order]).astype(np.int64)
    return [
        Fold(p, s or None, m * 60, e, sketches[g])
        for g, (p, s, m, e) in enumerate(
            zip(
                pipeline[starts].tolist(),
                stage[starts].tolist(),
                minute[starts].tolist(),
                errors.tolist(),
                strict=True,
            )
        )
    ]


def combine(rows: Iterable[tuple[int, int | None, int, int, Sketch | bytes]]) -> list[Fold]:
    """Merge rows ``(pipeline_id, stage_id, bucket, error_count, sketch or its bytes)`` that
    share (pipeline, stage, bucket) into one fold each.

    ``rows`` must come sorted by (pipeline, stage, bucket), which also fixes the order the
    sketches are merged in: merging the same rows again gives byte-identical sketches.
    """
    folds = []
    for (pipeline_id, stage_id, bucket), group in itertools.groupby(rows, key=lambda r: r[:3]):
        members = list(group)
        folds.append(
            Fold(
                pipeline_id,
                stage_id,
                bucket,
                sum(member[3] for member in members),
                merge_many(member[4] for member in members),
            )
        )
    return folds
