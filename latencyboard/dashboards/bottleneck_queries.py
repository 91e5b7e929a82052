"""Reads of bottleneck classes: stored stage shares classified by ``dashboards.bottleneck``.

Stage shares are summed per (pipeline, history bucket, stage) in the database, for all the
pipelines asked at once: one statement whatever their number. A window's class comes from the
sums over all its buckets; its history, one class per bucket, says when the class last changed.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from django.conf import settings
from django.db.models import DateTimeField, F, Func, Sum, Value

from latencyboard.dashboards import bottleneck
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups.models import Resolution, StageShare
from latencyboard.rollups.windows import floor_to

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_HOUR: Final = dt.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class PipelineBottleneck:
    """A pipeline's class over ``[start, end)`` and its last change between buckets of
    ``step`` (None: the same class in every bucket with enough data)."""

    start: dt.datetime
    end: dt.datetime
    step: dt.timedelta
    classification: bottleneck.Classification
    change: bottleneck.Change | None


@dataclass
class _Sums:
    requests: int = 0
    self_ms: dict[str, float] = field(default_factory=dict)
    tail_self_ms: dict[str, float] = field(default_factory=dict)

    def add(self, stage: str, requests: int, own: float, tail_own: float) -> None:
        """Add one stage's sums over one bucket."""
        # Every stage row of a bucket repeats its request counts; the root's stage is in
        # every request, so the largest count over the stages is the bucket's.
        self.requests = max(self.requests, requests)
        self.self_ms[stage] = self.self_ms.get(stage, 0.0) + own
        self.tail_self_ms[stage] = self.tail_self_ms.get(stage, 0.0) + tail_own

    def merge(self, other: _Sums) -> None:
        """Add another bucket's sums."""
        self.requests += other.requests
        for stage, own in other.self_ms.items():
            self.self_ms[stage] = self.self_ms.get(stage, 0.0) + own
            self.tail_self_ms[stage] = self.tail_self_ms.get(stage, 0.0) + other.tail_self_ms[stage]

    def classify(self) -> bottleneck.Classification:
        """The class of these sums, stages named in ``BOTTLENECK_STAGE_KINDS`` as set there."""
        own, tail = self.self_ms, self.tail_self_ms
        total, tail_total = sum(own.values()), sum(tail.values())
        return bottleneck.classify(
            self.requests,
            [
                bottleneck.Share(
                    stage,
                    own[stage] / total if total else 0.0,
                    tail[stage] / tail_total if tail_total else 0.0,
                )
                for stage in sorted(own)
            ],
            settings.BOTTLENECK_STAGE_KINDS,
        )


def bottlenecks(
    pipelines: Sequence[Pipeline], start: dt.datetime, end: dt.datetime, step: dt.timedelta
) -> dict[int, PipelineBottleneck]:
    """The class of each pipeline (by id) over the requests whose root started in
    ``[start, end)``, and when it last changed between buckets of ``step``.

    Steps under an hour read minute rows, longer ones hour rows (an hour row holds its
    minutes as soon as they are written); ``start`` is rounded down to the row length. The
    caller has checked the user may see the pipelines.
    """
    resolution = Resolution.MINUTE if step < _HOUR else Resolution.HOUR
    start = floor_to(start, dt.timedelta(minutes=1) if step < _HOUR else _HOUR)
    rows = (
        StageShare.objects.filter(
            pipeline__in=pipelines,
            resolution=resolution,
            bucket_start__gte=start,
            bucket_start__lt=end,
        )
        .annotate(
            bucket=Func(
                Value(step),
                F("bucket_start"),
                Value(_EPOCH),
                function="date_bin",
                output_field=DateTimeField(),
            )
        )
        .values("pipeline_id", "bucket", "stage__name")
        .annotate(
            requests_sum=Sum("requests"),
            own=Sum("self_ms_sum"),
            tail_own=Sum("tail_self_ms_sum"),
        )
        .values_list("pipeline_id", "bucket", "stage__name", "requests_sum", "own", "tail_own")
    )
    buckets: dict[int, dict[dt.datetime, _Sums]] = defaultdict(lambda: defaultdict(_Sums))
    for pipeline_id, bucket, stage, requests, own, tail_own in rows:
        buckets[pipeline_id][bucket].add(stage, int(requests), own, tail_own)
    result = {}
    for pipeline in pipelines:
        history = [
            (bucket, sums.classify()) for bucket, sums in sorted(buckets[pipeline.pk].items())
        ]
        whole = _Sums()
        for sums in buckets[pipeline.pk].values():
            whole.merge(sums)
        result[pipeline.pk] = PipelineBottleneck(
            start, end, step, whole.classify(), bottleneck.last_change(history)
        )
    return result
