"""Reads of stage shares: where a pipeline's requests spend their time, typically and in the
tail, over a window (what the dashboard's flame-style breakdown draws)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from latencyboard import windows
from latencyboard.db import psycopg_cursor, read_connection
from latencyboard.pipelines.models import Pipeline
from latencyboard.rollups import tails
from latencyboard.rollups.queries import stored_rows, stored_rows_of
from latencyboard.storage import stage_share_reads, tables

StoredRows = dict[windows.Resolution, windows.StoredRows | None]


@dataclass(frozen=True, slots=True)
class StageFigures:
    """One stage's mean self time per request, over all requests and over the tail, and its
    share of the requests' total self time (all shares of a breakdown add up to 1); the same
    of its time on the requests' critical paths (``rollups.critical_path``: those shares
    divide the end-to-end time). The tail figures are None where the window's tail is too
    small to give them (``tails``), the critical ones where the window has rows written
    before critical paths were."""

    stage_id: int
    stage: str
    mean_self_ms_all: float
    mean_self_ms_tail: float | None
    share_all: float
    share_tail: float | None
    mean_critical_ms_all: float | None = None
    mean_critical_ms_tail: float | None = None
    share_critical_all: float | None = None
    share_critical_tail: float | None = None


@dataclass(frozen=True, slots=True)
class StageBreakdown:
    """Answer to :func:`stage_breakdown`; ``stages`` is empty when no request was counted.

    ``tail_requests`` are the requests above the window's p99 (``p99_ms``); ``tail_shown``
    says whether they are enough (``tails.MIN_TAIL_REQUESTS``) for the tail figures."""

    start: dt.datetime  # the window read, widened to whole rows
    end: dt.datetime
    requests: int
    tail_requests: int
    p99_ms: float | None
    tail_shown: bool
    mean_root_ms_all: float | None  # end-to-end mean of the same requests; None without any
    mean_root_ms_tail: float | None
    stages: tuple[StageFigures, ...]  # largest share of all requests first
    critical_shown: bool = False  # every row read has critical-path sums


@dataclass(frozen=True, slots=True)
class BucketShares:
    """The stage sums of one step bucket of one pipeline: over all its requests and over its
    tail (``tail_self_ms`` is empty when the tail is too small to be shown)."""

    cut: tails.TailCut
    root_ms: float
    tail_root_ms: float
    self_ms: dict[int, float]
    tail_self_ms: dict[int, float]
    critical_ms: dict[int, float | None]  # None: a row of the stage has no critical sums
    tail_critical_ms: dict[int, float]

    @property
    def critical_complete(self) -> bool:
        """Whether every row summed has critical-path sums (rows written before they were
        have none, and a bucket's stages then do not add up to its requests' time)."""
        return None not in self.critical_ms.values()


WHOLE_WINDOW: Final = dt.timedelta(days=36500)
"""A step longer than any window: with the window's start as origin, one bucket for all."""


def bucket_shares(
    segments: Sequence[stage_share_reads.WindowSegment],
    stride: dt.timedelta,
    origin: dt.datetime,
) -> dict[tuple[int, dt.datetime], BucketShares]:
    """The stage sums of each (pipeline, step bucket) of ``segments``' rows, the step buckets
    being ``date_bin(stride, bucket_start, origin)``, each bucket's tail the requests above
    its own p99 (``tails.tail_cut``). The one home of "the slowest 1% of a window": the
    breakdown, its history and the bottleneck class all read it. Two statements, whatever
    the number of pipelines or buckets."""
    cursor = psycopg_cursor(server_side_binding=False, db=read_connection)
    found: dict[tuple[int, dt.datetime], list[tuple[int, int, float]]] = defaultdict(list)
    for pipeline_id, bucket, key, requests, root_ms in stage_share_reads.root_distribution(
        cursor, segments, stride, origin
    ):
        found[(pipeline_id, bucket)].append((key, requests, root_ms))
    result = {}
    for where, rows in found.items():
        keys = np.array([row[0] for row in rows], dtype=np.int64)
        counts = np.array([row[1] for row in rows], dtype=np.int64)
        root = np.array([row[2] for row in rows], dtype=np.float64)
        cut = tails.tail_cut(keys, counts)
        above = keys > (cut.key if cut.key is not None else keys.max())
        result[where] = BucketShares(
            cut, float(root.sum()), float(root[above].sum()), {}, {}, {}, {}
        )
    cuts = [
        (pipeline_id, bucket, shares.cut.key)
        for (pipeline_id, bucket), shares in result.items()
        if shares.cut.enough and shares.cut.key is not None
    ]
    for (
        pipeline_id,
        bucket,
        stage_id,
        own,
        tail_own,
        critical,
        tail_critical,
    ) in stage_share_reads.stage_sums(cursor, segments, stride, origin, cuts):
        shares = result[(pipeline_id, bucket)]
        shares.self_ms[stage_id] = own
        shares.critical_ms[stage_id] = critical
        if tail_own is not None:
            shares.tail_self_ms[stage_id] = tail_own
        if tail_critical is not None:
            shares.tail_critical_ms[stage_id] = tail_critical
    return result


def stored_share_rows(pipeline: Pipeline) -> StoredRows:
    """Oldest and newest stage-share row of each resolution (see ``queries.stored_rows``)."""
    return stored_rows(tables.STAGE_SHARE, pipeline.pk)


def stored_share_rows_of(pipelines: Sequence[Pipeline]) -> dict[int, StoredRows]:
    """:func:`stored_share_rows` of several pipelines (by id) in one query."""
    return stored_rows_of(tables.STAGE_SHARE, [pipeline.pk for pipeline in pipelines])


def segments_of(
    pipeline: Pipeline, plan: windows.WindowPlan
) -> list[stage_share_reads.WindowSegment]:
    return [
        stage_share_reads.WindowSegment(pipeline.pk, part.resolution, part.start, part.end)
        for part in plan.segments
    ]


def stage_breakdown(
    pipeline: Pipeline, start: dt.datetime, end: dt.datetime, stored: StoredRows | None = None
) -> StageBreakdown:
    """Where ``pipeline``'s requests whose root started in ``[start, end)`` spent their time.

    Rows are read per :func:`windows.plan_window` at a one-minute step: minutes where they
    are kept, else hours or days (then the window widens to whole hours or days). The tail
    of the window is its requests above the window's p99 (``rollups.tails``), shown only
    when they are at least ``tails.MIN_TAIL_REQUESTS``.

    Shares divide each stage's self time by the total of all stages'. When no two spans of
    a request overlap that total is the end-to-end time, and a share is the stage's part of
    the mean request; concurrent spans each keep their own self time, and the shares then
    divide the work done rather than the wall-clock time, still adding up to 1. The
    critical-path figures divide the wall-clock time instead: of parallel spans only the
    one the request waited for counts (``critical_shown`` is False, and they are None, when
    the window has rows written before critical paths were).

    The caller has checked the user may see ``pipeline``; ``stored`` is
    :func:`stored_share_rows` when the caller read it already. Raises ValueError for a window
    that :func:`windows.check_window` rejects.
    """
    if stored is None:
        stored = stored_share_rows(pipeline)
    plan = windows.plan_window(start, end, 60, stored)
    found = bucket_shares(segments_of(pipeline, plan), WHOLE_WINDOW, plan.start).get(
        (pipeline.pk, plan.start)
    )
    if found is None or not found.cut.requests:
        return StageBreakdown(plan.start, plan.end, 0, 0, None, False, None, None, ())
    cut = found.cut
    names = dict(pipeline.stages.values_list("pk", "name"))
    self_all = sum(found.self_ms.values())
    self_tail = sum(found.tail_self_ms.values())
    shown = cut.enough
    critical = found.critical_complete
    critical_all = sum(v or 0.0 for v in found.critical_ms.values())
    critical_tail = sum(found.tail_critical_ms.values())
    figures = [
        StageFigures(
            stage_id=stage_id,
            stage=names[stage_id],
            mean_self_ms_all=own / cut.requests,
            mean_self_ms_tail=found.tail_self_ms[stage_id] / cut.tail_requests if shown else None,
            share_all=own / self_all if self_all else 0.0,
            share_tail=(found.tail_self_ms[stage_id] / self_tail if self_tail else 0.0)
            if shown
            else None,
            **(_critical_figures(found, stage_id, critical_all, critical_tail) if critical else {}),
        )
        for stage_id, own in found.self_ms.items()
    ]
    figures.sort(key=lambda f: (-f.share_all, f.stage))
    return StageBreakdown(
        start=plan.start,
        end=plan.end,
        requests=cut.requests,
        tail_requests=cut.tail_requests,
        p99_ms=cut.p99_ms,
        tail_shown=shown,
        mean_root_ms_all=found.root_ms / cut.requests,
        mean_root_ms_tail=found.tail_root_ms / cut.tail_requests if shown else None,
        stages=tuple(figures),
        critical_shown=critical,
    )


def _critical_figures(
    found: BucketShares, stage_id: int, critical_all: float, critical_tail: float
) -> dict[str, float | None]:
    """A stage's critical-path figures of :class:`StageFigures` (the bucket is complete)."""
    cut, own = found.cut, found.critical_ms[stage_id] or 0.0
    tail = found.tail_critical_ms.get(stage_id) if cut.enough else None
    return {
        "mean_critical_ms_all": own / cut.requests,
        "share_critical_all": own / critical_all if critical_all else 0.0,
        "mean_critical_ms_tail": None if tail is None else tail / cut.tail_requests,
        "share_critical_tail": None
        if tail is None
        else (tail / critical_tail if critical_tail else 0.0),
    }
