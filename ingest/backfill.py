"""Loading history: replaying OTLP export files, and generating days of demo traffic.

Replays go through the live ingest path (the OTLP decoders and :class:`SpanWriter`), so they
are validated the same way and stay idempotent: a file replayed twice stores nothing twice.

A demo backfill is bulk generation and skips that path: spans are sampled hour by hour with
numpy (:mod:`ingest.synthetic`) and binary-COPYed straight into ``spans_span``, each hour with
its ``spans_ingestbatch`` row in one transaction, as a live export request is. The rollup
workers cannot tell the two apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import json
import logging
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from ingest import decoding, otlp_json, synthetic
from ingest.writer import DatabaseUnavailable, SpanWriter
from latencyboard.db import conninfo
from latencyboard.demo import profiles
from latencyboard.pipelines import mapping
from latencyboard.pipelines.models import Pipeline, Stage
from latencyboard.spans.partitions import DayPartition
from latencyboard.teams.models import Team

logger = logging.getLogger(__name__)

_DAY_NS = 86_400 * 10**9
_GZIP_MAGIC = b"\x1f\x8b"

# --- replay ------------------------------------------------------------------------------------


@dataclass
class ReplayReport:
    """What a replay did so far; ``reasons`` counts rejected spans by reason."""

    files: int = 0
    requests: int = 0
    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def add(self, other: ReplayReport) -> None:
        self.files += other.files
        self.requests += other.requests
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected += other.rejected
        self.reasons.update(other.reasons)


class ReplayError(Exception):
    """A file could not be replayed; ``report`` holds what was stored before it."""

    def __init__(self, path: Path, message: str, report: ReplayReport) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.report = report


def replay_files(
    team: Team,
    paths: Sequence[Path],
    *,
    max_age_days: int,
    now: dt.datetime,
    on_file: Callable[[Path, ReplayReport], None] | None = None,
) -> ReplayReport:
    """Store the spans of OTLP export files for ``team``, file by file, request by request.

    A file holds one binary protobuf ``ExportTraceServiceRequest``, one OTLP/JSON request, or
    JSON Lines of requests (what the Collector's file exporter writes); any of them may be
    gzipped. Spans starting more than ``max_age_days`` before ``now`` are rejected, as live
    ingest rejects spans older than its retention. Each request is stored in its own
    transaction, so a :class:`ReplayError` (an unreadable file or request) leaves everything
    before it stored; replaying again after a fix stores only what is missing.
    """
    missing = [path for path in paths if not path.is_file()]
    if missing:
        raise ReplayError(missing[0], "no such file", ReplayReport())
    limits = decoding.Limits(max_age_ns=max_age_days * _DAY_NS)
    now_ns = int(now.timestamp() * 10**9)
    total = ReplayReport()
    writer = SpanWriter(conninfo(), max_connections=1)
    try:
        for path in paths:
            report = ReplayReport(files=1)
            try:
                for where, fmt, body in _requests(path):
                    decode = otlp_json.decode_json if fmt == "json" else decoding.decode_protobuf
                    try:
                        decoded = decode(body, now_ns=now_ns, limits=limits)
                        _store(writer, team, decoded, f"replay/{fmt}", now, report)
                    except (decoding.DecodeError, DatabaseUnavailable) as exc:
                        raise _Unreadable(f"{where}{exc}") from exc
            except _Unreadable as exc:
                total.add(report)
                raise ReplayError(path, str(exc), total) from exc
            total.add(report)
            if on_file is not None:
                on_file(path, report)
    finally:
        writer.close()
    logger.info("replay.done", extra={"team": team.pk, "files": total.files, "spans": total.stored})
    return total


class _Unreadable(Exception):
    """A file or one of its requests cannot be read; ``replay_files`` names the file."""


def _store(
    writer: SpanWriter,
    team: Team,
    decoded: decoding.DecodedExport,
    protocol: str,
    now: dt.datetime,
    report: ReplayReport,
) -> None:
    report.requests += 1
    report.rejected += decoded.rejected_spans
    report.reasons.update(_reasons(decoded))
    if not decoded.spans:
        return  # live ingest writes no batch for a request without spans either
    result = writer.write(
        team.pk, decoded.spans, rejected=decoded.rejected_spans, protocol=protocol, received_at=now
    )
    report.stored += result.stored
    report.duplicates += result.duplicates


def _reasons(decoded: decoding.DecodedExport) -> Counter[str]:
    """Rejections by reason, read back from the partial-success message the decoder writes
    (``"3 spans rejected: 2 zero span_id, 1 end before start"``); the whole message is the
    reason should its form ever change."""
    if not decoded.rejected_spans:
        return Counter()
    reasons: Counter[str] = Counter()
    for part in decoded.error_message.partition(" rejected: ")[2].split(", "):
        count, _, reason = part.partition(" ")
        if count.isdigit() and reason:
            reasons[reason] += int(count)
    if sum(reasons.values()) != decoded.rejected_spans:
        return Counter({decoded.error_message: decoded.rejected_spans})
    return reasons


def _requests(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """``(where, format, body)`` of each request in the file; ``where`` is ``"line N: "`` in
    JSON Lines. The format is read from the content, not the file name."""
    try:
        data = path.read_bytes()
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        raise _Unreadable(f"cannot read: {exc}") from exc
    text = data.strip()
    # JSON starts with "{", maybe after white space. A protobuf request starts with "\n" (the
    # tag of its field 1) and then a length, which can be 123, a "{": but its random binary
    # ids are not UTF-8.
    if not (text.startswith(b"{") and _is_utf8(data)):
        yield "", "protobuf", data
    elif b"\n" not in text or not _is_json(text[: text.index(b"\n")]):
        yield "", "json", data  # one request, maybe pretty-printed over many lines
    else:
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line.strip():
                yield f"line {number}: ", "json", line


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _is_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


# --- demo backfill -----------------------------------------------------------------------------

CHUNK = dt.timedelta(hours=1)
_ONE_DAY = dt.timedelta(days=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_BATCH_ROW = """
INSERT INTO spans_ingestbatch (team_id, received_at, protocol, stored_spans, duplicate_spans,
                               rejected_spans)
VALUES (%s, %s, 'backfill', %s, 0, 0)
RETURNING id
"""
_COPY = f"COPY spans_span ({', '.join(synthetic.COPY_COLUMNS)}) FROM STDIN (FORMAT BINARY)"


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
    encoder: synthetic.CopyEncoder


def backfill_demo(
    team: Team,
    *,
    days: int,
    end: dt.datetime,
    now: dt.datetime,
    scale: float = 1.0,
    seed: int | None = None,
    connections: int = 2,
    progress: Callable[[BackfillProgress], None] | None = None,
) -> BackfillProgress:
    """Write ``days`` of demo traffic ending at ``end`` for ``team``'s three demo pipelines.

    Rates are the live demo's times ``scale`` (1.0 is about 18 M spans a day, see
    :func:`ingest.synthetic.expected_spans`), following the diurnal curve and the model
    rollouts of :mod:`latencyboard.demo.profiles`. ``seed`` fixes the traffic (counts, times,
    durations, failures) but never the ids, which always come fresh from the OS: backfilling
    twice adds traffic twice and never collides. Batches are ``received_at`` ``now``.

    One hour is one ingest batch, written in one transaction by one of ``connections``
    concurrent connections while the next hours are sampled; an error stops the backfill with
    the hours before it stored.
    """
    start = end - dt.timedelta(days=days)
    rng = np.random.default_rng(seed)
    id_rng = np.random.default_rng()
    sources = [_source(team, profile) for profile in profiles.PIPELINES]
    tally = _Tally(start, time.perf_counter(), progress)
    with ConnectionPool(
        conninfo(), min_size=connections, max_size=connections, kwargs={"autocommit": True}
    ) as pool:
        with pool.connection() as conn:
            _create_partitions(conn, start, end)
        with ThreadPoolExecutor(connections, thread_name_prefix="backfill") as executor:
            pending: deque[tuple[dt.datetime, Future[int]]] = deque()
            chunk_start = start
            while chunk_start < end:
                chunk_end = min(chunk_start + CHUNK, end)
                rows = [
                    _sample(source, chunk_start, chunk_end, scale, rng, id_rng)
                    for source in sources
                ]
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
        if self.progress is not None and (through - self.start) % _ONE_DAY == dt.timedelta():
            self.progress(self.snapshot(through))

    def snapshot(self, through: dt.datetime) -> BackfillProgress:
        return BackfillProgress(
            through, self.spans, self.batches, time.perf_counter() - self.started
        )


def _source(team: Team, profile: profiles.Pipeline) -> _Source:
    """The pipeline and stage rows of ``profile`` for ``team``, created where missing.

    Stages are resolved as the ingest writer resolves them: the ``inference.stage`` attribute,
    else the pipeline's stage rules, else the span name, within the pipeline's stage cap.
    """
    pipeline, _ = Pipeline.objects.get_or_create(
        team=team, service_name=profile.name, environment=profiles.ENVIRONMENT
    )
    rules = [rule.as_rule().compiled() for rule in pipeline.stage_rules.all()]
    known = dict(pipeline.stages.values_list("name", "id"))
    table = synthetic.template_table(profile)
    stage_ids = []
    for template in table.templates:
        name = mapping.resolve_stage(template.name, template.stage, template.attributes, rules)
        name = mapping.apply_cap(name, set(known) - {mapping.OVERFLOW_STAGE}, pipeline.stage_cap)
        if name not in known:
            known[name] = Stage.objects.get_or_create(pipeline=pipeline, name=name)[0].pk
        stage_ids.append(known[name])
    encoder = synthetic.CopyEncoder(
        table.templates, team_id=team.pk, pipeline_id=pipeline.pk, stage_ids=stage_ids
    )
    return _Source(profile, table, encoder)


def _create_partitions(conn: psycopg.Connection, start: dt.datetime, end: dt.datetime) -> None:
    # Through the day of ``end`` itself: a child span may start a little after its root.
    day = start.astimezone(dt.UTC).date()
    while day <= end.astimezone(dt.UTC).date():
        # DuplicateTable: ingest or another backfill created it at the same moment.
        with contextlib.suppress(psycopg.errors.DuplicateTable):
            conn.execute(DayPartition(day).create_sql())
        day += dt.timedelta(days=1)


def _sample(
    source: _Source,
    start: dt.datetime,
    end: dt.datetime,
    scale: float,
    rng: np.random.Generator,
    id_rng: np.random.Generator,
) -> synthetic.SpanRows:
    profile = source.profile
    start_us = synthetic.arrivals(profile, _unix_us(start), _unix_us(end), scale, rng)
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
        cursor.execute(_BATCH_ROW, [team_id, received_at, total])
        row = cursor.fetchone()
        assert row is not None
        # Straight into the span table, not through the writer's ON CONFLICT staging: every
        # trace id is 128 fresh random bits, so no row can collide with a stored one.
        with cursor.copy(_COPY) as copy:
            copy.write(synthetic.COPY_HEADER)
            for source, part in zip(sources, rows, strict=True):
                for block in source.encoder.encode(part, row[0]):
                    copy.write(block)
            copy.write(synthetic.COPY_TRAILER)
    return total


def _unix_us(moment: dt.datetime) -> int:
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)
