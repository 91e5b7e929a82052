"""Stores decoded spans: one export request, one transaction, each span at most once.

A new request is COPYed (binary) straight into the partitioned span table together with its
ingest batch row. A retried request hits the table's unique index on the span identity, rolls
back, and goes again through a per-connection staging table and ``INSERT … ON CONFLICT DO
NOTHING``, so it stores only what is missing. Either way the transaction commits before the
client is told ``200``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from ingest import derived_rows, directories
from ingest.decoding import DecodedSpan
from latencyboard.pipelines import derivation, mapping
from latencyboard.storage import partitions as storage_partitions
from latencyboard.storage import span_batches, span_events, span_templates, spans_copy
from latencyboard.windows import from_unix_ns

logger = logging.getLogger(__name__)

SERVER_KIND = 2
DEFAULT_MAX_PIPELINES = 200


@dataclass(frozen=True, slots=True)
class WriteResult:
    batch_id: int
    stored: int
    duplicates: int
    # Spans of pipelines the team may not have (past its pipeline cap): not stored.
    refused: int = 0
    dropped_events: int = 0  # that the stored spans lack (limits, or the SDK's count)
    dropped_event_attributes: int = 0


class DatabaseUnavailable(Exception):
    """The database cannot take the batch now; the client should retry later (503)."""


@dataclass(frozen=True, slots=True)
class _Batch:
    team_id: int
    received_at: dt.datetime
    protocol: str
    rejected: int
    events: list[span_events.EventRow]  # of the spans that have any


def _store(conn: psycopg.Connection, rows: list[bytes], spans: int, batch: _Batch) -> WriteResult:
    """COPY straight into the span table; a request seen before takes the idempotent path.

    Nearly every request is new, so the cheap path is a plain COPY. A span already stored
    makes that COPY fail with a unique violation and roll back; the rows then go through the
    staging table and ``INSERT … ON CONFLICT DO NOTHING``, which stores only the new ones.
    ``rows[:spans]`` are the request's spans, the rest derived from them: only spans are
    counted stored or duplicate.
    """
    try:
        return _copy(conn, rows, spans, batch, direct=True)
    except psycopg.errors.UniqueViolation:
        return _copy(conn, rows, spans, batch, direct=False)


def _copy(
    conn: psycopg.Connection, rows: list[bytes], spans: int, batch: _Batch, *, direct: bool
) -> WriteResult:
    with conn.transaction(), conn.cursor() as cursor:
        batch_id = span_batches.next_batch_id(cursor)
        prefix = spans_copy.prefix(batch_id)
        if direct:
            span_batches.copy_spans(cursor, (spans_copy.stream(prefix, rows),), staged=False)
            stored = spans
        else:
            staged = (spans_copy.stream(prefix, rows[:spans]),)
            span_batches.copy_spans(cursor, staged, staged=True)
            stored = span_batches.move_staged(cursor)
            if len(rows) > spans:
                # The derived rows, counted apart (the staged spans, stored by now, are
                # left as they are).
                derived = (spans_copy.stream(prefix, rows[spans:]),)
                span_batches.copy_spans(cursor, derived, staged=True)
                span_batches.move_staged(cursor)
        span_events.insert(cursor, batch.team_id, batch.events)
        span_batches.insert_batch(
            cursor,
            batch_id,
            team_id=batch.team_id,
            received_at=batch.received_at,
            protocol=batch.protocol,
            stored=stored,
            duplicates=spans - stored,
            rejected=batch.rejected,
        )
    return WriteResult(batch_id=batch_id, stored=stored, duplicates=spans - stored)


def _store_late(
    conn: psycopg.Connection, rows: list[bytes], spans: int, batch: _Batch
) -> WriteResult:
    """:func:`_store` once the days of the spans are created; a row derived from a span of
    days may start on a day between, which has none: then the spans are stored without
    their derived rows rather than not at all."""
    try:
        return _store(conn, rows, spans, batch)
    except psycopg.errors.CheckViolation:
        logger.warning("ingest.derived_rows_left_out", extra={"rows": len(rows) - spans})
        return _store(conn, rows[:spans], spans, batch)


def _create_partitions(conn: psycopg.Connection, spans: Sequence[DecodedSpan]) -> None:
    """The days of ``spans``' starts and ends: a row derived from a span starts within it."""
    days = {
        storage_partitions.DayPartition.of(from_unix_ns(ns))
        for span in spans
        for ns in (span.start_ns, span.end_ns)
    }
    storage_partitions.create_missing(conn, days)
    logger.info("ingest.partitions_created", extra={"days": sorted(str(p.day) for p in days)})


def _with_all_spans(
    looked: dict[int, tuple[derived_rows.PipelineRules, list[int]]],
    pipelines: set[int],
    kept: Sequence[DecodedSpan],
    pipeline_ids: Mapping[tuple[str, str], tuple[int, derived_rows.PipelineRules] | None],
) -> None:
    """Give ``pipelines`` all their spans of ``kept`` to derive from (an event stage's end
    may be on any span below its start)."""
    for pipeline_id in pipelines:
        looked[pipeline_id][1].clear()
    for index, span in enumerate(kept):
        resolved = pipeline_ids[(span.service_name, span.environment)]
        if resolved is not None and resolved[0] in pipelines:
            looked[resolved[0]][1].append(index)


class SpanWriter:
    """Writes export requests to PostgreSQL through a small connection pool."""

    def __init__(
        self,
        conninfo: str,
        *,
        max_connections: int = 8,
        timeout: float = 5.0,
        max_pipelines: int = DEFAULT_MAX_PIPELINES,
        stage_cap: int = mapping.DEFAULT_STAGE_CAP,
    ) -> None:
        self.timeout = timeout
        self.pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_connections,
            configure=span_batches.prepare_connection,
            open=True,
            timeout=timeout,
            # Autocommit, so dictionary rows (pipelines, stages) are committed before their
            # ids are cached and shared with other threads; spans get explicit transactions.
            kwargs={"connect_timeout": max(1, int(timeout)), "autocommit": True},
        )
        self.directory = directories.PipelineDirectory(max_pipelines, stage_cap)
        self.templates = directories.TemplateDirectory()

    def close(self) -> None:
        self.pool.close()

    def write(
        self,
        team_id: int,
        spans: Sequence[DecodedSpan],
        *,
        rejected: int,
        protocol: str,
        received_at: dt.datetime,
    ) -> WriteResult:
        """Store ``spans`` for ``team_id`` in one transaction; returns once committed."""
        try:
            with self.pool.connection(timeout=self.timeout) as conn:
                rows, kept, evented = self._rows(conn, team_id, spans)
                refused = len(spans) - len(kept)
                event_rows = span_events.rows_of(evented)
                batch = _Batch(team_id, received_at, protocol, rejected + refused, event_rows)
                try:
                    result = _store(conn, rows, len(kept), batch)
                except psycopg.errors.CheckViolation:
                    # No partition for some day of these spans (a replay, or late spans):
                    # create the missing days and store again.
                    _create_partitions(conn, spans)
                    result = _store_late(conn, rows, len(kept), batch)
                dropped, attributes = span_events.dropped(event_rows)
                return dataclasses.replace(
                    result,
                    refused=refused,
                    dropped_events=dropped,
                    dropped_event_attributes=attributes,
                )
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(str(exc)) from exc
        except TimeoutError as exc:  # PoolTimeout is a subclass
            raise DatabaseUnavailable("no database connection free") from exc

    def _rows(
        self, conn: psycopg.Connection, team_id: int, spans: Sequence[DecodedSpan]
    ) -> tuple[list[bytes], list[DecodedSpan], list[DecodedSpan]]:
        """The COPY rows of ``spans`` and of the stages derived from them, the spans they are
        of (all but those refused, with their token bands), and those of them with events."""
        directory = self.directory
        templates = self.templates
        encode = spans_copy.encode_span
        rows: list[bytes] = []
        pipeline_ids: dict[tuple[str, str], tuple[int, derived_rows.PipelineRules] | None] = {}
        stage_ids: dict[tuple[int, str], int] = {}
        # The spans of one OTLP resource share its mapping object: one lookup per resource.
        resource_ids: dict[int, int] = {}
        new_resources: dict[int, span_templates.Resource] = {}
        new_templates: dict[int, span_templates.Template] = {}
        kept: list[DecodedSpan] = []  # within the pipeline cap, with their token bands
        evented: list[DecodedSpan] = []  # those of them with events (or events dropped)
        # Pipelines with spans to derive stages from: their rules and those spans' indexes
        # in kept; those with a start event, whose end may be on any span below.
        looked: dict[int, tuple[derived_rows.PipelineRules, list[int]]] = {}
        by_events: set[int] = set()
        for span in spans:
            key = (span.service_name, span.environment)
            if key in pipeline_ids:
                resolved = pipeline_ids[key]
            else:
                found = directory.pipeline(conn, team_id, *key)
                resolved = pipeline_ids[key] = (
                    None if found is None else (found, directory.rules(conn, found))
                )
            if resolved is None:  # past the team's pipeline cap
                continue
            pipeline_id, rules = resolved
            if span.events or span.dropped_events:
                evented.append(span)
                if rules.by_events(span):
                    looked.setdefault(pipeline_id, (rules, []))[1].append(len(kept))
                    by_events.add(pipeline_id)
            if not rules.keys.isdisjoint(span.attributes):
                indexes = looked.setdefault(pipeline_id, (rules, []))[1]
                if not indexes or indexes[-1] != len(kept):
                    indexes.append(len(kept))
                bands = derivation.token_bands(span.attributes) if rules.measures else None
                if bands:
                    span = span._replace(attributes={**span.attributes, **bands})
            mapping_rules = rules.mapping
            merged = {**span.resource, **span.attributes} if mapping_rules else span.attributes
            stage_name = mapping.resolve_stage(span.name, span.stage, merged, mapping_rules)
            stage_id = stage_ids.get((pipeline_id, stage_name))
            if stage_id is None:
                stage_id = directory.stage(conn, pipeline_id, stage_name, rules.cap)
                stage_ids[(pipeline_id, stage_name)] = stage_id
            resource_id = resource_ids.get(id(span.resource))
            if resource_id is None:
                resource_id = templates.resource(span.resource, new_resources)
                resource_ids[id(span.resource)] = resource_id
            kept.append(span)
            template_id, own = templates.template(
                resource_id, span.name, span.attributes, new_templates
            )
            rows.append(
                encode(
                    team_id,
                    pipeline_id,
                    stage_id,
                    template_id,
                    span.trace_id,
                    span.span_id,
                    span.parent_span_id,
                    span.kind,
                    span.status_code,
                    span.status_message,
                    span.start_ns,
                    span.end_ns - span.start_ns,
                    span.parent_span_id is None or span.kind == SERVER_KIND,
                    own,
                )
            )
        if looked:

            def stage_of(pipeline_id: int, name: str, definition: str) -> int:
                cap = looked[pipeline_id][0].cap
                return directory.stage(conn, pipeline_id, name, cap, definition)

            def template_of(
                resource_id: int, name: str, attributes: dict[str, object]
            ) -> directories.Split:
                return templates.template(resource_id, name, attributes, new_templates)

            if by_events:
                _with_all_spans(looked, by_events, kept, pipeline_ids)
            lookups = derived_rows.Lookups(stage_of, template_of)
            rows.extend(
                derived_rows.encode(
                    team_id, kept, looked, lambda s: resource_ids[id(s.resource)], lookups
                )
            )
        if new_resources or new_templates:
            templates.store(conn, new_resources, new_templates)
        return rows, kept, evented
