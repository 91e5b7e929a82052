"""Reads of raw spans: trace search, the exemplars of a quantile, and one trace's spans.

Search and exemplars read through the roots' and the stages' ``(…, start_time)`` indexes, so
their cost grows with the spans stored in the window; one trace is read through the primary
key ``(team_id, trace_id, …)``, one index probe per day partition. Names and attributes are
read through the span's template (:mod:`.span_templates`), joined only where needed.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from latencyboard.db import read_connection as connection  # the replica for dashboards
from latencyboard.storage import tables
from latencyboard.storage.span_templates import attributes_sql, joins_sql, name_sql

STATUS_ERROR: Final = 2
FoundRow = tuple[Any, ...]
"""A span found: ``(trace_id, span_id, pipeline_id, name, start_time, duration_ns,
status_code, status_message, stage_duration_ns)``."""


@dataclass(frozen=True)
class SpanSearch:
    """What :func:`search` looks for. Without ``stage_id`` the duration bounds (in ns,
    inclusive) apply to the root span; with it, the trace must have a span of that stage
    (of one of ``pipeline_ids``) within them. ``attributes`` are alternatives per filter: the
    root span's attributes must contain one JSON document of each."""

    pipeline_ids: Sequence[int]
    team_ids: Sequence[int]
    start: dt.datetime
    end: dt.datetime
    late_end: dt.datetime  # how far after ``end`` a stage's spans of a found root may start
    stage_id: int | None
    min_ns: int | None
    max_ns: int | None
    status: Literal["error", "ok"] | None
    attributes: Sequence[Sequence[str]]
    limit: int


def search(query: SpanSearch) -> list[FoundRow]:
    """The slowest root spans matching ``query``, slowest first (ties: earlier start, then
    lower trace id), at most ``query.limit``."""
    params: dict[str, Any] = {
        "pipelines": list(query.pipeline_ids),
        "teams": list(query.team_ids),
        "start": query.start,
        "end": query.end,
        "stage": query.stage_id,
        "limit": query.limit,
        "late_end": query.late_end,
        "min_ns": query.min_ns,
        "max_ns": query.max_ns,
    }
    with connection.cursor() as cursor:
        cursor.execute(_search_sql(query, params), params)
        return cursor.fetchall()


def _search_sql(query: SpanSearch, params: dict[str, Any]) -> str:
    """The search statement; every value in it is a parameter, added to ``params``.

    Without a stage: one range scan of the root spans' partial index over the window. With
    a stage, the roots of the window are joined by trace id to the stage's spans, read from
    the ``(pipeline_id, start_time)`` index alone (it carries stage, trace id and duration):
    from the window's start to the last matching root's end (capped at ``late_end``, so that
    the planner prunes the day partitions beyond), so that spans of requests still running
    at the window's end count too.
    """
    window = (
        "r.pipeline_id = ANY(%(pipelines)s) AND r.team_id = ANY(%(teams)s) "
        "AND r.start_time >= %(start)s AND r.start_time < %(end)s"
    )
    root = ["r.is_root"]
    if query.status is not None:
        root.append(f"r.status_code {'=' if query.status == 'error' else '<>'} {STATUS_ERROR}")
    for number, documents in enumerate(query.attributes):
        alternatives = []
        for k, document in enumerate(documents):
            params[f"attr{number}_{k}"] = document
            alternatives.append(f"{attributes_sql('r', 'ta', 'ra')} @> %(attr{number}_{k})s::jsonb")
        root.append(f"({' OR '.join(alternatives)})")
    durations = []
    if query.min_ns is not None:
        durations.append("duration_ns >= %(min_ns)s")
    if query.max_ns is not None:
        durations.append("duration_ns <= %(max_ns)s")
    columns = (
        f"r.trace_id, r.span_id, r.pipeline_id, {name_sql('r', 'rt')}, r.start_time, "
        "r.duration_ns, r.status_code, r.status_message"
    )
    name_join = f"LEFT JOIN {tables.SPAN_TEMPLATE} rt ON rt.id = r.template_id"
    attribute_joins = joins_sql("r", "ta", "ra") if query.attributes else ""
    order = "ORDER BY r.duration_ns DESC, r.start_time, r.trace_id, r.span_id LIMIT %(limit)s"
    if query.stage_id is None:
        where = " AND ".join([window, *root, *(f"r.{bound}" for bound in durations)])
        # The names of the roots found only: a window's roots are not joined to templates
        # unless attributes are filtered on.
        return f"""
            WITH found AS (
                SELECT r.* FROM {tables.SPAN} r {attribute_joins} WHERE {where} {order}
            )
            SELECT {columns}, NULL FROM found r {name_join}
            ORDER BY r.duration_ns DESC, r.start_time, r.trace_id, r.span_id
        """  # noqa: S608 - constant fragments, values are parameters
    # No team condition on the stage's spans, so that the index answers alone: a stage is
    # one pipeline's, which the caller found in the user's teams, and so are its spans.
    of_stage = " AND ".join(
        [
            "s.pipeline_id = ANY(%(pipelines)s) AND s.stage_id = %(stage)s",
            *(f"s.{bound}" for bound in durations),
        ]
    )
    # The roots keep no text columns, so that a day of them stays small; the names and
    # statuses of the few traces returned are read back by primary key.
    return f"""
        WITH roots AS MATERIALIZED (
            SELECT r.team_id, r.trace_id, r.span_id, r.start_time, r.duration_ns
            FROM {tables.SPAN} r {attribute_joins}
            WHERE {window} AND {" AND ".join(root)}
        ),
        stage_spans AS (
            SELECT s.trace_id, s.duration_ns
            FROM {tables.SPAN} s
            WHERE {of_stage} AND s.start_time >= %(start)s AND s.start_time < %(end)s
            UNION ALL
            SELECT s.trace_id, s.duration_ns
            FROM {tables.SPAN} s
            WHERE {of_stage} AND s.start_time >= %(end)s AND s.start_time < %(late_end)s
              AND s.start_time <= (
                  SELECT max(start_time + duration_ns / 1000 * interval '1 microsecond')
                  FROM roots
              )
        ),
        matched AS (
            SELECT trace_id, max(duration_ns) AS duration_ns FROM stage_spans GROUP BY trace_id
        ),
        slowest AS (
            SELECT r.*, m.duration_ns AS stage_ns
            FROM roots r JOIN matched m USING (trace_id)
            {order}
        )
        SELECT {columns}, t.stage_ns
        FROM slowest t
        JOIN {tables.SPAN} r USING (team_id, trace_id, span_id, start_time)
        {name_join}
        WHERE {window}
        ORDER BY t.duration_ns DESC, t.start_time, t.trace_id, t.span_id
    """  # noqa: S608 - constant fragments, values are parameters


_EXEMPLARS_SQL: Final = f"""
    WITH minute AS MATERIALIZED (
        SELECT trace_id, span_id, template_id, name, start_time, duration_ns, status_code,
               status_message
        FROM {tables.SPAN}
        WHERE pipeline_id = %(pipeline)s AND team_id = %(team)s
          AND start_time >= %(start)s AND start_time < %(end)s AND {{which}}
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
    SELECT n.trace_id, n.span_id, %(pipeline)s, {name_sql("n", "nt")}, n.start_time,
           n.duration_ns, n.status_code, n.status_message, NULL, t.duration_ns,
           (SELECT count(*) FROM minute)
    FROM nearest n CROSS JOIN target t
    LEFT JOIN {tables.SPAN_TEMPLATE} nt ON nt.id = n.template_id
    ORDER BY n.distance, n.trace_id
    LIMIT %(count)s
"""  # noqa: S608 - a constant table name and condition, values are parameters


@dataclass(frozen=True)
class Nearest:
    """Answer to :func:`nearest_to_quantile`: the spans found (:data:`FoundRow`), the exact
    quantile (None without spans) and the number of spans it is taken over."""

    spans: list[FoundRow]
    quantile_ns: int | None
    n: int


def nearest_to_quantile(
    pipeline_id: int,
    team_id: int,
    stage_id: int | None,
    start: dt.datetime,
    end: dt.datetime,
    quantile: float,
    count: int,
) -> Nearest:
    """The ``count`` spans of ``stage_id`` (None: root spans) starting in ``[start, end)``
    nearest in duration to their exact ``quantile`` (the order statistic of rank
    ``floor(quantile * (n - 1))``), one per trace, nearest first, ties to the lower trace
    id."""
    which = "is_root" if stage_id is None else "stage_id = %(stage)s"
    params: dict[str, Any] = {
        "pipeline": pipeline_id,
        "team": team_id,
        "start": start,
        "end": end,
        "stage": stage_id,
        "q": quantile,
        "count": count,
    }
    with connection.cursor() as cursor:
        cursor.execute(_EXEMPLARS_SQL.format(which=which), params)
        rows = cursor.fetchall()
    return Nearest(
        spans=[row[:9] for row in rows],
        quantile_ns=int(rows[0][9]) if rows else None,
        n=int(rows[0][10]) if rows else 0,
    )


_TRACE_SQL: Final = f"""
    SELECT s.span_id, s.parent_span_id, {name_sql()}, st.name, s.pipeline_id, s.kind,
           s.status_code, s.status_message, s.start_time, s.duration_ns, s.is_root,
           {attributes_sql()}
    FROM {tables.SPAN} s JOIN {tables.STAGE} st ON st.id = s.stage_id {joins_sql()}
    WHERE s.team_id = ANY(%(teams)s) AND s.trace_id = %(trace)s
    ORDER BY s.start_time, s.span_id
    LIMIT %(limit)s
"""  # noqa: S608 - constant table names


def trace_spans(team_ids: Sequence[int], trace_id: uuid.UUID, limit: int) -> list[FoundRow]:
    """The first ``limit`` spans of the trace stored for ``team_ids``, by start: ``(span_id,
    parent_span_id, name, stage name, pipeline_id, kind, status_code, status_message,
    start_time, duration_ns, is_root, attributes as JSON text)``."""
    with connection.cursor() as cursor:
        cursor.execute(_TRACE_SQL, {"teams": list(team_ids), "trace": trace_id, "limit": limit})
        return cursor.fetchall()


# The newest spans of each stage from the stage index, in order, then the newest of those.
_ATTRIBUTE_KEYS: Final = f"""
SELECT DISTINCT jsonb_object_keys({attributes_sql()}) FROM (
    SELECT newest.* FROM {tables.STAGE} st
    CROSS JOIN LATERAL (
        SELECT s.start_time, s.template_id, s.attributes FROM {tables.SPAN} s
        WHERE s.pipeline_id = %(pipeline)s AND s.stage_id = st.id
          AND s.start_time >= %(start)s AND s.start_time < %(end)s
        ORDER BY s.start_time DESC
        LIMIT %(limit)s
    ) newest
    WHERE st.pipeline_id = %(pipeline)s
    ORDER BY newest.start_time DESC
    LIMIT %(limit)s
) AS s {joins_sql()}
"""  # noqa: S608 - constant table names, values are parameters


def attribute_keys(pipeline_id: int, start: dt.datetime, end: dt.datetime, limit: int) -> list[str]:
    """The attribute keys of the pipeline's newest ``limit`` spans in ``[start, end)``."""
    params: dict[str, Any] = {"pipeline": pipeline_id, "start": start, "end": end, "limit": limit}
    with connection.cursor() as cursor:
        cursor.execute(_ATTRIBUTE_KEYS, params)
        return [key for (key,) in cursor.fetchall()]
