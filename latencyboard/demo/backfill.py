"""Generating days of demo traffic as history (replaying OTLP files is :mod:`ingest.replay`).

A demo backfill is bulk generation and skips the live ingest path: spans are sampled hour by
hour with numpy (:mod:`.synthetic`) and binary-COPYed straight into the span table, each
hour with its ingest batch row in one transaction, as a live export request is. The
rollup workers cannot tell the two apart.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from latencyboard.db import conninfo
from latencyboard.demo import profiles, synthetic
from latencyboard.pipelines import mapping
from latencyboard.storage import partitions as storage_partitions
from latencyboard.storage import (
    pipelines,
    span_batches,
    span_templates,
    spans_copy,
    spans_copy_columns,
)
from latencyboard.storage.partitions import DayPartition
from latencyboard.teams.models import Team
from latencyboard.windows import DAY, unix_ns

logger = logging.getLogger(__name__)


# --- replay ------------------------------------------------------------------------------------


CHUNK = dt.timedelta(hours=1)
BACKFILL = "backfill"
"""The ``protocol`` of a backfilled batch."""


@dataclass(frozen=True)
class BackfillProgress:
    """Totals after each backfilled day (and at the end)."""

    through: dt.datetime  # traffic is written up to here
    spans: int
    batches: int
    seconds: float

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class _Source:
    """One demo pipeline of the team, ready to generate spans for it."""

    profile: profiles.Pipeline
    table: synthetic.TemplateTable
    encoder: spans_copy_columns.TemplateEncoder
    scale: float  # of the profile's live rate


def backfill_demo(
    team: Team,
    *,
    days: int,
    end: dt.datetime,
    now: dt.datetime,
    scale: float = 1.0,
    requests_per_s: float | None = None,
    start: dt.datetime | None = None,
    seed: int | None = None,
    connections: int = 2,
    progress: Callable[[BackfillProgress], None] | None = None,
) -> BackfillProgress:
    """Write ``days`` of demo traffic ending at ``end`` for ``team``'s three demo pipelines.

    Rates are the live demo's times ``scale`` (1.0 is about 18 M spans a day, see
    :func:`.synthetic.expected_spans`), or ``requests_per_s`` (a daily mean) for every
    pipeline alike when given, following the diurnal curve and the model rollouts of
    :mod:`latencyboard.demo.profiles`. ``start``, when given, replaces ``end - days`` (to
    finish a backfill that was stopped: hours count from it). ``seed`` fixes the traffic
    (counts, times, durations, failures) but never the ids, which always come fresh from the
    OS: backfilling twice adds traffic twice and never collides. Batches are ``received_at``
    ``now``.

    One hour is one ingest batch, written in one transaction by one of ``connections``
    concurrent connections while the next hours are sampled; an error stops the backfill with
    the hours before it stored.
    """
    start = end - dt.timedelta(days=days) if start is None else start
    rng = np.random.default_rng(seed)
    id_rng = np.random.default_rng()
    tally = _Tally(start, time.perf_counter(), progress)
    with ConnectionPool(
        conninfo(), min_size=connections, max_size=connections, kwargs={"autocommit": True}
    ) as pool:
        with pool.connection() as conn:
            sources = [
                _source(
                    conn,
                    team.pk,
                    profile,
                    scale if requests_per_s is None else requests_per_s / profile.requests_per_s,
                )
                for profile in profiles.PIPELINES
            ]
            storage_partitions.create_missing(conn, _days(start, end))
        with ThreadPoolExecutor(connections, thread_name_prefix="backfill") as executor:
            pending: deque[tuple[dt.datetime, Future[int]]] = deque()
            chunk_start = start
            while chunk_start < end:
                chunk_end = min(chunk_start + CHUNK, end)
                rows = [_sample(source, chunk_start, chunk_end, rng, id_rng) for source in sources]
                written = executor.submit(_write_chunk, pool, team.pk, now, sources, rows)
                pending.append((chunk_end, written))
                chunk_start = chunk_end
                # Keep every connection busy while the next hour is sampled, and no more
                # hours than that in memory.
                if len(pending) > connections:
                    tally.add(*_result(pending.popleft()))
            while pending:
                tally.add(*_result(pending.popleft()))
    result = tally.snapshot(end)
    logger.info(
        "backfill.done",
        extra={"team": team.pk, "days": days, "spans": result.spans, "seconds": result.seconds},
    )
    return result


def _result(pending: tuple[dt.datetime, Future[int]]) -> tuple[dt.datetime, int]:
    through, future = pending
    return through, future.result()


@dataclass
class _Tally:
    """Running totals of a backfill, reported at each whole day of traffic written."""

    start: dt.datetime
    started: float
    progress: Callable[[BackfillProgress], None] | None
    spans: int = 0
    batches: int = 0

    def add(self, through: dt.datetime, written: int) -> None:
        self.spans += written
        self.batches += 1 if written else 0
        if self.progress is not None and (through - self.start) % DAY == dt.timedelta():
            self.progress(self.snapshot(through))

    def snapshot(self, through: dt.datetime) -> BackfillProgress:
        return BackfillProgress(
            through, self.spans, self.batches, time.perf_counter() - self.started
        )


def _source(
    conn: psycopg.Connection[Any], team_id: int, profile: profiles.Pipeline, scale: float
) -> _Source:
    """The pipeline and stage rows of ``profile`` for the team, created where missing.

    Stages are resolved as the ingest writer resolves them: the ``inference.stage`` attribute,
    else the pipeline's stage rules, else the span name, within the pipeline's stage cap.
    """
    pipeline_id = pipelines.ensure_pipeline(
        conn, team_id, profile.name, profiles.ENVIRONMENT, stage_cap=mapping.DEFAULT_STAGE_CAP
    )
    stage_rules = pipelines.stage_rules(conn, pipeline_id)
    cap = mapping.DEFAULT_STAGE_CAP if stage_rules.cap is None else stage_rules.cap
    rules = [mapping.Rule(*row).compiled() for row in stage_rules.mapping]
    known = pipelines.stages(conn, pipeline_id)
    table = synthetic.template_table(profile)
    stage_ids = []
    for template in table.templates:
        attributes = {**table.resource, **template.attributes}
        name = mapping.resolve_stage(template.name, template.stage, attributes, rules)
        name = mapping.apply_cap(name, set(known) - {mapping.OVERFLOW_STAGE}, cap)
        if name not in known:
            known[name] = pipelines.ensure_stage(conn, pipeline_id, name)
        stage_ids.append(known[name])
    # Every attribute of a demo template repeats: all of them go into its stored template.
    resource = span_templates.Resource.of(table.resource)
    stored = [
        span_templates.Template.of(resource.id, template.name, template.attributes)
        for template in table.templates
    ]
    span_templates.ensure_resources(conn, [resource])
    span_templates.ensure_templates(conn, list({t.id: t for t in stored}.values()))
    encoder = spans_copy_columns.TemplateEncoder(
        table.templates,
        team_id=team_id,
        pipeline_id=pipeline_id,
        stage_ids=stage_ids,
        template_ids=[t.id for t in stored],
    )
    return _Source(profile, table, encoder, scale)


def _days(start: dt.datetime, end: dt.datetime) -> Iterator[DayPartition]:
    # Through the day of ``end`` itself: a child span may start a little after its root.
    day = start.astimezone(dt.UTC).date()
    while day <= end.astimezone(dt.UTC).date():
        yield DayPartition(day)
        day += DAY


def _sample(
    source: _Source,
    start: dt.datetime,
    end: dt.datetime,
    rng: np.random.Generator,
    id_rng: np.random.Generator,
) -> synthetic.SpanRows:
    profile = source.profile
    start_us = synthetic.arrivals(
        profile, unix_ns(start) // 1000, unix_ns(end) // 1000, source.scale, rng
    )
    share = profiles.candidate_share_at(profile, start_us / 1e6)
    batch = profiles.sample_requests(profile, len(start_us), rng, candidate_share=share)
    return synthetic.span_rows(source.table, batch, start_us, id_rng)


def _write_chunk(
    pool: ConnectionPool,
    team_id: int,
    received_at: dt.datetime,
    sources: Sequence[_Source],
    rows: Sequence[synthetic.SpanRows],
) -> int:
    """One hour of spans and its ingest batch row, in one transaction; returns the spans."""
    total = sum(len(part) for part in rows)
    if not total:
        return 0  # like live ingest: no batch without spans
    with pool.connection() as conn, conn.transaction(), conn.cursor() as cursor:
        batch_id = span_batches.next_batch_id(cursor)
        # Straight into the span table, not through the writer's ON CONFLICT staging: every
        # trace id is 128 fresh random bits, so no row can collide with a stored one.
        span_batches.copy_spans(cursor, _stream(sources, rows, batch_id), staged=False)
        span_batches.insert_batch(
            cursor,
            batch_id,
            team_id=team_id,
            received_at=received_at,
            protocol=BACKFILL,
            stored=total,
            duplicates=0,
            rejected=0,
        )
    return total


def _stream(
    sources: Sequence[_Source], rows: Sequence[synthetic.SpanRows], batch_id: int
) -> Iterator[bytes]:
    yield spans_copy.HEADER
    for source, part in zip(sources, rows, strict=True):
        yield from source.encoder.encode(part, batch_id)
    yield spans_copy.TRAILER
