"""Stores decoded spans: one export request, one transaction, each span at most once.

A new request is COPYed (binary) straight into the partitioned span table together with its
ingest batch row. A retried request hits the table's unique index on the span identity, rolls
back, and goes again through a per-connection staging table and ``INSERT … ON CONFLICT DO
NOTHING``, so it stores only what is missing. Either way the transaction commits before the
client is told ``200``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from ingest import copyrows
from ingest.decoding import DecodedSpan
from latencyboard.pipelines import mapping
from latencyboard.spans import partitions

logger = logging.getLogger(__name__)

SERVER_KIND = 2
_DICTIONARY_TTL = 30.0

_COLUMNS = copyrows.COLUMNS
_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS span_staging
    (LIKE spans_span INCLUDING DEFAULTS) ON COMMIT DELETE ROWS
"""
_MOVE = f"""
WITH stored AS (
    INSERT INTO spans_span ({_COLUMNS})
    SELECT {_COLUMNS} FROM span_staging
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM stored
"""  # noqa: S608 - a constant column list, no input
_BATCH = """
INSERT INTO spans_ingestbatch (
    id, team_id, received_at, protocol, stored_spans, duplicate_spans, rejected_spans
) VALUES (%s, %s, %s, %s, %s, %s, %s)
"""


@dataclass(frozen=True, slots=True)
class WriteResult:
    batch_id: int
    stored: int
    duplicates: int


class DatabaseUnavailable(Exception):
    """The database cannot take the batch now; the client should retry later (503)."""


@dataclass(frozen=True, slots=True)
class _Batch:
    team_id: int
    received_at: dt.datetime
    protocol: str
    rejected: int


def _store(conn: psycopg.Connection, rows: list[bytes], batch: _Batch) -> WriteResult:
    """COPY straight into spans_span; a request seen before takes the idempotent path.

    Nearly every request is new, so the cheap path is a plain COPY. A span already stored
    makes that COPY fail with a unique violation and roll back; the rows then go through the
    staging table and ``INSERT … ON CONFLICT DO NOTHING``, which stores only the new ones.
    """
    try:
        return _copy(conn, rows, batch, direct=True)
    except psycopg.errors.UniqueViolation:
        return _copy(conn, rows, batch, direct=False)


def _copy(
    conn: psycopg.Connection, rows: list[bytes], batch: _Batch, *, direct: bool
) -> WriteResult:
    with conn.transaction(), conn.cursor() as cursor:
        batch_row = cursor.execute("SELECT nextval('spans_ingestbatch_id_seq')").fetchone()
        assert batch_row is not None
        batch_id = int(batch_row[0])
        target = "spans_span" if direct else "span_staging"
        with cursor.copy(f"COPY {target} ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(copyrows.stream(copyrows.prefix(batch.team_id, batch_id), rows))
        stored = len(rows)
        if not direct:
            counted = cursor.execute(_MOVE).fetchone()
            assert counted is not None
            stored = int(counted[0])
        cursor.execute(
            _BATCH,
            [
                batch_id,
                batch.team_id,
                batch.received_at,
                batch.protocol,
                stored,
                len(rows) - stored,
                batch.rejected,
            ],
        )
    return WriteResult(batch_id=batch_id, stored=stored, duplicates=len(rows) - stored)


def create_partitions(conn: psycopg.Connection, days: Iterable[partitions.DayPartition]) -> None:
    """Create the day partitions of ``days`` that are missing, oldest first."""
    for partition in sorted(days, key=lambda p: p.day):
        # Another ingest process or a backfill may create the same day at the same moment.
        with contextlib.suppress(psycopg.errors.DuplicateTable):
            conn.execute(partition.create_sql())


def _create_partitions(conn: psycopg.Connection, spans: Sequence[DecodedSpan]) -> None:
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    days = {
        partitions.DayPartition.of(epoch + dt.timedelta(microseconds=span.start_ns // 1000))
        for span in spans
    }
    create_partitions(conn, days)
    logger.info("ingest.partitions_created", extra={"days": sorted(str(p.day) for p in days)})


def _configure(conn: psycopg.Connection) -> None:
    conn.execute(_STAGING)


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
            # Autocommit, so dictionary rows (pipelines, stages) are committed before their
            # ids are cached and shared with other threads; spans get explicit transactions.
            kwargs={"connect_timeout": max(1, int(timeout)), "autocommit": True},
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
                batch = _Batch(team_id, received_at, protocol, rejected)
                try:
                    return _store(conn, rows, batch)
                except psycopg.errors.CheckViolation:
                    # No partition for some day of these spans (a replay, or late spans):
                    # create the missing days and store again.
                    _create_partitions(conn, spans)
                    return _store(conn, rows, batch)
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(str(exc)) from exc
        except TimeoutError as exc:  # PoolTimeout is a subclass
            raise DatabaseUnavailable("no database connection free") from exc

    def _rows(
        self, conn: psycopg.Connection, team_id: int, spans: Sequence[DecodedSpan]
    ) -> list[bytes]:
        directory = self.directory
        encode = copyrows.encode_span
        rows: list[bytes] = []
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
                encode(
                    pipeline_id,
                    stage_id,
                    span.trace_id,
                    span.span_id,
                    span.parent_span_id,
                    span.name,
                    span.kind,
                    span.status_code,
                    span.status_message,
                    span.start_ns,
                    span.end_ns - span.start_ns,
                    span.parent_span_id is None or span.kind == SERVER_KIND,
                    span.attributes,
                )
            )
        return rows
