"""Exemplars of a quantile: the traces behind one point of a percentile chart, scoped to the
user's teams as the search is (:func:`latencyboard.traces.queries.scope`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Final

from django.contrib.auth.models import AnonymousUser, User

from latencyboard.storage import span_reads
from latencyboard.traces.queries import (
    NS_PER_MS,
    TraceSummary,
    scope,
    summary,
)
from latencyboard.windows import MAX_TRACE_SEARCH_WINDOW, MINUTE, floor_minute

EXEMPLAR_COUNT: Final = 5


@dataclass(frozen=True)
class Exemplars:
    """Answer to :func:`trace_exemplars`.

    ``quantile_ns`` is the exact quantile of the ``n`` durations of the minute: the order
    statistic of rank ``floor(quantile * (n - 1))`` (numpy's ``method="lower"``, the
    definition the percentile charts' sketches estimate); None when ``n`` is 0. ``traces``
    are the traces whose span is nearest to it, nearest first, one row per trace. The
    durations are those of the spans starting in ``[minute, minute + width)``: one minute,
    or a chart's wider bucket.
    """

    pipeline_id: int
    pipeline_name: str
    stage_id: int | None
    stage_name: str | None
    minute: dt.datetime
    quantile: float
    n: int
    quantile_ns: int | None
    traces: tuple[TraceSummary, ...]
    width: dt.timedelta = MINUTE

    @property
    def minute_end(self) -> dt.datetime:
        return self.minute + self.width

    @property
    def quantile_ms(self) -> float | None:
        return None if self.quantile_ns is None else self.quantile_ns / NS_PER_MS


def trace_exemplars(
    user: User | AnonymousUser,
    pipeline_id: int,
    stage_id: int | str | None,
    minute: dt.datetime,
    quantile: float,
    count: int = EXEMPLAR_COUNT,
    width: dt.timedelta = MINUTE,
) -> Exemplars:
    """The ``count`` traces of the minute starting at ``minute`` (floored to the minute), or of
    the ``width`` from it, whose span of ``stage_id`` (None: the root span, end to end) is
    nearest in duration to that period's exact ``quantile``; ties go to the lower trace id.

    Raises ``Pipeline.DoesNotExist``/``Stage.DoesNotExist`` outside the user's teams,
    :class:`~latencyboard.traces.queries.InvalidTraceQuery` for a stage of another pipeline,
    ValueError for a quantile outside [0, 1] or a width that is not whole minutes up to
    :data:`~latencyboard.windows.MAX_TRACE_SEARCH_WINDOW`.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    if not MINUTE <= width <= MAX_TRACE_SEARCH_WINDOW or width % MINUTE:
        raise ValueError(
            f"width must be whole minutes up to {MAX_TRACE_SEARCH_WINDOW}, got {width!r}"
        )
    pipelines, stage = scope(user, pipeline_id, stage_id)
    (pipeline,) = pipelines
    minute = floor_minute(minute)
    found = span_reads.nearest_to_quantile(
        pipeline.pk,
        pipeline.team_id,
        None if stage is None else stage.pk,
        minute,
        minute + width,
        quantile,
        count,
    )
    names = {pipeline.pk: str(pipeline)}
    return Exemplars(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        stage_id=None if stage is None else stage.pk,
        stage_name=None if stage is None else stage.name,
        minute=minute,
        quantile=quantile,
        n=found.n,
        quantile_ns=found.quantile_ns,
        traces=tuple(summary(row, names) for row in found.spans),
        width=width,
    )
