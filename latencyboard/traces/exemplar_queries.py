"""Exemplars of a quantile: the traces behind one point of a percentile chart, scoped to the
user's teams as the search is (:func:`latencyboard.traces.queries.scope`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection

from latencyboard.traces.queries import (
    MAX_WINDOW,
    MINUTE,
    NS_PER_MS,
    TraceSummary,
    scope,
    summary,
)

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
    stage_id: int | None,
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
    :data:`~latencyboard.traces.queries.MAX_WINDOW`.
    """
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must lie in [0, 1], got {quantile!r}")
    if not MINUTE <= width <= MAX_WINDOW or width % MINUTE:
        raise ValueError(f"width must be whole minutes up to {MAX_WINDOW}, got {width!r}")
    pipelines, stage = scope(user, pipeline_id, stage_id)
    (pipeline,) = pipelines
    minute = minute.astimezone(dt.UTC).replace(second=0, microsecond=0)
    which = "is_root" if stage is None else "stage_id = %(stage)s"
    sql = f"""
        WITH minute AS MATERIALIZED (
            SELECT trace_id, span_id, name, start_time, duration_ns, status_code, status_message
            FROM spans_span
            WHERE pipeline_id = %(pipeline)s AND team_id = %(team)s
              AND start_time >= %(start)s AND start_time < %(end)s AND {which}
        ),
        target AS (
            SELECT duration_ns FROM minute ORDER BY duration_ns
            OFFSET (SELECT greatest(floor(%(q)s::float8 * (count(*) - 1)), 0)::bigint FROM minute)
            LIMIT 1
        ),
        nearest AS (
            SELECT DISTINCT ON (m.trace_id) m.*, abs(m.duration_ns - t.duration_ns) AS distance
            FROM minute m CROSS JOIN target t
            ORDER BY m.trace_id, distance, m.span_id
        )
        SELECT n.trace_id, n.span_id, %(pipeline)s, n.name, n.start_time, n.duration_ns,
               n.status_code, n.status_message, NULL, t.duration_ns,
               (SELECT count(*) FROM minute)
        FROM nearest n CROSS JOIN target t
        ORDER BY n.distance, n.trace_id
        LIMIT %(count)s
    """  # noqa: S608 - a constant condition, values are parameters
    params: dict[str, Any] = {
        "pipeline": pipeline.pk,
        "team": pipeline.team_id,
        "start": minute,
        "end": minute + width,
        "stage": None if stage is None else stage.pk,
        "q": quantile,
        "count": count,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    names = {pipeline.pk: str(pipeline)}
    return Exemplars(
        pipeline_id=pipeline.pk,
        pipeline_name=str(pipeline),
        stage_id=None if stage is None else stage.pk,
        stage_name=None if stage is None else stage.name,
        minute=minute,
        quantile=quantile,
        n=int(rows[0][10]) if rows else 0,
        quantile_ns=int(rows[0][9]) if rows else None,
        traces=tuple(summary(row[:9], names) for row in rows),
        width=width,
    )
