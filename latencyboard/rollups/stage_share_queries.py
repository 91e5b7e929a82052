"""Reads of stage shares: where a pipeline's requests spend their time, typically and in the
tail, over a window (what the dashboard's flame-style breakdown draws)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import BigIntegerField
from django.db.models.functions import Cast, Extract

from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import windows
from latencyboard.rollups.models import StageShare
from latencyboard.rollups.queries import stored_rows
from latencyboard.storage import tables

StoredRows = dict[windows.Resolution, windows.StoredRows | None]


@dataclass(frozen=True, slots=True)
class StageFigures:
    """One stage's mean self time per request, over all requests and over the tail, and its
    share of the requests' total self time (all shares of a breakdown add up to 1)."""

    stage_id: int
    stage: str
    mean_self_ms_all: float
    mean_self_ms_tail: float
    share_all: float
    share_tail: float


@dataclass(frozen=True, slots=True)
class StageBreakdown:
    """Answer to :func:`stage_breakdown`; ``stages`` is empty when no request was counted."""

    start: dt.datetime  # the window read, widened to whole rows
    end: dt.datetime
    requests: int
    tail_requests: int
    mean_root_ms_all: float | None  # end-to-end mean of the same requests; None without any
    mean_root_ms_tail: float | None
    stages: tuple[StageFigures, ...]  # largest share of all requests first


def stored_share_rows(pipeline: Pipeline) -> StoredRows:
    """Oldest and newest stage-share row of each resolution (see ``queries.stored_rows``)."""
    return stored_rows(tables.STAGE_SHARE, pipeline.pk)


def stage_breakdown(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime, stored: StoredRows | None = None
) -> StageBreakdown:
    """Where ``pipeline``'s requests whose root started in ``[start, end)`` spent their time.

    Rows are read per :func:`windows.plan_window` at a one-minute step: minutes where they
    are kept, else hours or days (then the window widens to whole hours or days). The tail
    of a window is the union of its minutes' slowest 1% (see ``StageShare``).

    Shares divide each stage's self time by the total of all stages'. When no two spans of
    a request overlap that total is the end-to-end time, and a share is the stage's part of
    the mean request; concurrent spans each keep their own self time, and the shares then
    divide the work done rather than the wall-clock time, still adding up to 1.

    The caller has checked the user may see ``pipeline``; ``stored`` is
    :func:`stored_share_rows` when the caller read it already. Raises ValueError for a window
    that :func:`windows.check_window` rejects.
    """
    if stored is None:
        stored = stored_share_rows(pipeline)
    plan = windows.plan_window(start, end, 60, stored)
    first, *others = (
        StageShare.objects.filter(
            pipeline=pipeline,
            resolution=segment.resolution,
            bucket_start__gte=segment.start,
            bucket_start__lt=segment.end,
        )
        .annotate(epoch=Cast(Extract("bucket_start", "epoch"), BigIntegerField()))
        .values_list(
            "epoch",
            "stage_id",
            "stage__name",
            "requests",
            "tail_requests",
            "root_ms_sum",
            "tail_root_ms_sum",
            "self_ms_sum",
            "tail_self_ms_sum",
        )
        for segment in plan.segments
    )
    # Segments never overlap in time, so a bucket start names one bucket: its request
    # totals, repeated on each of its stages' rows, are counted once.
    totals: dict[int, tuple[int, int, float, float]] = {}
    sums: dict[tuple[int, str], tuple[float, float]] = {}
    for epoch, stage_id, name, requests, tail, root, tail_root, own, tail_own in first.union(
        *others, all=True
    ):
        totals[epoch] = (requests, tail, root, tail_root)
        all_sum, tail_sum = sums.get((stage_id, name), (0.0, 0.0))
        sums[(stage_id, name)] = (all_sum + own, tail_sum + tail_own)
    requests = sum(total[0] for total in totals.values())
    tail_requests = sum(total[1] for total in totals.values())
    if not requests:
        return StageBreakdown(plan.start, plan.end, 0, 0, None, None, ())
    self_all = sum(all_sum for all_sum, _ in sums.values())
    self_tail = sum(tail_sum for _, tail_sum in sums.values())
    figures = [
        StageFigures(
            stage_id=stage_id,
            stage=name,
            mean_self_ms_all=all_sum / requests,
            mean_self_ms_tail=tail_sum / tail_requests,
            share_all=all_sum / self_all if self_all else 0.0,
            share_tail=tail_sum / self_tail if self_tail else 0.0,
        )
        for (stage_id, name), (all_sum, tail_sum) in sums.items()
    ]
    figures.sort(key=lambda f: (-f.share_all, f.stage))
    return StageBreakdown(
        start=plan.start,
        end=plan.end,
        requests=requests,
        tail_requests=tail_requests,
        mean_root_ms_all=sum(total[2] for total in totals.values()) / requests,
        mean_root_ms_tail=sum(total[3] for total in totals.values()) / tail_requests,
        stages=tuple(figures),
    )
