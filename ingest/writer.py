"""Stores decoded spans: one export request, one transaction, each span at most once.

Spans are COPYed (binary) into a per-connection temporary table, then moved into the
partitioned span table with ``INSERT … ON CONFLICT DO NOTHING`` on the span's identity, so a
retried request stores nothing twice. The ingest batch row is written by the same statement,
and the transaction commits before the client is told ``200``.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import orjson
import psycopg
from psycopg_pool import ConnectionPool

from ingest.decoding import DecodedSpan
from latencyboard.pipelines import mapping
from latencyboard.spans import partitions

logger = logging.getLogger(__name__)

SERVER_KIND = 2
_DICTIONARY_TTL = 30.0

_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS span_staging (
    pipeline_id bigint, stage_id bigint, trace_id uuid, span_id bigint, parent_span_id bigint,
    name text, kind smallint, status_code smallint, status_message text, start_us bigint,
    duration_ns bigint, is_root boolean, attributes text
) ON COMMIT DELETE ROWS
"""
_STAGING_TYPES = [
    "int8",
    "int8",
    "uuid",
    "int8",
    "int8",
    "text",
    "int2",
    "int2",
    "text",
    "int8",
    "int8",
    "bool",
    "text",
]
_MOVE = """
WITH batch AS (SELECT nextval('spans_ingestbatch_id_seq') AS id),
stored AS (
    INSERT INTO spans_span (
        team_id, pipeline_id, stage_id, batch_id, trace_id, span_id, parent_span_id, name, kind,
        status_code, status_message, start_time, duration_ns, is_root, attributes
    )
    SELECT %(team)s, pipeline_id, stage_id, (SELECT id FROM batch), trace_id, span_id,
           parent_span_id, name,
           kind, status_code, status_message,
           'epoch'::timestamptz + start_us * interval '1 microsecond', duration_ns, is_root,
           attributes::jsonb
    FROM span_staging
    ON CONFLICT DO NOTHING
    RETURNING 1
)
INSERT INTO spans_ingestbatch (
    id, team_id, received_at, protocol, stored_spans, duplicate_spans, rejected_spans
)
SELECT (SELECT id FROM batch), %(team)s, %(received)s, %(protocol)s, count(*),
       %(total)s - count(*), %(rejected)s
FROM stored
RETURNING id, stored_spans
"""


@dataclass(frozen=True, slots=True)
class WriteResult:
    batch_id: int
    stored: int
    duplicates: int


class DatabaseUnavailable(Exception):
    """The database cannot take the batch now; the client should retry later (503)."""


def _span_id(raw: bytes | None) -> int | None:
    return None if raw is None else int.from_bytes(raw, "big", signed=True)


_START_US = 9


def _create_partitions(conn: psycopg.Connection, rows: list[tuple[object, ...]]) -> None:
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    days = {
        partitions.DayPartition.of(epoch + dt.timedelta(microseconds=row[_START_US]))  # type: ignore[arg-type]
        for row in rows
    }
    for partition in sorted(days, key=lambda p: p.day):
        try:
            with conn.transaction():
                conn.execute(partition.create_sql())
        except psycopg.errors.DuplicateTable:
            pass  # another ingest process created it at the same moment
    logger.info("ingest.partitions_created", extra={"days": sorted(str(p.day) for p in days)})


def _configure(conn: psycopg.Connection) -> None:
    conn.execute(_STAGING)
    conn.commit()


class _PipelineDirectory:
    """Pipeline and stage ids by name, cached per process; rows are created on first sight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipelines: dict[tuple[int, str, str], int] = {}
        self._stages: dict[int, dict[str, int]] = {}
        self._rules: dict[int, tuple[float, list[mapping.CompiledRule], int]] = {}

    def pipeline(self, conn: psycopg.Connection, team_id: int, service: str, env: str) -> int:
        key = (team_id, service, env)
        found = self._pipelines.get(key)
        if found is not None:
            return found
        row = conn.execute(
            """
            INSERT INTO pipelines_pipeline (team_id, service_name, environment, stage_cap,
                                            created_at)
            VALUES (%s, %s, %s, %s, now())
            ON CONFLICT (team_id, service_name, environment)
                DO UPDATE SET team_id = EXCLUDED.team_id
            RETURNING id
            """,
            [team_id, service[:255], env[:100], mapping.DEFAULT_STAGE_CAP],
        ).fetchone()
        assert row is not None
        with self._lock:
            self._pipelines[key] = row[0]
        return int(row[0])

    def rules(
        self, conn: psycopg.Connection, pipeline_id: int
    ) -> tuple[list[mapping.CompiledRule], int]:
        cached = self._rules.get(pipeline_id)
        now = time.monotonic()
        if cached is not None and now - cached[0] < _DICTIONARY_TTL:
            return cached[1], cached[2]
        rows = conn.execute(
            """
            SELECT stage, name_pattern, attribute, value_pattern FROM pipelines_stagerule
            WHERE pipeline_id = %s ORDER BY position, id
            """,
            [pipeline_id],
        ).fetchall()
        cap_row = conn.execute(
            "SELECT stage_cap FROM pipelines_pipeline WHERE id = %s", [pipeline_id]
        ).fetchone()
        compiled = [mapping.Rule(*row).compiled() for row in rows]
        cap = int(cap_row[0]) if cap_row else mapping.DEFAULT_STAGE_CAP
        with self._lock:
            self._rules[pipeline_id] = (now, compiled, cap)
            self._stages.pop(pipeline_id, None)  # re-read stages too, other processes add some
        return compiled, cap

    def stage(self, conn: psycopg.Connection, pipeline_id: int, name: str, cap: int) -> int:
        stages = self._stages.get(pipeline_id)
        if stages is None:
            rows = conn.execute(
                "SELECT name, id FROM pipelines_stage WHERE pipeline_id = %s", [pipeline_id]
            ).fetchall()
            stages = {row[0]: int(row[1]) for row in rows}
            with self._lock:
                self._stages[pipeline_id] = stages
        found = stages.get(name)
        if found is not None:
            return found
        capped = mapping.apply_cap(name, set(stages) - {mapping.OVERFLOW_STAGE}, cap)
        if capped in stages:
            return stages[capped]
        row = conn.execute(
            """
            INSERT INTO pipelines_stage (pipeline_id, name, created_at) VALUES (%s, %s, now())
            ON CONFLICT (pipeline_id, name) DO UPDATE SET name = EXCLUDED.name
            RETURNING id
            """,
            [pipeline_id, capped],
        ).fetchone()
        assert row is not None
        with self._lock:
            stages[capped] = int(row[0])
        return int(row[0])


class SpanWriter:
    """Writes export requests to PostgreSQL through a small connection pool."""

    def __init__(self, conninfo: str, *, max_connections: int = 8, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self.pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_connections,
            configure=_configure,
            open=True,
            timeout=timeout,
            kwargs={"connect_timeout": max(1, int(timeout))},
        )
        self.directory = _PipelineDirectory()

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
                rows = self._rows(conn, team_id, spans)
                conn.commit()
                try:
                    return self._store(conn, team_id, rows, rejected, protocol, received_at)
                except psycopg.errors.CheckViolation:
                    # No partition for some day of these spans (a replay, or late spans):
                    # create the missing days and store again.
                    _create_partitions(conn, rows)
                    return self._store(conn, team_id, rows, rejected, protocol, received_at)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(str(exc)) from exc
        except TimeoutError as exc:  # PoolTimeout is a subclass
            raise DatabaseUnavailable("no database connection free") from exc

    @staticmethod
    def _store(
        conn: psycopg.Connection,
        team_id: int,
        rows: list[tuple[object, ...]],
        rejected: int,
        protocol: str,
        received_at: dt.datetime,
    ) -> WriteResult:
        with conn.transaction(), conn.cursor() as cursor:
            with cursor.copy("COPY span_staging FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(_STAGING_TYPES)
                for row in rows:
                    copy.write_row(row)
            cursor.execute(
                _MOVE,
                {
                    "team": team_id,
                    "received": received_at,
                    "protocol": protocol,
                    "total": len(rows),
                    "rejected": rejected,
                },
            )
            written = cursor.fetchone()
        assert written is not None
        batch_id, stored = int(written[0]), int(written[1])
        return WriteResult(batch_id=batch_id, stored=stored, duplicates=len(rows) - stored)

    def _rows(
        self, conn: psycopg.Connection, team_id: int, spans: Sequence[DecodedSpan]
    ) -> list[tuple[object, ...]]:
        directory = self.directory
        dumps = orjson.dumps
        rows: list[tuple[object, ...]] = []
        pipeline_ids: dict[tuple[str, str], tuple[int, list[mapping.CompiledRule], int]] = {}
        stage_ids: dict[tuple[int, str], int] = {}
        for span in spans:
            key = (span.service_name, span.environment)
            resolved = pipeline_ids.get(key)
            if resolved is None:
                pipeline_id = directory.pipeline(conn, team_id, *key)
                rules, cap = directory.rules(conn, pipeline_id)
                resolved = pipeline_ids[key] = (pipeline_id, rules, cap)
            pipeline_id, rules, cap = resolved
            stage_name = mapping.resolve_stage(span.name, span.stage, span.attributes, rules)
            stage_id = stage_ids.get((pipeline_id, stage_name))
            if stage_id is None:
                stage_id = directory.stage(conn, pipeline_id, stage_name, cap)
                stage_ids[(pipeline_id, stage_name)] = stage_id
            rows.append(
                (
                    pipeline_id,
                    stage_id,
                    uuid.UUID(bytes=span.trace_id),
                    _span_id(span.span_id),
                    _span_id(span.parent_span_id),
                    span.name,
                    span.kind,
                    span.status_code,
                    span.status_message,
                    span.start_ns // 1000,
                    span.end_ns - span.start_ns,
                    span.parent_span_id is None or span.kind == SERVER_KIND,
                    dumps(span.attributes).decode(),
                )
            )
        return rows
