"""Reads of bottleneck classes: stored stage shares classified by ``dashboards.bottleneck``.

Stage shares are summed per (pipeline, bucket, stage) in the database, for all the pipelines
asked at once (``rollups.stage_share_queries.bucket_shares``: four statements whatever their
number). A window's class comes from the sums over the whole window, its tail the requests
above the window's p99; its history, one class per bucket of ``step`` (each bucket's tail
above its own p99), says when the class last changed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from latencyboard import windows
from latencyboard.dashboards import bottleneck
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.rollups import stage_share_queries
from latencyboard.rollups.stage_share_queries import BucketShares


@dataclass(frozen=True, slots=True)
class PipelineBottleneck:
    """A pipeline's class over ``[start, end)`` (the window read) and its last change
    between buckets of ``step`` (None: no confirmed change, see ``bottleneck.last_change``)."""

    start: dt.datetime
    end: dt.datetime
    step: dt.timedelta
    classification: bottleneck.Classification
    change: bottleneck.Change | None


def classify(shares: BucketShares | None, names: dict[int, str]) -> bottleneck.Classification:
    """The class of one bucket's sums, stages named in ``BOTTLENECK_STAGE_KINDS`` as set
    there; the slowest 1% only where it holds enough requests to be shown."""
    if shares is None:
        return bottleneck.classify(0, [], settings.BOTTLENECK_STAGE_KINDS)
    own, tail = shares.self_ms, shares.tail_self_ms
    total, tail_total = sum(own.values()), sum(tail.values())
    shown = shares.cut.enough
    return bottleneck.classify(
        shares.cut.requests,
        [
            bottleneck.Share(
                names[stage_id],
                own[stage_id] / total if total else 0.0,
                (tail.get(stage_id, 0.0) / tail_total if tail_total else 0.0) if shown else None,
            )
            for stage_id in sorted(own, key=lambda stage_id: names[stage_id])
        ],
        settings.BOTTLENECK_STAGE_KINDS,
    )


def bottlenecks(
    pipelines: Sequence[Pipeline], start: dt.datetime, end: dt.datetime, step: dt.timedelta
) -> dict[int, PipelineBottleneck]:
    """The class of each pipeline (by id) over the requests whose root started in
    ``[start, end)``, and when it last changed between buckets of ``step``.

    Rows are read as the stage breakdown reads them (``windows.plan_window`` at a minute
    step): minutes where they are kept, so the window is never widened past the ``end``
    asked for, hours or days only where minutes have expired (the answer's ``start`` and
    ``end`` say what was read). The caller has checked the user may see the pipelines.
    """
    stored = stage_share_queries.stored_share_rows_of(pipelines)
    plans = {
        pipeline.pk: windows.plan_window(start, end, 60, stored[pipeline.pk])
        for pipeline in pipelines
    }
    segments = [
        segment
        for pipeline in pipelines
        for segment in stage_share_queries.segments_of(pipeline, plans[pipeline.pk])
    ]
    origin = min((plan.start for plan in plans.values()), default=start)
    whole = stage_share_queries.bucket_shares(segments, stage_share_queries.WHOLE_WINDOW, origin)
    history = stage_share_queries.bucket_shares(segments, step, windows.EPOCH)
    names = dict(Stage.objects.filter(pipeline__in=pipelines).values_list("pk", "name"))
    result = {}
    for pipeline in pipelines:
        classification = classify(whole.get((pipeline.pk, origin)), names)
        buckets = sorted(
            ((bucket, shares) for (pk, bucket), shares in history.items() if pk == pipeline.pk),
            key=lambda item: item[0],
        )
        classes = [(bucket, classify(shares, names)) for bucket, shares in buckets]
        plan = plans[pipeline.pk]
        result[pipeline.pk] = PipelineBottleneck(
            plan.start,
            plan.end,
            step,
            classification,
            bottleneck.last_change(classes, classification.bottleneck),
        )
    return result
